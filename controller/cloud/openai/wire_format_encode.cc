// The encoders of the OpenAI wire format: what the service sends, written from our value types.
// Only fakes, the emulator's tests and round-trip tests use them (the client decodes); they sit
// apart from the decoders in wire_format.cc so that each file stays one concern. Stateless;
// thread-safe.
#include <nlohmann/json.hpp>

#include "controller/cloud/openai/wire_format.h"

namespace sbx::controller::openai {
namespace {

using json = nlohmann::json;

json OptJson(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }
json OptJson(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

json EncodeUsageJson(const Usage& u) {
  json j = {{"input_tokens", u.input_tokens},
            {"output_tokens", u.output_tokens},
            {"total_tokens", u.total_tokens}};
  for (const auto& [name, value] : u.details) {
    json* at = &j;
    size_t from = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', from)) {
      at = &(*at)[name.substr(from, dot - from)];
      from = dot + 1;
    }
    (*at)[name.substr(from)] = value;
  }
  return j;
}

json EncodeApiError(const ApiError& e);

json EncodeTurnJson(const Turn& t) {
  json j = {{"id", t.id},
            {"object", "agent.session.turn"},
            {"session_id", t.session_id},
            {"agent_id", OptJson(t.agent_id)},
            {"subagent_id", OptJson(t.subagent_id)},
            {"status", t.status == TurnStatus::kUnknown ? t.status_raw
                                                        : std::string(TurnStatusName(t.status))},
            {"created_at", t.created_at},
            {"started_at", OptJson(t.started_at)},
            {"completed_at", OptJson(t.completed_at)}};
  j["error"] = t.error ? EncodeApiError(*t.error) : json(nullptr);
  j["usage"] = t.usage ? EncodeUsageJson(*t.usage) : json(nullptr);
  return j;
}

json EncodeItemJson(const Item& it) {
  json j = {
      {"id", it.id},
      {"type", it.type == ItemType::kOther ? it.type_raw : std::string(ItemTypeName(it.type))},
      {"turn_id", OptJson(it.turn_id)},
      {"status",
       it.status == ItemStatus::kUnknown ? it.status_raw : std::string(ItemStatusName(it.status))}};
  if (it.type == ItemType::kMessage) {
    j["role"] = it.role;
    j["content"] = json::array(
        {{{"type", it.role == "user" ? "input_text" : "output_text"}, {"text", it.text}}});
    j["phase"] = OptJson(it.phase);
  } else if (it.type == ItemType::kCommandExecution) {
    j["command"] = it.command;
    j["cwd"] = OptJson(it.cwd);
    j["exit_code"] = OptJson(it.exit_code);
    j["duration_ms"] = OptJson(it.duration_ms);
    j["output"] = it.output;
  }
  return j;
}

template <typename T, typename EncodeRow>
std::string EncodePage(const ListPage<T>& page, EncodeRow encode_row) {
  json data = json::array();
  for (const T& row : page.data) {
    data.push_back(encode_row(row));
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"has_more", page.has_more},
              {"first_id", page.first_id.empty() ? json(nullptr) : json(page.first_id)},
              {"last_id", page.last_id.empty() ? json(nullptr) : json(page.last_id)}}
      .dump();
}

json EncodeSessionJson(const Session& s) {
  json j = {{"id", s.id}, {"object", "agent.session"}};
  j["status"] = s.status == SessionStatus::kUnknown && !s.status_raw.empty()
                    ? s.status_raw
                    : std::string(SessionStatusName(s.status));
  json actions = json::array();
  for (const RequiredAction& a : s.required_actions) {
    json ja = {{"type", a.type_raw}};
    if (a.type_raw == "environment_connection") {
      ja["environment_id"] = a.environment_id;
    } else if (a.type_raw == "function_call") {
      ja["turn_id"] = a.turn_id;
      ja["call_id"] = a.call_id;
      ja["name"] = a.name;
      ja["arguments"] = a.arguments;
    }
    actions.push_back(std::move(ja));
  }
  j["required_actions"] = std::move(actions);
  const SessionEnvironment& e = s.environment;
  json env = {{"type", e.type == EnvironmentType::kUnknown && !e.type_raw.empty()
                           ? e.type_raw
                           : std::string(EnvironmentTypeName(e.type))}};
  if (e.type != EnvironmentType::kNone) {
    env["id"] = e.id;
  }
  if (e.type == EnvironmentType::kSelfHosted) {
    env["remote_url"] = e.remote_url;
    env["workspace_directory"] = e.workspace_directory;
    env["capability_directories"] = e.capability_directories;
  }
  if (e.status) {
    env["status"] = std::string(EnvironmentStatusName(*e.status));
  }
  j["environment"] = std::move(env);
  json agent = {{"id", s.agent.id}, {"model", s.agent.model}};
  agent["instructions"] = s.agent.instructions ? json(*s.agent.instructions) : json(nullptr);
  agent["name"] = s.agent.name ? json(*s.agent.name) : json(nullptr);
  j["agent"] = std::move(agent);
  j["created_at"] = s.created_at;
  j["last_active_at"] = s.last_active_at;
  j["error"] = s.error ? json(*s.error) : json(nullptr);
  j["metadata"] = s.metadata;
  j["usage"] = nullptr;
  j["vault_ids"] = json::array();
  return j;
}

json EncodeEnvironmentJson(const Environment& e) {
  return {{"id", e.id},
          {"object", "agent.environment"},
          {"type", e.type == EnvironmentType::kUnknown ? e.type_raw
                                                       : std::string(EnvironmentTypeName(e.type))},
          {"status", e.status == EnvironmentStatus::kUnknown
                         ? e.status_raw
                         : std::string(EnvironmentStatusName(e.status))},
          {"files", json::array()},
          {"plugins", json::array()},
          {"skills", json::array()}};
}

json EncodeApiError(const ApiError& e) {
  return {{"type", e.type},
          {"message", e.message},
          {"code", e.code.empty() ? json(nullptr) : json(e.code)},
          {"param", e.param.empty() ? json(nullptr) : json(e.param)}};
}

}  // namespace

std::string EncodeSession(const Session& session) { return EncodeSessionJson(session).dump(); }

std::string EncodeEnvironment(const Environment& environment) {
  return EncodeEnvironmentJson(environment).dump();
}

std::string EncodeTurn(const Turn& turn) { return EncodeTurnJson(turn).dump(); }
std::string EncodeItem(const Item& item) { return EncodeItemJson(item).dump(); }
std::string EncodeTurnPage(const TurnPage& page) { return EncodePage(page, EncodeTurnJson); }
std::string EncodeItemPage(const ItemPage& page) { return EncodePage(page, EncodeItemJson); }

std::string EncodeSessionEvent(const SessionEvent& e) {
  json j = {{"event_id", e.event_id}, {"type", e.type}};
  if (e.session) {
    j["session"] = EncodeSessionJson(*e.session);
  } else {
    j["session_id"] = e.session_id;
  }
  if (e.turn_id) {
    j["turn_id"] = *e.turn_id;
  }
  if (e.turn) {
    j["turn"] = EncodeTurnJson(*e.turn);
  }
  if (e.usage) {
    j["usage"] = EncodeUsageJson(*e.usage);
  }
  if (e.environment) {
    json env = EncodeEnvironmentJson(*e.environment);
    if (e.error) {
      env["error"] = EncodeApiError(*e.error);
    }
    j["environment"] = std::move(env);
  } else if (e.error) {
    j["error"] = EncodeApiError(*e.error);
  }
  if (e.item) {
    j["item"] = EncodeItemJson(*e.item);
  } else if (!e.item_type.empty()) {
    j["item"] = {{"id", e.item_id}, {"type", e.item_type}};
  } else if (!e.item_id.empty()) {
    j["item_id"] = e.item_id;
  }
  if (e.output_index) {
    j["output_index"] = *e.output_index;
  }
  if (e.content_index) {
    j["content_index"] = *e.content_index;
  }
  if (e.kind == EventKind::kOutputTextDelta || e.kind == EventKind::kCommandOutputDelta) {
    j["delta"] = e.text;
  } else if (e.kind == EventKind::kOutputTextDone) {
    j["text"] = e.text;
  }
  return j.dump();
}

}  // namespace sbx::controller::openai
