#include "emulator/openai/internal/agents_api.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace sbx::emulator::internal::openai {
namespace {

std::optional<ApiError> ParseBody(const HttpRequest& req, json& out) {
  out = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (out.is_discarded() || !out.is_object()) {
    return BadRequest("We could not parse the JSON body of your request: expected an object.");
  }
  return std::nullopt;
}

std::optional<ApiError> ValidateMetadata(const json& md) {
  if (md.is_null()) {
    return std::nullopt;
  }
  if (!md.is_object()) {
    return BadRequest("metadata must be an object", "metadata");
  }
  if (md.size() > 16) {
    return BadRequest("metadata: at most 16 pairs", "metadata");
  }
  for (const auto& [k, v] : md.items()) {
    if (k.size() > 64) {
      return BadRequest("metadata keys are at most 64 characters", "metadata");
    }
    if (!v.is_string() || v.get<std::string>().size() > 512) {
      return BadRequest("metadata values must be strings of at most 512 characters", "metadata");
    }
  }
  return std::nullopt;
}

// The text of `input`: a string, or messages [{role, content:[{type:input_text,text}]}].
std::optional<ApiError> InputText(const json& input, std::string& text) {
  if (input.is_string()) {
    text = input.get<std::string>();
    return std::nullopt;
  }
  if (!input.is_array()) {
    return BadRequest("input must be a string or an array of messages");
  }
  for (const auto& msg : input) {
    if (!msg.is_object()) {
      return BadRequest("input[] must be message objects", "input");
    }
    const json content = msg.value("content", json());
    if (content.is_string()) {
      if (!text.empty()) {
        text += "\n";
      }
      text += content.get<std::string>();
      continue;
    }
    if (!content.is_array()) {
      return BadRequest("input[].content must be an array", "input");
    }
    for (const auto& part : content) {
      if (!part.is_object()) {
        return BadRequest("input[].content[] must be objects", "input");
      }
      if (part.value("type", "") == "input_text" && part.value("text", json()).is_string()) {
        if (!text.empty()) {
          text += "\n";
        }
        text += part["text"].get<std::string>();
      }
    }
  }
  return std::nullopt;
}

}  // namespace

AgentsApi::AgentsApi(State& state, TurnRunner& runner) : state_(state), runner_(runner) {}

HttpResponse AgentsApi::CreateSession(const HttpRequest& req) {
  json body;
  if (auto e = ParseBody(req, body)) {
    return ErrorResponse(*e);
  }
  const json env = body.value("environment", json());
  if (!env.is_object()) {
    return ErrorResponse(BadRequest("environment is required", "environment"));
  }
  if (env.value("type", "") != "self_hosted") {
    return ErrorResponse(BadRequest("The emulator supports environment.type 'self_hosted' only",
                                    "environment.type"));
  }
  json wd = env.value("workspace_directory", json());
  if (!wd.is_string() || wd.get<std::string>().empty() || wd.get<std::string>()[0] != '/') {
    return ErrorResponse(BadRequest("environment.workspace_directory must be an absolute path",
                                    "environment.workspace_directory"));
  }
  json caps = env.value("capability_directories", json::array());
  if (caps.is_null()) {
    caps = json::array();
  }
  if (!caps.is_array() || caps.size() > 32) {
    return ErrorResponse(BadRequest("capability_directories: at most 32 absolute paths",
                                    "environment.capability_directories"));
  }
  for (const auto& c : caps) {
    if (!c.is_string() || c.get<std::string>().empty() || c.get<std::string>()[0] != '/') {
      return ErrorResponse(BadRequest("capability_directories must be absolute paths",
                                      "environment.capability_directories"));
    }
  }
  json agent_in = body.value("agent", json::object());
  if (!agent_in.is_object()) {
    return ErrorResponse(BadRequest("agent must be an object", "agent"));
  }
  std::string agent_id = body.value("agent_id", json()).is_string()
                             ? body["agent_id"].get<std::string>()
                             : std::string();
  if (agent_id.empty() && !agent_in.value("model", json()).is_string()) {
    return ErrorResponse(
        BadRequest("agent.model is required when agent_id is omitted", "agent.model"));
  }
  json metadata = body.value("metadata", json::object());
  if (auto e = ValidateMetadata(metadata)) {
    return ErrorResponse(*e);
  }
  if (metadata.is_null()) {
    metadata = json::object();
  }
  if (body.value("stream", false)) {
    return ErrorResponse(
        BadRequest("stream:true is not supported by the emulator; create, "
                   "then GET …/events",
                   "stream"));
  }
  std::optional<std::string> input;
  if (body.contains("input") && !body["input"].is_null()) {
    std::string text;
    if (auto e = InputText(body["input"], text)) {
      return ErrorResponse(*e);
    }
    input = text;
  }

  std::lock_guard lock(state_.mu);
  auto s = std::make_shared<SessionRec>();
  s->id = state_.NewId("sess_");
  s->seq = ++state_.session_seq;
  s->created_at = s->last_active_at = NowUnix();
  s->agent = {{"id", agent_id.empty() ? json(nullptr) : json(agent_id)},
              {"model", agent_in.value("model", json(nullptr))},
              {"instructions", agent_in.value("instructions", json(nullptr))},
              {"name", agent_in.value("name", json(nullptr))},
              {"reasoning", agent_in.value("reasoning", json(nullptr))},
              {"service_tier", agent_in.value("service_tier", json("auto"))},
              {"text", agent_in.value("text", json(nullptr))},
              {"tools", agent_in.value("tools", json::array())},
              {"multi_agent", agent_in.value("multi_agent", json(nullptr))}};
  s->metadata = metadata;
  s->workspace_directory = wd.get<std::string>();
  s->capability_directories = caps;
  EnvironmentRec env_rec;
  env_rec.id = state_.NewId("ccarenv_");
  env_rec.session_id = s->id;
  env_rec.connect_token = state_.NewId("rt_");
  s->environment_id = env_rec.id;
  s->connect_token = env_rec.connect_token;
  state_.environments[env_rec.id] = env_rec;
  state_.sessions[s->id] = s;
  state_.session_seq_of[s->id] = s->seq;
  state_.EmitLocked(*s, state_.SessionEvent(*s, "agent.session.created"));
  if (input) {
    state_.CountLocked(*s, &InputCounters::accepted_inputs);
    state_.OpenInputLocked(*s);
    runner_.EnqueueLocked(s, PendingInput{*input, false});
  }
  return JsonResponse(201, state_.SessionJson(*s));
}

HttpResponse AgentsApi::GetSession(const std::string& id) {
  std::lock_guard lock(state_.mu);
  SessionRec* s = state_.FindSessionLocked(id);
  if (s == nullptr) {
    return ErrorResponse(NotFound("Session", id));
  }
  return JsonResponse(200, state_.SessionJson(*s));
}

HttpResponse AgentsApi::UpdateSession(const std::string& id, const HttpRequest& req) {
  json body;
  if (auto e = ParseBody(req, body)) {
    return ErrorResponse(*e);
  }
  if (body.contains("metadata")) {
    if (auto e = ValidateMetadata(body["metadata"])) {
      return ErrorResponse(*e);
    }
  }
  std::lock_guard lock(state_.mu);
  SessionRec* s = state_.FindSessionLocked(id);
  if (s == nullptr) {
    return ErrorResponse(NotFound("Session", id));
  }
  if (body.contains("metadata")) {
    s->metadata = body["metadata"].is_null() ? json::object() : body["metadata"];
  }
  if (body.contains("agent") && body["agent"].is_object()) {
    for (const auto& [k, v] : body["agent"].items()) {
      if (k != "id") {
        s->agent[k] = v;
      }
    }
  }
  return JsonResponse(200, state_.SessionJson(*s));
}

HttpResponse AgentsApi::DeleteSession(const std::string& id) {
  std::lock_guard lock(state_.mu);
  auto it = state_.sessions.find(id);
  if (it == state_.sessions.end()) {
    return ErrorResponse(NotFound("Session", id));
  }
  SessionRec& s = *it->second;
  if (state_.options.strict_session_delete && s.runner_active) {
    // Undocumented status ("running execution must be cancelled first"); 409 is our choice.
    return ErrorResponse({409,
                          "conflict_error",
                          "conflict_error",
                          "Session " + id + " has a running turn; cancel it first",
                          {},
                          {}});
  }
  if (state_.options.strict_session_delete && !s.root_bound) {
    // Observed on the real service for a self-hosted session whose first turn never ran,
    // also after a cancel (reference §1.6).
    return ErrorResponse(
        {409, "conflict_error", "conflict_error", "session has no durably bound CCA root", {}, {}});
  }
  if (s.runner_active) {
    // Lenient mode: delete cancels the running turn (its runner ends when it sees the session
    // gone).
    s.cancel_requested = true;
    s.pending.clear();
    runner_.TerminateActiveLocked(s);
  }
  for (auto& sub : s.subscribers) {
    sub->closed = true;  // the open stream ends with EOF
  }
  auto env = state_.environments.find(s.environment_id);
  if (env != state_.environments.end()) {
    env->second.deleted = true;
  }
  state_.ForgetOpenInputsLocked(s);
  state_.sessions.erase(it);
  state_.cv.notify_all();
  return JsonResponse(200, {{"id", id}, {"object", "agent.session.deleted"}, {"deleted", true}});
}

// A page of `rows` (ascending by key) per the after/limit/order query parameters.
HttpResponse AgentsApi::Page(
    std::vector<std::pair<int64_t, json>> rows, const HttpRequest& req,
    const std::function<std::optional<int64_t>(const std::string&)>& key_of) {
  int limit = state_.options.default_list_limit;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    try {
      size_t used = 0;
      limit = std::stoi(it->second, &used);
      if (used != it->second.size()) {
        throw std::invalid_argument("limit");
      }
    } catch (const std::exception&) {
      return ErrorResponse(BadRequest("limit must be an integer between 1 and 100", "limit"));
    }
    if (limit < 1 || limit > 100) {
      return ErrorResponse(BadRequest("limit must be an integer between 1 and 100", "limit"));
    }
  }
  std::string order = "desc";
  if (auto it = req.query.find("order"); it != req.query.end()) {
    order = it->second;
  }
  if (order != "asc" && order != "desc") {
    return ErrorResponse(BadRequest("order must be 'asc' or 'desc'", "order"));
  }
  if (order == "desc") {
    std::reverse(rows.begin(), rows.end());
  }
  size_t start = 0;
  if (auto it = req.query.find("after"); it != req.query.end() && !it->second.empty()) {
    std::optional<int64_t> key = key_of(it->second);
    if (!key) {
      return ErrorResponse(BadRequest("after: unknown id '" + it->second + "'", "after"));
    }
    while (start < rows.size() &&
           (order == "asc" ? rows[start].first <= *key : rows[start].first >= *key)) {
      ++start;
    }
  }
  json data = json::array();
  for (size_t i = start; i < rows.size() && data.size() < size_t(limit); ++i) {
    data.push_back(rows[i].second);
  }
  bool has_more = start + data.size() < rows.size();
  json page = {{"object", "list"},
               {"data", data},
               {"has_more", has_more},
               {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
               {"last_id", data.empty() ? json(nullptr) : data.back()["id"]}};
  return JsonResponse(200, page);
}

HttpResponse AgentsApi::ListSessions(const HttpRequest& req) {
  std::lock_guard lock(state_.mu);
  std::string agent_id;
  if (auto it = req.query.find("agent_id"); it != req.query.end()) {
    agent_id = it->second;
  }
  std::vector<std::pair<int64_t, json>> rows;
  for (const auto& [id, s] : state_.sessions) {
    if (!agent_id.empty() && s->agent.value("id", json()) != json(agent_id)) {
      continue;
    }
    rows.emplace_back(s->seq, state_.SessionJson(*s));
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Cursors stay valid after their session was deleted (session_seq_of keeps tombstones).
  return Page(std::move(rows), req, [this](const std::string& id) -> std::optional<int64_t> {
    auto it = state_.session_seq_of.find(id);
    if (it == state_.session_seq_of.end()) {
      return std::nullopt;
    }
    return it->second;
  });
}

// GET …/turns, …/turns/{id}, …/turns/{id}/items, …/items.
HttpResponse AgentsApi::Turns(const HttpRequest& req) {
  const auto& seg = req.segments;
  std::lock_guard lock(state_.mu);
  SessionRec* s = state_.FindSessionLocked(seg[3]);
  if (s == nullptr) {
    return ErrorResponse(NotFound("Session", seg[3]));
  }
  std::vector<std::pair<int64_t, json>> rows;
  std::map<std::string, int64_t> keys;
  auto add = [&](const json& j) {
    int64_t k = static_cast<int64_t>(rows.size());
    keys[j.value("id", "")] = k;
    rows.emplace_back(k, j);
  };
  auto key_of = [&](const std::string& id) -> std::optional<int64_t> {
    auto it = keys.find(id);
    if (it == keys.end()) {
      return std::nullopt;
    }
    return it->second;
  };
  if (seg[4] == "items" && seg.size() == 5) {
    for (const auto& t : s->turns) {
      for (const auto& item : t.items) {
        add(item);
      }
    }
    return Page(std::move(rows), req, key_of);
  }
  if (seg.size() == 5) {
    for (const auto& t : s->turns) {
      add(state_.TurnJson(*s, t));
    }
    return Page(std::move(rows), req, key_of);
  }
  const TurnRec* turn = nullptr;
  for (const auto& t : s->turns) {
    if (t.id == seg[5]) {
      turn = &t;
    }
  }
  if (turn == nullptr) {
    return ErrorResponse(NotFound("Turn", seg[5]));
  }
  if (seg.size() == 6) {
    return JsonResponse(200, state_.TurnJson(*s, *turn));
  }
  if (seg.size() == 7 && seg[6] == "items") {
    for (const auto& item : turn->items) {
      add(item);
    }
    return Page(std::move(rows), req, key_of);
  }
  return ErrorResponse(NotFound("Path", req.path));
}

HttpResponse AgentsApi::GetEnvironment(const std::string& id) {
  std::lock_guard lock(state_.mu);
  auto it = state_.environments.find(id);
  if (it == state_.environments.end() || it->second.deleted) {
    return ErrorResponse(NotFound("Environment", id));
  }
  return JsonResponse(200, state_.EnvironmentJson(it->second));
}

HttpResponse AgentsApi::SendEvents(const std::string& id, const HttpRequest& req) {
  json body;
  if (auto e = ParseBody(req, body)) {
    return ErrorResponse(*e);
  }
  const json events = body.value("events", json());
  if (!events.is_array() || events.empty()) {
    return ErrorResponse(BadRequest("events must be a non-empty array", "events"));
  }
  std::vector<std::optional<std::string>> inputs;  // nullopt = cancel
  for (const auto& e : events) {
    std::string type = e.is_object() ? e.value("type", "") : "";
    if (type == "agent.session.input.cancel") {
      inputs.emplace_back(std::nullopt);
    } else if (type == "agent.session.input.message") {
      std::string text;
      if (auto err = InputText(e.value("input", json()), text)) {
        return ErrorResponse(*err);
      }
      inputs.emplace_back(text);
    } else if (type == "agent.session.input.tool_result") {
      return ErrorResponse(BadRequest("No function call is waiting for a tool_result", "events"));
    } else {
      return ErrorResponse(BadRequest("Unknown input event type '" + type + "'", "events"));
    }
  }
  std::string key = req.Header("idempotency-key");

  std::unique_lock lock(state_.mu);
  auto it = state_.sessions.find(id);
  if (it == state_.sessions.end()) {
    return ErrorResponse(NotFound("Session", id));
  }
  std::shared_ptr<SessionRec> s = it->second;
  if (s->status == "failed") {
    return ErrorResponse({409,
                          "conflict_error",
                          "conflict_error",
                          "Session " + id + " has failed: " + s->error.value_or("unknown"),
                          {},
                          {}});
  }
  const auto messages = static_cast<int64_t>(
      std::count_if(inputs.begin(), inputs.end(), [](const auto& in) { return in.has_value(); }));
  // A key already accepted for this session: the replay of a POST whose answer the client
  // lost. 202 and nothing starts (the real dedupe window is undocumented; the emulator keeps
  // the keys for the session's lifetime).
  if (!key.empty() && !s->idempotency_keys.insert(key).second) {
    state_.CountLocked(*s, &InputCounters::deduped_inputs, messages);
    return HttpResponse{202, "", {}, ""};
  }
  bool dropped = false;
  for (const auto& in : inputs) {
    if (!in) {
      // Cancel on an idle session: 202, no event (observed).
      if (s->runner_active) {
        s->cancel_requested = true;
        s->pending.clear();
        runner_.TerminateActiveLocked(*s);
        state_.cv.notify_all();
      }
      continue;
    }
    const bool held = s->hold_inputs > 0;  // the admin hold_inputs knob
    if (held) {
      --s->hold_inputs;
    }
    const bool waited = held || !state_.ExecutorConnectedLocked(*s);
    bool failed = !runner_.WaitForExecutorLocked(lock, s, held);
    if (state_.stopping || state_.sessions.count(id) == 0) {
      break;
    }
    if (waited && req.client_gone && req.client_gone()) {
      // The client cut the held POST (a proxy timeout, a task at its deadline): the input is
      // lost, as observed on the service (reference §2.1). Nobody reads this answer.
      state_.CountLocked(*s, &InputCounters::dropped_inputs);
      dropped = true;
      continue;
    }
    state_.CountLocked(*s, &InputCounters::accepted_inputs);
    state_.OpenInputLocked(*s);
    runner_.EnqueueLocked(s, PendingInput{*in, failed});
  }
  if (dropped && !key.empty()) {
    // A lost input was never accepted: its key must not turn the client's retry into a dedupe.
    s->idempotency_keys.erase(key);
  }
  return HttpResponse{202, "", {}, ""};
}

void AgentsApi::StreamEvents(const std::string& id, HttpExchange& ex) {
  auto sub = std::make_shared<Subscriber>();
  {
    std::lock_guard lock(state_.mu);
    SessionRec* s = state_.FindSessionLocked(id);
    if (s == nullptr) {
      ex.Respond(ErrorResponse(NotFound("Session", id)));
      return;
    }
    s->subscribers.push_back(sub);
    ++s->subscriptions_total;
  }
  HttpResponse head;
  head.status = 200;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"}, {"x-request-id", state_.NewIdLocked("req_")}};
  bool alive = ex.StartStream(head);
  while (alive) {
    std::deque<std::string> batch;
    bool closed = false;
    {
      std::unique_lock lock(state_.mu);
      state_.cv.wait_for(lock, state_.options.keepalive_interval,
                         [&] { return !sub->queue.empty() || sub->closed || state_.stopping; });
      batch.swap(sub->queue);
      closed = sub->closed || state_.stopping;
    }
    for (const auto& data : batch) {
      if (!(alive = ex.WriteChunk("data: " + data + "\n\n"))) {
        break;
      }
    }
    if (!alive || closed) {
      break;
    }
    if (batch.empty()) {
      alive = ex.WriteChunk(": keepalive\n\n");
    }
  }
  {
    std::lock_guard lock(state_.mu);
    sub->closed = true;
    if (SessionRec* s = state_.FindSessionLocked(id)) {
      auto& subs = s->subscribers;
      subs.erase(std::remove(subs.begin(), subs.end(), sub), subs.end());
    }
  }
  if (alive) {
    ex.FinishStream();
  }
}

}  // namespace sbx::emulator::internal::openai
