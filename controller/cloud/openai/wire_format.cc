#include "controller/cloud/openai/wire_format.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/percent_encoding.h"
#include "controller/cloud/http/json_fields.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::openai {
namespace {

using json = nlohmann::json;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using http::BodyExcerpt;
using http::FieldError;
using http::Find;
using http::GetArray;
using http::GetBool;
using http::GetInt64;
using http::GetObject;
using http::GetOptProtoInt64;
using http::GetOptString;
using http::GetString;
using http::GetStringArray;
using http::GetStringMap;

json Parse(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw FieldError{"not JSON: " + BodyExcerpt(body)};
  }
  if (!j.is_object()) {
    throw FieldError{"expected a JSON object: " + BodyExcerpt(body)};
  }
  return j;
}

template <typename Fn>
auto Decoding(std::string_view what, std::string_view body, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const FieldError& e) {
    return InternalError("cannot read " + std::string(what) + ": " + e.message);
  } catch (const json::exception& e) {
    return InternalError("cannot read " + std::string(what) + ": " + e.what() + " in " +
                         BodyExcerpt(body));
  }
}

ApiError DecodeApiError(const json& j, const std::string& path) {
  ApiError e;
  e.type = GetString(j, "type", path);
  e.message = GetString(j, "message", path);
  // `code` is a string on the wire, but be lenient about a number.
  if (const json* code = Find(j, "code")) {
    e.code = code->is_string() ? code->get<std::string>() : code->dump();
  }
  e.param = GetString(j, "param", path);
  return e;
}

SessionEnvironment DecodeSessionEnvironment(const json& j, const std::string& path) {
  SessionEnvironment env;
  env.type_raw = GetString(j, "type", path);
  env.type = ParseEnvironmentType(env.type_raw);
  env.id = GetString(j, "id", path);
  env.remote_url = GetString(j, "remote_url", path);
  env.workspace_directory = GetString(j, "workspace_directory", path);
  env.capability_directories = GetStringArray(j, "capability_directories", path);
  if (auto status = GetOptString(j, "status", path)) {
    env.status_raw = *status;
    env.status = ParseEnvironmentStatus(*status);
  }
  return env;
}

Session DecodeSessionJson(const json& j, const std::string& path) {
  Session s;
  s.id = GetString(j, "id", path);
  if (s.id.empty()) {
    throw FieldError{path + "id: missing"};
  }
  s.status_raw = GetString(j, "status", path);
  s.status = ParseSessionStatus(s.status_raw);
  if (const json* actions = GetArray(j, "required_actions", path)) {
    for (size_t i = 0; i < actions->size(); ++i) {
      const json& a = (*actions)[i];
      const std::string p = path + "required_actions[" + std::to_string(i) + "].";
      if (!a.is_object()) {
        throw FieldError{p + ": expected an object"};
      }
      RequiredAction action;
      action.type_raw = GetString(a, "type", p);
      action.environment_id = GetString(a, "environment_id", p);
      action.turn_id = GetString(a, "turn_id", p);
      action.call_id = GetString(a, "call_id", p);
      action.name = GetString(a, "name", p);
      if (const json* args = Find(a, "arguments")) {
        action.arguments = args->is_string() ? args->get<std::string>() : args->dump();
      }
      s.required_actions.push_back(std::move(action));
    }
  }
  if (const json* env = GetObject(j, "environment", path)) {
    s.environment = DecodeSessionEnvironment(*env, path + "environment.");
  }
  if (const json* agent = GetObject(j, "agent", path)) {
    const std::string p = path + "agent.";
    s.agent.id = GetString(*agent, "id", p);
    s.agent.model = GetString(*agent, "model", p);
    s.agent.instructions = GetOptString(*agent, "instructions", p);
    s.agent.name = GetOptString(*agent, "name", p);
  }
  s.created_at = GetInt64(j, "created_at", path);
  s.last_active_at = GetInt64(j, "last_active_at", path);
  // `error` is a string in the SDK; tolerate an object with a message.
  if (const json* err = Find(j, "error")) {
    if (err->is_string()) {
      s.error = err->get<std::string>();
    } else if (err->is_object()) {
      s.error = GetString(*err, "message", path + "error.");
    } else {
      throw FieldError{path + "error: expected a string"};
    }
  }
  s.metadata = GetStringMap(j, "metadata", path);
  return s;
}

Environment DecodeEnvironmentJson(const json& j, const std::string& path) {
  Environment e;
  e.id = GetString(j, "id", path);
  e.type_raw = GetString(j, "type", path);
  e.type = ParseEnvironmentType(e.type_raw);
  e.status_raw = GetString(j, "status", path);
  e.status = ParseEnvironmentStatus(e.status_raw);
  return e;
}

// Every integer of `j` below `prefix` except the three totals, nested objects flattened with
// dots: new counters survive without a client change.
void CollectUsageDetails(const json& j, const std::string& prefix,
                         std::map<std::string, int64_t>& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix + key;
    if (value.is_number_integer()) {
      if (name != "input_tokens" && name != "output_tokens" && name != "total_tokens") {
        out[name] = value.get<int64_t>();
      }
    } else if (value.is_object()) {
      CollectUsageDetails(value, name + ".", out);
    }
  }
}

Usage DecodeUsageJson(const json& j, const std::string& path) {
  Usage u;
  u.input_tokens = GetInt64(j, "input_tokens", path);
  u.output_tokens = GetInt64(j, "output_tokens", path);
  u.total_tokens = GetInt64(j, "total_tokens", path);
  CollectUsageDetails(j, "", u.details);
  return u;
}

Turn DecodeTurnJson(const json& j, const std::string& path) {
  Turn t;
  t.id = GetString(j, "id", path);
  t.session_id = GetString(j, "session_id", path);
  t.agent_id = GetOptString(j, "agent_id", path);
  t.subagent_id = GetOptString(j, "subagent_id", path);
  t.status_raw = GetString(j, "status", path);
  t.status = ParseTurnStatus(t.status_raw);
  t.created_at = GetInt64(j, "created_at", path);
  t.started_at = GetOptProtoInt64(j, "started_at", path);
  t.completed_at = GetOptProtoInt64(j, "completed_at", path);
  if (const json* err = GetObject(j, "error", path)) {
    t.error = DecodeApiError(*err, path + "error.");
  }
  if (const json* usage = GetObject(j, "usage", path)) {
    t.usage = DecodeUsageJson(*usage, path + "usage.");
  }
  return t;
}

// A string field of an item whose type we do not model: a surprising JSON type there is not
// worth failing a whole page or event for.
std::string LenientString(const json& j, const char* key) {
  const json* v = Find(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// The text of a message's content: output_text and input_text parts in order. A plain string
// is accepted too (the input side allows it).
std::string MessageText(const json& j, const std::string& path) {
  const json* content = Find(j, "content");
  if (content == nullptr) {
    return "";
  }
  if (content->is_string()) {
    return content->get<std::string>();
  }
  if (!content->is_array()) {
    throw FieldError{path + "content: expected an array"};
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    const std::string p = path + "content[" + std::to_string(i) + "].";
    const std::string type = part.is_object() ? LenientString(part, "type") : std::string();
    if (type == "output_text" || type == "input_text") {
      text += GetString(part, "text", p);
    }
  }
  return text;
}

// The id is not required here (an event's item is still worth its event); DecodeItem checks it.
Item DecodeItemJson(const json& j, const std::string& path) {
  if (!j.is_object()) {
    throw FieldError{path + ": expected an object"};
  }
  Item it;
  it.id = LenientString(j, "id");
  it.type_raw = LenientString(j, "type");
  it.type = ParseItemType(it.type_raw);
  if (const json* turn_id = Find(j, "turn_id"); turn_id != nullptr && turn_id->is_string()) {
    it.turn_id = turn_id->get<std::string>();
  }
  it.status_raw = LenientString(j, "status");
  it.status = ParseItemStatus(it.status_raw);
  switch (it.type) {
    case ItemType::kMessage:
      it.role = GetString(j, "role", path);
      it.text = MessageText(j, path);
      it.phase = GetOptString(j, "phase", path);
      break;
    case ItemType::kCommandExecution:
      it.command = GetString(j, "command", path);
      it.cwd = GetOptString(j, "cwd", path);
      it.exit_code = GetOptProtoInt64(j, "exit_code", path);
      it.duration_ms = GetOptProtoInt64(j, "duration_ms", path);
      it.output = GetString(j, "output", path);
      break;
    case ItemType::kOther:
      break;
  }
  return it;
}

template <typename T, typename DecodeRow>
ListPage<T> DecodePageJson(const json& j, DecodeRow decode_row) {
  ListPage<T> page;
  if (const json* data = GetArray(j, "data", "")) {
    for (size_t i = 0; i < data->size(); ++i) {
      page.data.push_back(decode_row((*data)[i], "data[" + std::to_string(i) + "]."));
    }
  }
  page.has_more = GetBool(j, "has_more", "");
  // Null on an empty page (unconfirmed): null, absent and "" all read as "", and callers page
  // on has_more, never on a cursor being set.
  page.first_id = GetString(j, "first_id", "");
  page.last_id = GetString(j, "last_id", "");
  return page;
}

// A body that is one object with a required `id`.
template <typename T, typename DecodeJson>
StatusOr<T> DecodeWithId(std::string_view what, std::string_view body, DecodeJson decode) {
  return Decoding(what, body, [&]() -> StatusOr<T> {
    T value = decode(Parse(body), "");
    if (value.id.empty()) {
      throw FieldError{"id: missing"};
    }
    return value;
  });
}

template <typename T, typename DecodeRow>
StatusOr<ListPage<T>> DecodeList(std::string_view what, std::string_view body,
                                 DecodeRow decode_row) {
  return Decoding(what, body, [&]() -> StatusOr<ListPage<T>> {
    return DecodePageJson<T>(Parse(body), decode_row);
  });
}

struct KindName {
  EventKind kind;
  std::string_view type;
};
constexpr KindName kEventKinds[] = {
    {EventKind::kSessionCreated, "agent.session.created"},
    {EventKind::kSessionInProgress, "agent.session.in_progress"},
    {EventKind::kSessionIdle, "agent.session.idle"},
    {EventKind::kSessionRequiresAction, "agent.session.requires_action"},
    {EventKind::kSessionFailed, "agent.session.failed"},
    {EventKind::kTurnCreated, "agent.session.turn.created"},
    {EventKind::kTurnInProgress, "agent.session.turn.in_progress"},
    {EventKind::kTurnCompleted, "agent.session.turn.completed"},
    {EventKind::kTurnFailed, "agent.session.turn.failed"},
    {EventKind::kTurnCancelled, "agent.session.turn.cancelled"},
    {EventKind::kItemAdded, "agent.session.turn.item.added"},
    {EventKind::kItemDone, "agent.session.turn.item.done"},
    {EventKind::kOutputTextDelta, "agent.session.turn.output_text.delta"},
    {EventKind::kOutputTextDone, "agent.session.turn.output_text.done"},
    {EventKind::kCommandOutputDelta, "agent.output.command_execution_output.delta"},
    {EventKind::kError, "error"},
};
constexpr std::string_view kEnvironmentEventPrefix = "agent.session.environment.";

// The cursor query of every list endpoint, in the SDK's order; unset values are not sent.
std::string EncodeQuery(int limit, const std::string& after, const std::string& agent_id,
                        ListOrder order) {
  std::string q;
  auto add = [&q](std::string_view key, const std::string& value) {
    q += q.empty() ? '?' : '&';
    q += key;
    q += '=';
    q += api::PercentEncode(value);
  };
  if (limit > 0) {
    add("limit", std::to_string(limit));
  }
  if (!after.empty()) {
    add("after", after);
  }
  if (!agent_id.empty()) {
    add("agent_id", agent_id);
  }
  if (order != ListOrder::kServerDefault) {
    add("order", order == ListOrder::kAsc ? "asc" : "desc");
  }
  return q;
}

}  // namespace

EventKind ClassifyEventType(std::string_view type) {
  for (const KindName& k : kEventKinds) {
    if (k.type == type) {
      return k.kind;
    }
  }
  if (type.starts_with(kEnvironmentEventPrefix)) {
    // pending/ready/connected/disconnected/failed/suspended/expired; "reset" carries no status.
    const std::string_view status = type.substr(kEnvironmentEventPrefix.size());
    if (ParseEnvironmentStatus(status) != EnvironmentStatus::kUnknown) {
      return EventKind::kEnvironmentStatus;
    }
  }
  return EventKind::kOther;
}

std::string EncodeCreateSessionRequest(const CreateSessionRequest& request) {
  json agent = {{"model", request.model}};
  if (request.instructions) {
    agent["instructions"] = *request.instructions;
  }
  json env = {{"type", "self_hosted"}, {"workspace_directory", request.workspace_directory}};
  if (!request.capability_directories.empty()) {
    env["capability_directories"] = request.capability_directories;
  }
  json j = {{"agent", std::move(agent)}, {"environment", std::move(env)}};
  if (!request.metadata.empty()) {
    j["metadata"] = request.metadata;
  }
  return j.dump();
}

std::string EncodeUpdateSessionAgentRequest(const std::string& model,
                                            const std::string& instructions) {
  return json{{"agent", {{"model", model}, {"instructions", instructions}}}}.dump();
}

std::string EncodeInputEvents(const std::vector<InputEvent>& events) {
  json arr = json::array();
  for (const InputEvent& e : events) {
    if (e.kind == InputEvent::Kind::kCancel) {
      arr.push_back({{"type", "agent.session.input.cancel"}});
    } else {
      arr.push_back({{"type", "agent.session.input.message"},
                     {"input", json::array({{{"role", "user"},
                                             {"content", json::array({{{"type", "input_text"},
                                                                       {"text", e.text}}})}}})}});
    }
  }
  return json{{"events", std::move(arr)}}.dump();
}

std::string EncodeListSessionsQuery(const ListSessionsParams& params) {
  return EncodeQuery(params.limit, params.after, params.agent_id, params.order);
}

std::string EncodeListQuery(const ListParams& params) {
  return EncodeQuery(params.limit, params.after, "", params.order);
}

StatusOr<Session> DecodeSession(std::string_view body) {
  return Decoding("agent session", body,
                  [&]() -> StatusOr<Session> { return DecodeSessionJson(Parse(body), ""); });
}

StatusOr<SessionPage> DecodeSessionPage(std::string_view body) {
  return Decoding("session list", body, [&]() -> StatusOr<SessionPage> {
    ListPage<Session> page = DecodePageJson<Session>(Parse(body), DecodeSessionJson);
    return SessionPage{.sessions = std::move(page.data),
                       .has_more = page.has_more,
                       .first_id = std::move(page.first_id),
                       .last_id = std::move(page.last_id)};
  });
}

StatusOr<Turn> DecodeTurn(std::string_view body) {
  return DecodeWithId<Turn>("turn", body, DecodeTurnJson);
}

StatusOr<TurnPage> DecodeTurnPage(std::string_view body) {
  return DecodeList<Turn>("turn list", body, DecodeTurnJson);
}

StatusOr<Item> DecodeItem(std::string_view body) {
  return DecodeWithId<Item>("item", body, DecodeItemJson);
}

StatusOr<ItemPage> DecodeItemPage(std::string_view body) {
  return DecodeList<Item>("item list", body, DecodeItemJson);
}

StatusOr<Environment> DecodeEnvironment(std::string_view body) {
  return DecodeWithId<Environment>("environment", body, DecodeEnvironmentJson);
}

Status DecodeSessionDeleted(std::string_view body) {
  return Decoding("session deletion", body, [&]() -> Status {
    const json j = Parse(body);
    // A server that omits `deleted` is believed: the 2xx status already says so.
    if (const json* deleted = Find(j, "deleted");
        deleted != nullptr && !GetBool(j, "deleted", "")) {
      return InternalError("session deletion: the server answered deleted:false");
    }
    return OkStatus();
  });
}

StatusOr<SessionEvent> DecodeSessionEvent(std::string_view data) {
  return Decoding("stream event", data, [&]() -> StatusOr<SessionEvent> {
    const json j = Parse(data);
    SessionEvent e;
    e.type = GetString(j, "type", "");
    if (e.type.empty()) {
      throw FieldError{"type: missing"};
    }
    e.kind = ClassifyEventType(e.type);
    e.event_id = GetString(j, "event_id", "");
    e.session_id = GetString(j, "session_id", "");
    e.turn_id = GetOptString(j, "turn_id", "");
    e.raw_json = std::string(data);
    if (const json* session = GetObject(j, "session", "")) {
      e.session = DecodeSessionJson(*session, "session.");
      if (e.session_id.empty()) {
        e.session_id = e.session->id;
      }
    }
    if (const json* turn = GetObject(j, "turn", "")) {
      e.turn = DecodeTurnJson(*turn, "turn.");
      if (!e.turn_id) {
        e.turn_id = e.turn->id;
      }
    }
    if (const json* err = GetObject(j, "error", "")) {
      e.error = DecodeApiError(*err, "error.");
    }
    if (e.kind == EventKind::kEnvironmentStatus) {
      Environment env;
      if (const json* ej = GetObject(j, "environment", "")) {
        env = DecodeEnvironmentJson(*ej, "environment.");
        if (const json* err = GetObject(*ej, "error", "environment.")) {
          e.error = DecodeApiError(*err, "environment.error.");
        }
      }
      // The type names the new status even when the payload's status is missing.
      const std::string_view from_type =
          std::string_view(e.type).substr(kEnvironmentEventPrefix.size());
      if (env.status == EnvironmentStatus::kUnknown) {
        env.status_raw = std::string(from_type);
        env.status = ParseEnvironmentStatus(from_type);
      }
      e.environment = std::move(env);
    }
    if (const json* usage = GetObject(j, "usage", "")) {
      e.usage = DecodeUsageJson(*usage, "usage.");
    } else if (e.turn && e.turn->usage) {
      e.usage = e.turn->usage;
    }
    if (const json* item = GetObject(j, "item", "")) {
      e.item = DecodeItemJson(*item, "item.");
      e.item_id = e.item->id;
      e.item_type = e.item->type_raw;
    }
    if (e.item_id.empty()) {
      e.item_id = GetString(j, "item_id", "");
    }
    // `turn_id` is nullable on item events (reference §2.3); the item may still name its turn.
    if (!e.turn_id && e.item && e.item->turn_id) {
      e.turn_id = e.item->turn_id;
    }
    e.output_index = GetOptProtoInt64(j, "output_index", "");
    e.content_index = GetOptProtoInt64(j, "content_index", "");
    if (e.kind == EventKind::kOutputTextDelta || e.kind == EventKind::kCommandOutputDelta) {
      e.text = GetString(j, "delta", "");
    } else if (e.kind == EventKind::kOutputTextDone) {
      e.text = GetString(j, "text", "");
    }
    return e;
  });
}

StatusOr<std::vector<InputEvent>> DecodeInputEvents(std::string_view body) {
  // A client error on the server side: kInvalidArgument, not kInternal.
  auto decoded = Decoding("input events", body, [&]() -> StatusOr<std::vector<InputEvent>> {
    const json j = Parse(body);
    const json* events = GetArray(j, "events", "");
    if (events == nullptr || events->empty()) {
      throw FieldError{"events: required and non-empty"};
    }
    std::vector<InputEvent> out;
    for (size_t i = 0; i < events->size(); ++i) {
      const std::string p = "events[" + std::to_string(i) + "].";
      const json& ev = (*events)[i];
      const std::string type = GetString(ev, "type", p);
      if (type == "agent.session.input.cancel") {
        out.push_back(InputEvent::Cancel());
      } else if (type == "agent.session.input.message") {
        std::string text;
        if (const json* input = GetArray(ev, "input", p)) {
          for (const json& msg : *input) {
            if (const json* content = GetArray(msg, "content", p + "input[].")) {
              for (const json& part : *content) {
                if (GetString(part, "type", p + "input[].content[].") == "input_text") {
                  text += GetString(part, "text", p + "input[].content[].");
                }
              }
            }
          }
        }
        out.push_back(InputEvent::UserMessage(std::move(text)));
      } else {
        std::string message = p;
        message.append("type: unsupported input event type \"").append(type).append("\"");
        throw FieldError{std::move(message)};
      }
    }
    return out;
  });
  if (!decoded.ok()) {
    return InvalidArgumentError(decoded.status().message());
  }
  return decoded;
}

}  // namespace sbx::controller::openai
