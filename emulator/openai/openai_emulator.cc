#include "emulator/openai/openai_emulator.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/websocket_server.h"

namespace sbx::emulator {
namespace {

using internal::HttpExchange;
using internal::HttpRequest;
using internal::HttpResponse;
using internal::WsConnectionId;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string code;  // empty → null
  std::string message;
  std::string param;  // empty → null
  std::optional<std::chrono::seconds> retry_after{};
};

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse ErrorResponse(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  HttpResponse r = JsonResponse(e.status, json{{"error", err}});
  if (e.retry_after) {
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after->count()));
  }
  return r;
}

ApiError NotFound(const std::string& what, const std::string& id) {
  return {404, "not_found_error", "not_found_error", what + " '" + id + "' not found", {}, {}};
}
ApiError BadRequest(const std::string& message, const std::string& param = {}) {
  return {400, "invalid_request_error", "invalid_request_error", message, param, {}};
}

// file:// URI of an absolute path (percent-encodes what is not unreserved or '/').
std::string FileUri(const std::string& path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Base64Decode(const std::string& in) {
  static int table[256];
  static std::once_flag once;
  std::call_once(once, [] {
    std::fill(std::begin(table), std::end(table), -1);
    const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < chars.size(); ++i) {
      table[static_cast<unsigned char>(chars[i])] = int(i);
    }
  });
  std::string out;
  int val = 0;
  int bits = -8;
  for (unsigned char c : in) {
    if (table[c] < 0) {
      continue;  // '=' and whitespace
    }
    val = (val << 6) + table[c];
    bits += 6;
    if (bits >= 0) {
      out += static_cast<char>((val >> bits) & 0xFF);
      bits -= 8;
    }
  }
  return out;
}

// One open SSE stream.
struct Subscriber {
  std::deque<std::string> queue;  // Guarded by Impl::mu_.
  bool closed = false;            // Guarded by Impl::mu_.
};

struct EnvironmentRec {
  std::string id;
  std::string session_id;
  std::set<WsConnectionId> connections;
  bool ever_connected = false;
  bool expired = false;
  bool deleted = false;
  SteadyClock::time_point dropped_at{};
  std::string reported = "pending";  // last status announced on the stream
  OpenAiEmulator::RegistrationCount registrations;
};

// What the emulated harness knows about one executor process it started.
struct ProcessWatch {
  std::string session_id;
  std::string turn_id;
  std::string item_id;
  int output_index = 0;
  std::vector<std::pair<int64_t, std::string>> chunks;  // (seq, bytes)
  std::optional<int> exit_code;
  bool closed = false;
};

struct RpcConnection {
  WsConnectionId id = 0;
  std::string environment_id;
  std::string profile;
  bool ready = false;  // initialize answered, initialized sent
  bool gone = false;
  int64_t next_id = 2;  // 1 is initialize
  std::map<int64_t, json> responses;
  std::map<std::string, std::shared_ptr<ProcessWatch>> processes;
};

struct PendingInput {
  std::string text;
  bool connection_failed = false;
};

struct TurnRec {
  std::string id;
  std::string status = "queued";
  int64_t created_at = 0;
  std::optional<int64_t> started_at;
  std::optional<int64_t> completed_at;
  json error = nullptr;
  std::vector<json> items;
};

struct SessionRec {
  std::string id;
  int64_t seq = 0;
  int64_t created_at = 0;
  int64_t last_active_at = 0;
  std::string status = "idle";
  json required_actions = json::array();
  std::optional<std::string> error;
  json agent;
  json metadata = json::object();
  std::string environment_id;
  std::string workspace_directory;
  json capability_directories = json::array();
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  std::vector<TurnRec> turns;
  std::deque<PendingInput> pending;
  std::set<std::string> idempotency_keys;
  bool runner_active = false;
  bool cancel_requested = false;
  // A turn has run with a connected executor: the real service's "durably bound CCA root"
  // (reference §1.6), without which DELETE answers 409 (strict_session_delete).
  bool root_bound = false;
  int waiting_for_executor = 0;  // POSTs held in the connection wait
  // The process the active turn is running (to terminate on cancel).
  WsConnectionId active_conn = 0;
  std::string active_process;
};

struct Registration {
  std::string environment_id;
  std::string profile;
};

struct Runner {
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread;
};

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.pop_back();
  }
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
    ++i;
  }
  return s.substr(i);
}

}  // namespace

class OpenAiEmulator::Impl {
 public:
  explicit Impl(Options options)
      : options_(std::move(options)),
        rng_(std::random_device{}()),
        http_([this](HttpExchange& ex) { Handle(ex); }),
        ws_(internal::WebSocketHandlers{
            [this](const std::string& r) { return OnWsValidate(r); },
            [this](WsConnectionId id, const std::string& r) { OnWsOpen(id, r); },
            [this](WsConnectionId id, const std::string& t) { OnWsText(id, t); },
            [this](WsConnectionId id) { OnWsClose(id); }}) {
    if (options_.faults == nullptr) {
      owned_faults_ = std::make_unique<internal::FaultInjector>();
      faults_ = owned_faults_.get();
    } else {
      faults_ = options_.faults;
    }
    registration_failure_ = options_.registration_failure;
  }

  ~Impl() { Stop(); }

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (started_) {
      return api::Status(api::StatusCode::kFailedPrecondition, "already started");
    }
    std::string error;
    int ws_port = ws_.Start(host, 0, error);
    if (ws_port < 0) {
      return api::Status(api::StatusCode::kUnavailable, error);
    }
    auto bound = http_.Start(host, port);
    if (!bound.ok()) {
      ws_.Stop();
      return bound.status();
    }
    host_ = host;
    port_ = *bound;
    ws_port_ = ws_port;
    started_ = true;
    timer_ = std::thread([this] { TimerLoop(); });
    return port_;
  }

  void Stop() {
    if (!started_ || stopped_) {
      return;
    }
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      for (auto& [id, s] : sessions_) {
        for (auto& sub : s->subscribers) {
          sub->closed = true;
        }
      }
    }
    cv_.notify_all();
    ws_.Stop();
    cv_.notify_all();
    if (timer_.joinable()) {
      timer_.join();
    }
    std::vector<Runner> runners;
    {
      std::lock_guard lock(mu_);
      runners.swap(runners_);
    }
    for (auto& r : runners) {
      if (r.thread.joinable()) {
        r.thread.join();
      }
    }
    http_.Stop();
    stopped_ = true;
  }

  std::string server_url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  std::string base_url() const { return server_url() + "/v1"; }
  int websocket_port() const { return ws_port_; }
  internal::FaultInjector& faults() { return *faults_; }

  void SetRegistrationFailure(RegistrationFailure f) {
    std::lock_guard lock(mu_);
    registration_failure_ = f;
  }

  std::map<std::string, RegistrationCount> Registrations() const {
    std::lock_guard lock(mu_);
    std::map<std::string, RegistrationCount> out;
    for (const auto& [id, env] : environments_) {
      out[id] = env.registrations;
    }
    for (const auto& [id, count] : unknown_registrations_) {
      out[id] = count;
    }
    return out;
  }

  bool DropExecutor(const std::string& environment_id) {
    std::set<WsConnectionId> conns;
    {
      std::lock_guard lock(mu_);
      auto it = environments_.find(environment_id);
      if (it == environments_.end()) {
        return false;
      }
      conns = it->second.connections;
    }
    for (auto id : conns) {
      ws_.Close(id, 1001, "dropped by the emulator admin API");
    }
    return !conns.empty();
  }

  bool ExpireSession(const std::string& session_id) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) {
      return false;
    }
    SessionRec& s = *it->second;
    s.status = "failed";
    s.error = "session expired";
    s.required_actions = json::array();
    s.pending.clear();
    s.cancel_requested = s.runner_active;
    auto env = environments_.find(s.environment_id);
    if (env != environments_.end() && !env->second.expired) {
      env->second.expired = true;
      env->second.reported = "expired";
      EmitLocked(s, EnvironmentEvent(s, env->second, "expired"));
    }
    EmitLocked(s, SessionEvent(s, "agent.session.failed"));
    cv_.notify_all();
    return true;
  }

 private:
  // ---- ids and events ----------------------------------------------------------------------

  std::string NewId(const std::string& prefix) {
    static const char* kHex = "0123456789abcdef";
    std::string out = prefix;
    for (int i = 0; i < 24; ++i) {
      out += kHex[rng_() % 16];
    }
    return out;
  }

  json SessionJson(const SessionRec& s) const {
    return {{"id", s.id},
            {"object", "agent.session"},
            {"status", s.status},
            {"required_actions", s.required_actions},
            {"environment",
             {{"type", "self_hosted"},
              {"id", s.environment_id},
              {"remote_url", base_url()},
              {"workspace_directory", s.workspace_directory},
              {"capability_directories", s.capability_directories}}},
            {"agent", s.agent},
            {"created_at", s.created_at},
            {"last_active_at", s.last_active_at},
            {"error", s.error ? json(*s.error) : json(nullptr)},
            {"metadata", s.metadata},
            {"usage", nullptr},
            {"vault_ids", json::array()}};
  }

  std::string EnvironmentStatusLocked(const EnvironmentRec& env) const {
    if (env.expired) {
      return "expired";
    }
    if (!env.connections.empty()) {
      return "connected";
    }
    if (!env.ever_connected) {
      return "pending";
    }
    return SteadyClock::now() - env.dropped_at >= options_.disconnected_after ? "disconnected"
                                                                              : "connected";
  }

  json EnvironmentJson(const EnvironmentRec& env) const {
    return {{"id", env.id},           {"object", "agent.environment"},
            {"type", "self_hosted"},  {"status", EnvironmentStatusLocked(env)},
            {"files", json::array()}, {"plugins", json::array()},
            {"skills", json::array()}};
  }

  json TurnJson(const SessionRec& s, const TurnRec& t) const {
    auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
    return {{"id", t.id},
            {"object", "agent.session.turn"},
            {"session_id", s.id},
            {"agent_id", nullptr},
            {"subagent_id", nullptr},
            {"status", t.status},
            {"created_at", t.created_at},
            {"started_at", opt(t.started_at)},
            {"completed_at", opt(t.completed_at)},
            {"error", t.error},
            {"usage", nullptr}};
  }

  json Event(const std::string& type) { return {{"event_id", NewId("event_")}, {"type", type}}; }

  json SessionEvent(const SessionRec& s, const std::string& type) {
    json e = Event(type);
    e["session"] = SessionJson(s);
    return e;
  }

  json EnvironmentEvent(const SessionRec& s, const EnvironmentRec& env, const std::string& status) {
    json e = Event("agent.session.environment." + status);
    e["session_id"] = s.id;
    e["turn_id"] = nullptr;
    e["environment"] = {{"id", env.id}, {"type", "self_hosted"}, {"status", status}};
    return e;
  }

  json TurnEvent(const SessionRec& s, const TurnRec& t, const std::string& type) {
    json e = Event(type);
    e["session_id"] = s.id;
    e["turn_id"] = t.id;
    e["turn"] = TurnJson(s, t);
    if (type == "agent.session.turn.completed" || type == "agent.session.turn.failed" ||
        type == "agent.session.turn.cancelled") {
      e["usage"] = nullptr;
    }
    return e;
  }

  json ItemEvent(const SessionRec& s, const std::string& turn_id, const std::string& type,
                 const json& item, json output_index) {
    json e = Event(type);
    e["session_id"] = s.id;
    e["turn_id"] = turn_id;
    e["item"] = item;
    e["output_index"] = std::move(output_index);
    return e;
  }

  void EmitLocked(SessionRec& s, const json& event) {
    std::string data = event.dump();
    for (auto& sub : s.subscribers) {
      if (!sub->closed) {
        sub->queue.push_back(data);
      }
    }
    cv_.notify_all();
  }

  SessionRec* FindSessionLocked(const std::string& id) {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second.get();
  }

  // ---- HTTP dispatch -------------------------------------------------------------------------

  void Handle(HttpExchange& ex) {
    const HttpRequest& req = ex.request();
    const auto& seg = req.segments;
    const std::string& m = req.method;

    if (!seg.empty() && seg[0] == "_emulator") {
      ex.Respond(HandleAdmin(req));
      return;
    }

    // Executor registry: {remote_url}/cloud/environment/{id}/register (remote_url = …/v1; the
    // bare root is accepted too, like the real codex base URL without a path).
    size_t n = seg.size();
    if (m == "POST" && n >= 4 && seg[n - 1] == "register" && seg[n - 3] == "environment" &&
        seg[n - 4] == "cloud" && (n == 4 || (n == 5 && seg[0] == "v1"))) {
      internal::CallPlan plan = faults_->Admit("openai.executor.register", false);
      if (plan.latency.count() > 0) {
        std::this_thread::sleep_for(plan.latency);
      }
      if (plan.fault && !plan.fault->after) {
        ex.Respond(RegistryFault(*plan.fault));
        return;
      }
      HttpResponse r = Register(seg[n - 2], req);
      if (plan.fault && plan.fault->after) {
        r = RegistryFault(*plan.fault);
      }
      ex.Respond(r);
      return;
    }

    if (n < 2 || seg[0] != "v1" || seg[1] != "agents") {
      faults_->Admit("openai.unknown", false);
      ex.Respond(ErrorResponse({404,
                                "invalid_request_error",
                                "unknown_url",
                                "Unknown request URL: " + m + " " + req.path + ".",
                                {},
                                {}}));
      return;
    }

    std::string endpoint;
    std::function<HttpResponse()> call;
    bool stream = false;
    if (n == 3 && seg[2] == "sessions") {
      if (m == "POST") {
        endpoint = "openai.sessions.create";
        call = [&] { return CreateSession(req); };
      } else if (m == "GET") {
        endpoint = "openai.sessions.list";
        call = [&] { return ListSessions(req); };
      }
    } else if (n == 4 && seg[2] == "sessions") {
      const std::string& id = seg[3];
      if (m == "GET") {
        endpoint = "openai.sessions.get";
        call = [&, id] { return GetSession(id); };
      } else if (m == "POST") {
        endpoint = "openai.sessions.update";
        call = [&, id] { return UpdateSession(id, req); };
      } else if (m == "DELETE") {
        endpoint = "openai.sessions.delete";
        call = [&, id] { return DeleteSession(id); };
      }
    } else if (n == 5 && seg[2] == "sessions" && seg[4] == "events") {
      const std::string& id = seg[3];
      if (m == "POST") {
        endpoint = "openai.events.create";
        call = [&, id] { return SendEvents(id, req); };
      } else if (m == "GET") {
        endpoint = "openai.events.stream";
        stream = true;
      }
    } else if (n >= 5 && seg[2] == "sessions" && (seg[4] == "turns" || seg[4] == "items") &&
               m == "GET") {
      endpoint = seg[4] == "items" ? "openai.items.list" : "openai.turns";
      call = [&] { return Turns(req); };
    } else if (n == 4 && seg[2] == "environments" && m == "GET") {
      endpoint = "openai.environments.get";
      const std::string& id = seg[3];
      call = [&, id] { return GetEnvironment(id); };
    }
    if (!call && !stream) {
      faults_->Admit("openai.unknown", false);
      ex.Respond(ErrorResponse({404,
                                "invalid_request_error",
                                "unknown_url",
                                "Unknown request URL: " + m + " " + req.path + ".",
                                {},
                                {}}));
      return;
    }

    // The workspace rate limit is a Databricks notion: OpenAI calls are never throttled by it.
    internal::CallPlan plan = faults_->Admit(endpoint, false);
    if (plan.latency.count() > 0) {
      std::this_thread::sleep_for(plan.latency);
    }
    if (plan.throttled) {
      ex.Respond(ErrorResponse({429,
                                "requests",
                                "rate_limit_exceeded",
                                "Rate limit reached for requests",
                                {},
                                plan.throttled}));
      return;
    }
    if (plan.fault && !plan.fault->after) {
      ex.Respond(FaultResponse(*plan.fault, endpoint));
      return;
    }
    if (auto denied = CheckAuth(req)) {
      ex.Respond(ErrorResponse(*denied));
      return;
    }
    if (stream) {
      StreamEvents(seg[3], ex);
      return;
    }
    HttpResponse response;
    try {
      response = call();
    } catch (const std::exception& e) {
      response = ErrorResponse(BadRequest(std::string("Invalid request: ") + e.what()));
    }
    if (plan.fault && plan.fault->after) {
      response = FaultResponse(*plan.fault, endpoint);
    }
    response.headers.emplace_back("x-request-id", NewId("req_"));
    response.headers.emplace_back("openai-version", "2020-10-01");
    ex.Respond(response);
  }

  HttpResponse FaultResponse(const internal::FaultSpec& f, const std::string& endpoint) {
    std::string code = f.error_code;
    std::string type = "server_error";
    if (code.empty()) {
      code = f.status == 429   ? "rate_limit_exceeded"
             : f.status == 503 ? "server_is_overloaded"
             : f.status >= 500 ? "server_error"
                               : "injected_fault";
    }
    if (f.status == 429) {
      type = "requests";
    }
    if (f.status < 500 && f.status != 429) {
      type = "invalid_request_error";
    }
    ApiError e{f.status, type,
               code,     f.message.empty() ? "Injected fault on " + endpoint : f.message,
               {},       {}};
    if (f.status == 429 || f.status == 503) {
      e.retry_after = f.retry_after;
    }
    return ErrorResponse(e);
  }

  // Registry errors are {"error":{"code","message"}} (codex-exec-server.md §3.4).
  static HttpResponse RegistryError(int status, const std::string& code,
                                    const std::string& message) {
    return JsonResponse(status, json{{"error", {{"code", code}, {"message", message}}}});
  }

  HttpResponse RegistryFault(const internal::FaultSpec& f) {
    return RegistryError(f.status, f.error_code.empty() ? "injected_fault" : f.error_code,
                         f.message.empty() ? "Injected fault on registration" : f.message);
  }

  static std::string BearerToken(const HttpRequest& req) {
    std::string h = req.Header("authorization");
    if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0) {
      return {};
    }
    return Trim(h.substr(7));
  }

  std::optional<ApiError> CheckAuth(const HttpRequest& req) {
    std::string token = BearerToken(req);
    if (token.empty()) {
      return ApiError{
          401,
          "invalid_request_error",
          "",
          "You didn't provide an API key. You need to provide your API key in an "
          "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
          {},
          {}};
    }
    bool ok = options_.accept_any_api_key ||
              std::find(options_.api_keys.begin(), options_.api_keys.end(), token) !=
                  options_.api_keys.end();
    if (!ok) {
      std::string shown = token.size() > 8
                              ? token.substr(0, 3) + "***" + token.substr(token.size() - 4)
                              : std::string("***");
      return ApiError{401,
                      "invalid_request_error",
                      "invalid_api_key",
                      "Incorrect API key provided: " + shown + ".",
                      {},
                      {}};
    }
    if (options_.require_beta_header) {
      std::string beta = req.Header("openai-beta");
      if (beta.find("agents=v1") == std::string::npos) {
        return ApiError{400,
                        "invalid_request_error",
                        "invalid_beta",
                        "You must provide the 'OpenAI-Beta: agents=v1' header to use the Agents "
                        "API.",
                        {},
                        {}};
      }
    }
    return std::nullopt;
  }

  // ---- sessions ------------------------------------------------------------------------------

  static std::optional<ApiError> ParseBody(const HttpRequest& req, json& out) {
    out = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (out.is_discarded() || !out.is_object()) {
      return BadRequest("We could not parse the JSON body of your request: expected an object.");
    }
    return std::nullopt;
  }

  static std::optional<ApiError> ValidateMetadata(const json& md) {
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

  HttpResponse CreateSession(const HttpRequest& req) {
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

    std::lock_guard lock(mu_);
    auto s = std::make_shared<SessionRec>();
    s->id = NewId("sess_");
    s->seq = ++session_seq_;
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
    env_rec.id = NewId("ccarenv_");
    env_rec.session_id = s->id;
    s->environment_id = env_rec.id;
    environments_[env_rec.id] = env_rec;
    sessions_[s->id] = s;
    session_seq_of_[s->id] = s->seq;
    EmitLocked(*s, SessionEvent(*s, "agent.session.created"));
    if (input) {
      EnqueueLocked(s, PendingInput{*input, false});
    }
    return JsonResponse(201, SessionJson(*s));
  }

  HttpResponse GetSession(const std::string& id) {
    std::lock_guard lock(mu_);
    SessionRec* s = FindSessionLocked(id);
    if (s == nullptr) {
      return ErrorResponse(NotFound("Session", id));
    }
    return JsonResponse(200, SessionJson(*s));
  }

  HttpResponse UpdateSession(const std::string& id, const HttpRequest& req) {
    json body;
    if (auto e = ParseBody(req, body)) {
      return ErrorResponse(*e);
    }
    if (body.contains("metadata")) {
      if (auto e = ValidateMetadata(body["metadata"])) {
        return ErrorResponse(*e);
      }
    }
    std::lock_guard lock(mu_);
    SessionRec* s = FindSessionLocked(id);
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
    return JsonResponse(200, SessionJson(*s));
  }

  HttpResponse DeleteSession(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return ErrorResponse(NotFound("Session", id));
    }
    SessionRec& s = *it->second;
    if (options_.strict_session_delete && s.runner_active) {
      // Undocumented status ("running execution must be cancelled first"); 409 is our choice.
      return ErrorResponse({409,
                            "conflict_error",
                            "conflict_error",
                            "Session " + id + " has a running turn; cancel it first",
                            {},
                            {}});
    }
    if (options_.strict_session_delete && !s.root_bound) {
      // Observed on the real service for a self-hosted session whose first turn never ran,
      // also after a cancel (reference §1.6).
      return ErrorResponse({409,
                            "conflict_error",
                            "conflict_error",
                            "session has no durably bound CCA root",
                            {},
                            {}});
    }
    if (s.runner_active) {
      // Lenient mode: delete cancels the running turn (its runner ends when it sees the session
      // gone).
      s.cancel_requested = true;
      s.pending.clear();
      TerminateActiveLocked(s);
    }
    for (auto& sub : s.subscribers) {
      sub->closed = true;  // the open stream ends with EOF
    }
    auto env = environments_.find(s.environment_id);
    if (env != environments_.end()) {
      env->second.deleted = true;
    }
    sessions_.erase(it);
    cv_.notify_all();
    return JsonResponse(200, {{"id", id}, {"object", "agent.session.deleted"}, {"deleted", true}});
  }

  // A page of `rows` (ascending by key) per the after/limit/order query parameters.
  HttpResponse Page(std::vector<std::pair<int64_t, json>> rows, const HttpRequest& req,
                    const std::function<std::optional<int64_t>(const std::string&)>& key_of) {
    int limit = options_.default_list_limit;
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

  HttpResponse ListSessions(const HttpRequest& req) {
    std::lock_guard lock(mu_);
    std::string agent_id;
    if (auto it = req.query.find("agent_id"); it != req.query.end()) {
      agent_id = it->second;
    }
    std::vector<std::pair<int64_t, json>> rows;
    for (const auto& [id, s] : sessions_) {
      if (!agent_id.empty() && s->agent.value("id", json()) != json(agent_id)) {
        continue;
      }
      rows.emplace_back(s->seq, SessionJson(*s));
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    // Cursors stay valid after their session was deleted (session_seq_of_ keeps tombstones).
    return Page(std::move(rows), req, [this](const std::string& id) -> std::optional<int64_t> {
      auto it = session_seq_of_.find(id);
      if (it == session_seq_of_.end()) {
        return std::nullopt;
      }
      return it->second;
    });
  }

  // GET …/turns, …/turns/{id}, …/turns/{id}/items, …/items.
  HttpResponse Turns(const HttpRequest& req) {
    const auto& seg = req.segments;
    std::lock_guard lock(mu_);
    SessionRec* s = FindSessionLocked(seg[3]);
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
        add(TurnJson(*s, t));
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
      return JsonResponse(200, TurnJson(*s, *turn));
    }
    if (seg.size() == 7 && seg[6] == "items") {
      for (const auto& item : turn->items) {
        add(item);
      }
      return Page(std::move(rows), req, key_of);
    }
    return ErrorResponse(NotFound("Path", req.path));
  }

  HttpResponse GetEnvironment(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = environments_.find(id);
    if (it == environments_.end() || it->second.deleted) {
      return ErrorResponse(NotFound("Environment", id));
    }
    return JsonResponse(200, EnvironmentJson(it->second));
  }

  // ---- input events --------------------------------------------------------------------------

  // The text of `input`: a string, or messages [{role, content:[{type:input_text,text}]}].
  static std::optional<ApiError> InputText(const json& input, std::string& text) {
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

  HttpResponse SendEvents(const std::string& id, const HttpRequest& req) {
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

    std::unique_lock lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
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
    if (!key.empty() && !s->idempotency_keys.insert(key).second) {
      return HttpResponse{202, "", {}, ""};  // a replay of input already accepted
    }
    for (const auto& in : inputs) {
      if (!in) {
        // Cancel on an idle session: 202, no event (observed).
        if (s->runner_active) {
          s->cancel_requested = true;
          s->pending.clear();
          TerminateActiveLocked(*s);
          cv_.notify_all();
        }
        continue;
      }
      bool failed = !WaitForExecutorLocked(lock, s);
      if (stopping_ || sessions_.count(id) == 0) {
        break;
      }
      EnqueueLocked(s, PendingInput{*in, failed});
    }
    return HttpResponse{202, "", {}, ""};
  }

  bool ExecutorConnectedLocked(const SessionRec& s) const {
    auto env = environments_.find(s.environment_id);
    return env != environments_.end() && !env->second.connections.empty();
  }

  // The 5-minute connection wait (reference §2.1): while no executor is connected, the session
  // requires an environment_connection action and the POST is held. False if it timed out.
  bool WaitForExecutorLocked(std::unique_lock<std::mutex>& lock,
                             const std::shared_ptr<SessionRec>& s) {
    if (ExecutorConnectedLocked(*s)) {
      return true;
    }
    if (s->waiting_for_executor++ == 0) {
      s->required_actions = json::array(
          {{{"type", "environment_connection"}, {"environment_id", s->environment_id}}});
      if (!s->runner_active) {
        s->status = "requires_action";
      }
      EmitLocked(*s, SessionEvent(*s, "agent.session.requires_action"));
    }
    auto deadline = SteadyClock::now() + options_.connection_wait;
    bool connected = cv_.wait_until(lock, deadline, [&] {
      return stopping_ || ExecutorConnectedLocked(*s) || sessions_.count(s->id) == 0 ||
             s->status == "failed";
    });
    connected = connected && ExecutorConnectedLocked(*s);
    if (--s->waiting_for_executor == 0) {
      s->required_actions = json::array();
      if (s->status == "requires_action") {
        s->status = "idle";
      }
    }
    return connected;
  }

  void EnqueueLocked(const std::shared_ptr<SessionRec>& s, PendingInput input) {
    s->pending.push_back(std::move(input));
    if (s->runner_active) {
      return;
    }
    s->runner_active = true;
    // Reap runners that have finished, then start one for this session.
    for (auto r = runners_.begin(); r != runners_.end();) {
      if (r->done->load()) {
        r->thread.join();  // already returned: does not block
        r = runners_.erase(r);
      } else {
        ++r;
      }
    }
    Runner runner;
    auto done = runner.done;
    runner.thread = std::thread([this, s, done] {
      RunTurns(s);
      done->store(true);
    });
    runners_.push_back(std::move(runner));
  }

  void TerminateActiveLocked(SessionRec& s) {
    if (s.active_conn == 0 || s.active_process.empty()) {
      return;
    }
    auto c = rpc_.find(s.active_conn);
    if (c == rpc_.end()) {
      return;
    }
    int64_t rid = c->second.next_id++;
    ws_.Send(s.active_conn, json{{"id", rid},
                                 {"method", "process/terminate"},
                                 {"params", {{"processId", s.active_process}}}}
                                .dump());
  }

  // ---- the emulated harness -------------------------------------------------------------------

  void RunTurns(const std::shared_ptr<SessionRec>& s) {
    std::unique_lock lock(mu_);
    while (!stopping_ && !s->pending.empty() && sessions_.count(s->id) && s->status != "failed") {
      PendingInput in = std::move(s->pending.front());
      s->pending.pop_front();
      s->cancel_requested = false;
      RunTurnLocked(lock, s, in);
    }
    s->runner_active = false;
    s->pending.clear();
    cv_.notify_all();
  }

  void RunTurnLocked(std::unique_lock<std::mutex>& lock, const std::shared_ptr<SessionRec>& s,
                     const PendingInput& in) {
    SessionRec& sr = *s;
    sr.turns.push_back(TurnRec{});
    size_t turn_index = sr.turns.size() - 1;
    auto turn = [&]() -> TurnRec& { return sr.turns[turn_index]; };
    turn().id = NewId("turn_");
    turn().created_at = NowUnix();
    const std::string turn_id = turn().id;
    EmitLocked(sr, TurnEvent(sr, turn(), "agent.session.turn.created"));
    json user_item = {{"id", NewId("msg_")},
                      {"type", "message"},
                      {"role", "user"},
                      {"content", json::array({{{"type", "input_text"}, {"text", in.text}}})},
                      {"phase", nullptr},
                      {"status", "completed"},
                      {"turn_id", turn_id}};
    turn().items.push_back(user_item);
    EmitLocked(sr, ItemEvent(sr, turn_id, "agent.session.turn.item.added", user_item, nullptr));
    sr.status = "in_progress";
    sr.last_active_at = NowUnix();
    EmitLocked(sr, SessionEvent(sr, "agent.session.in_progress"));
    turn().status = "in_progress";
    turn().started_at = NowUnix();
    EmitLocked(sr, TurnEvent(sr, turn(), "agent.session.turn.in_progress"));

    auto finish = [&](const std::string& status, json error) {
      turn().status = status;
      turn().completed_at = NowUnix();
      turn().error = std::move(error);
      EmitLocked(sr, TurnEvent(sr, turn(), "agent.session.turn." + status));
      sr.last_active_at = NowUnix();
      if (sr.status != "failed") {
        sr.status = sr.waiting_for_executor > 0 ? "requires_action" : "idle";
        EmitLocked(sr, SessionEvent(sr, "agent.session.idle"));
      }
    };

    // Input that arrived with the session (no POST to hold) waits for the executor here.
    bool connection_failed = in.connection_failed;
    if (!connection_failed && !ExecutorConnectedLocked(sr)) {
      connection_failed = !WaitForExecutorLocked(lock, s);
    }
    if (connection_failed) {
      finish("failed",
             {{"code", "connection_failed"},
              {"message", "No executor connected to environment " + sr.environment_id + " within " +
                              std::to_string(options_.connection_wait.count()) + " ms"}});
      return;
    }

    sr.root_bound = true;  // the turn runs with a connected executor
    int output_index = 0;
    std::vector<std::string> summaries;
    std::istringstream lines(in.text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("$ ", 0) != 0) {
        continue;
      }
      if (sr.cancel_requested || stopping_ || sr.status == "failed") {
        break;
      }
      std::string command = Trim(line.substr(2));
      json item = {{"id", NewId("cmd_")},  {"type", "command_execution"},
                   {"command", command},   {"cwd", sr.workspace_directory},
                   {"exit_code", nullptr}, {"duration_ms", nullptr},
                   {"output", ""},         {"status", "in_progress"},
                   {"turn_id", turn_id}};
      EmitLocked(sr, ItemEvent(sr, turn_id, "agent.session.turn.item.added", item, output_index));
      auto started = SteadyClock::now();
      CommandOutcome out =
          RunCommandLocked(lock, s, turn_id, item["id"].get<std::string>(), output_index, command);
      item["output"] = out.output;
      item["status"] = out.status;
      item["exit_code"] = out.exit_code ? json(*out.exit_code) : json(nullptr);
      item["duration_ms"] =
          std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started)
              .count();
      turn().items.push_back(item);
      EmitLocked(sr, ItemEvent(sr, turn_id, "agent.session.turn.item.done", item, output_index));
      ++output_index;
      summaries.push_back(
          "`" + command + "` " +
          (out.exit_code ? "exited with code " + std::to_string(*out.exit_code) : out.status));
    }
    if (sr.cancel_requested || stopping_) {
      finish("cancelled", nullptr);
      return;
    }
    if (sr.status == "failed") {
      finish("failed", {{"code", "internal_error"}, {"message", sr.error.value_or("failed")}});
      return;
    }

    std::string text;
    if (summaries.empty()) {
      text = "Received: " + in.text;
    } else {
      text = "Ran " + std::to_string(summaries.size()) + " command(s): ";
      for (size_t i = 0; i < summaries.size(); ++i) {
        text += (i ? "; " : "") + summaries[i];
      }
      text += ".";
    }
    json msg = {{"id", NewId("msg_")},      {"type", "message"},       {"role", "assistant"},
                {"content", json::array()}, {"phase", "final_answer"}, {"status", "in_progress"},
                {"turn_id", turn_id}};
    EmitLocked(sr, ItemEvent(sr, turn_id, "agent.session.turn.item.added", msg, output_index));
    json delta = Event("agent.session.turn.output_text.delta");
    delta.update({{"session_id", sr.id},
                  {"turn_id", turn_id},
                  {"item_id", msg["id"]},
                  {"output_index", output_index},
                  {"content_index", 0},
                  {"delta", text}});
    EmitLocked(sr, delta);
    json done = Event("agent.session.turn.output_text.done");
    done.update({{"session_id", sr.id},
                 {"turn_id", turn_id},
                 {"item_id", msg["id"]},
                 {"output_index", output_index},
                 {"content_index", 0},
                 {"text", text}});
    EmitLocked(sr, done);
    msg["content"] = json::array({{{"type", "output_text"}, {"text", text}}});
    msg["status"] = "completed";
    turn().items.push_back(msg);
    EmitLocked(sr, ItemEvent(sr, turn_id, "agent.session.turn.item.done", msg, output_index));
    finish("completed", nullptr);
  }

  struct CommandOutcome {
    std::string status = "failed";  // completed | failed | incomplete
    std::optional<int> exit_code;
    std::string output;
  };

  // A ready plain-profile connection of the session's environment, or 0.
  WsConnectionId ReadyConnectionLocked(const SessionRec& s) const {
    auto env = environments_.find(s.environment_id);
    if (env == environments_.end()) {
      return 0;
    }
    WsConnectionId best = 0;
    for (auto id : env->second.connections) {
      auto c = rpc_.find(id);
      if (c != rpc_.end() && c->second.ready && !c->second.gone) {
        best = std::max(best, id);
      }
    }
    return best;
  }

  CommandOutcome RunCommandLocked(std::unique_lock<std::mutex>& lock,
                                  const std::shared_ptr<SessionRec>& s, const std::string& turn_id,
                                  const std::string& item_id, int output_index,
                                  const std::string& command) {
    CommandOutcome out;
    SessionRec& sr = *s;
    // An executor that just (re)connected may still be in its initialize handshake.
    auto ready_deadline = SteadyClock::now() + std::min<Duration>(options_.connection_wait, 30s);
    WsConnectionId conn = 0;
    cv_.wait_until(lock, ready_deadline, [&] {
      conn = ReadyConnectionLocked(sr);
      return conn != 0 || stopping_ || sr.cancel_requested || NoiseOnlyLocked(sr);
    });
    if (conn == 0) {
      if (sr.cancel_requested || stopping_) {
        out.status = "incomplete";
      } else if (NoiseOnlyLocked(sr)) {
        out.output = std::string("the connected executor speaks ") + kNoiseProfile +
                     "; the emulator runs commands only through the stand-in executor (" +
                     kPlainJsonRpcProfile + ")";
      } else {
        out.output = "exec-server transport disconnected: no executor connected";
      }
      return out;
    }
    RpcConnection& rc = rpc_[conn];
    const std::string process_id = "proc-" + std::to_string(++process_seq_);
    auto watch = std::make_shared<ProcessWatch>();
    watch->session_id = sr.id;
    watch->turn_id = turn_id;
    watch->item_id = item_id;
    watch->output_index = output_index;
    rc.processes[process_id] = watch;
    int64_t rid = rc.next_id++;
    sr.active_conn = conn;
    sr.active_process = process_id;
    ws_.Send(conn, json{{"id", rid},
                        {"method", "process/start"},
                        {"params",
                         {{"processId", process_id},
                          {"argv", {"/bin/bash", "-c", command}},
                          {"cwd", FileUri(sr.workspace_directory)},
                          {"env", json::object()},
                          {"tty", false}}}}
                       .dump());
    auto deadline = SteadyClock::now() + options_.command_timeout;
    bool terminated = false;
    auto conn_gone = [&] {
      auto c = rpc_.find(conn);
      return c == rpc_.end() || c->second.gone;
    };
    // Wait for the start response, then for process/closed.
    json start_error;
    cv_.wait_until(lock, deadline, [&] {
      auto c = rpc_.find(conn);
      if (c == rpc_.end() || c->second.gone || stopping_) {
        return true;
      }
      auto r = c->second.responses.find(rid);
      if (r == c->second.responses.end()) {
        return false;
      }
      if (r->second.contains("error")) {
        start_error = r->second["error"];
      }
      c->second.responses.erase(r);
      return true;
    });
    while (start_error.is_null() && !watch->closed && !conn_gone() && !stopping_) {
      if ((sr.cancel_requested || SteadyClock::now() >= deadline) && !terminated) {
        terminated = true;
        TerminateActiveLocked(sr);
        deadline = SteadyClock::now() + 5s;
      }
      if (terminated && SteadyClock::now() >= deadline) {
        break;
      }
      cv_.wait_until(lock, terminated ? deadline : std::min(deadline, SteadyClock::now() + 100ms));
    }
    sr.active_conn = 0;
    sr.active_process.clear();
    if (auto c = rpc_.find(conn); c != rpc_.end()) {
      c->second.processes.erase(process_id);
    }

    std::sort(watch->chunks.begin(), watch->chunks.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [seq, bytes] : watch->chunks) {
      out.output += bytes;
    }
    out.exit_code = watch->exit_code;
    if (!start_error.is_null()) {
      out.output = start_error.value("message", std::string("process/start failed"));
      out.status = "failed";
    } else if (sr.cancel_requested) {
      out.status = "incomplete";
    } else if (terminated) {
      out.status = "failed";
      out.output += "\n[sbx-emulator: command timed out and was terminated]";
    } else if (!watch->closed) {
      out.status = "failed";
      out.output += "\nexec-server transport disconnected";
    } else {
      out.status = "completed";
    }
    return out;
  }

  bool NoiseOnlyLocked(const SessionRec& s) const {
    auto env = environments_.find(s.environment_id);
    if (env == environments_.end() || env->second.connections.empty()) {
      return false;
    }
    for (auto id : env->second.connections) {
      auto c = rpc_.find(id);
      if (c == rpc_.end() || c->second.profile != kNoiseProfile) {
        return false;
      }
    }
    return true;
  }

  // ---- SSE -----------------------------------------------------------------------------------

  void StreamEvents(const std::string& id, HttpExchange& ex) {
    auto sub = std::make_shared<Subscriber>();
    {
      std::lock_guard lock(mu_);
      SessionRec* s = FindSessionLocked(id);
      if (s == nullptr) {
        ex.Respond(ErrorResponse(NotFound("Session", id)));
        return;
      }
      s->subscribers.push_back(sub);
    }
    HttpResponse head;
    head.status = 200;
    head.content_type = "text/event-stream";
    head.headers = {{"Cache-Control", "no-cache"}, {"x-request-id", NewIdLocked()}};
    bool alive = ex.StartStream(head);
    while (alive) {
      std::deque<std::string> batch;
      bool closed = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, options_.keepalive_interval,
                     [&] { return !sub->queue.empty() || sub->closed || stopping_; });
        batch.swap(sub->queue);
        closed = sub->closed || stopping_;
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
      std::lock_guard lock(mu_);
      sub->closed = true;
      if (SessionRec* s = FindSessionLocked(id)) {
        auto& subs = s->subscribers;
        subs.erase(std::remove(subs.begin(), subs.end(), sub), subs.end());
      }
    }
    if (alive) {
      ex.FinishStream();
    }
  }

  std::string NewIdLocked() {
    std::lock_guard lock(mu_);
    return NewId("req_");
  }

  // ---- executor registry and WebSockets
  // ----------------------------------------------------------

  HttpResponse Register(const std::string& env_id, const HttpRequest& req) {
    std::lock_guard lock(mu_);
    auto env = environments_.find(env_id);
    if (env != environments_.end()) {
      ++env->second.registrations.attempts;
    } else {
      ++unknown_registrations_[env_id].attempts;
    }
    if (registration_failure_ == RegistrationFailure::kIpNotAuthorized) {
      HttpResponse r;
      r.status = 401;
      r.content_type = "text/plain";
      r.body = "IP is not authorized";
      return r;
    }
    if (registration_failure_ == RegistrationFailure::kMissingScope) {
      return RegistryError(403, "missing_scope",
                           "Missing required scope api.agents.environments.connect");
    }
    std::string token = BearerToken(req);
    if (token.empty()) {
      return RegistryError(401, "missing_api_key", "Missing bearer token");
    }
    auto has = [&](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), token) != keys.end();
    };
    if (!options_.accept_any_executor_key && !has(options_.executor_keys)) {
      if (options_.accept_any_api_key || has(options_.api_keys)) {
        return RegistryError(403, "missing_scope",
                             "Missing required scope api.agents.environments.connect");
      }
      return RegistryError(401, "invalid_api_key", "Incorrect API key provided");
    }
    if (env == environments_.end() || env->second.deleted) {
      return RegistryError(404, "environment_not_found", "Environment " + env_id + " not found");
    }
    if (env->second.expired) {
      return RegistryError(410, "environment_expired", "Environment " + env_id + " has expired");
    }
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return RegistryError(400, "invalid_request", "Registration body must be a JSON object");
    }
    std::string profile = body.value("security_profile", "");
    if (profile != kNoiseProfile && profile != kPlainJsonRpcProfile) {
      return RegistryError(400, "unsupported_security_profile",
                           "Unsupported security_profile '" + profile + "'");
    }
    std::string reg_id = NewId("exreg_");
    registrations_[reg_id] = Registration{env_id, profile};
    ++env->second.registrations.successes;
    return JsonResponse(200, {{"environment_id", env_id},
                              {"url", "ws://" + host_ + ":" + std::to_string(ws_port_) +
                                          "/rendezvous/" + env_id + "/" + reg_id},
                              {"security_profile", profile},
                              {"executor_registration_id", reg_id}});
  }

  // "/rendezvous/{env}/{reg}" → the registration, if it is still valid.
  std::optional<std::pair<std::string, Registration>> ParseRendezvousLocked(
      const std::string& resource) const {
    std::string path = resource.substr(0, resource.find('?'));
    const std::string prefix = "/rendezvous/";
    if (path.rfind(prefix, 0) != 0) {
      return std::nullopt;
    }
    std::string rest = path.substr(prefix.size());
    auto slash = rest.find('/');
    if (slash == std::string::npos) {
      return std::nullopt;
    }
    std::string env_id = rest.substr(0, slash);
    std::string reg_id = rest.substr(slash + 1);
    auto reg = registrations_.find(reg_id);
    if (reg == registrations_.end() || reg->second.environment_id != env_id) {
      return std::nullopt;
    }
    auto env = environments_.find(env_id);
    if (env == environments_.end() || env->second.deleted || env->second.expired) {
      return std::nullopt;
    }
    return std::make_pair(reg_id, reg->second);
  }

  int OnWsValidate(const std::string& resource) {
    faults_->Admit("openai.executor.connect", false);
    std::lock_guard lock(mu_);
    // 4xx makes the real codex re-register (codex-exec-server.md §3.3).
    return ParseRendezvousLocked(resource) ? 101 : 404;
  }

  void OnWsOpen(WsConnectionId id, const std::string& resource) {
    std::lock_guard lock(mu_);
    auto reg = ParseRendezvousLocked(resource);
    if (!reg) {
      return;
    }
    RpcConnection rc;
    rc.id = id;
    rc.environment_id = reg->second.environment_id;
    rc.profile = reg->second.profile;
    rpc_[id] = rc;
    EnvironmentRec& env = environments_[rc.environment_id];
    env.connections.insert(id);
    env.ever_connected = true;
    AnnounceLocked(env);
    if (rc.profile == kPlainJsonRpcProfile) {
      ws_.Send(
          id,
          json{{"id", 1}, {"method", "initialize"}, {"params", {{"clientName", "sbx-emulator"}}}}
              .dump());
    }
    cv_.notify_all();
  }

  void OnWsText(WsConnectionId id, const std::string& text) {
    json msg = json::parse(text, nullptr, false);
    std::lock_guard lock(mu_);
    auto it = rpc_.find(id);
    if (it == rpc_.end()) {
      return;
    }
    RpcConnection& rc = it->second;
    if (msg.is_discarded() || !msg.is_object() || rc.profile != kPlainJsonRpcProfile) {
      return;
    }
    if (msg.contains("id") && !msg.contains("method")) {
      int64_t rid = msg["id"].is_number_integer() ? msg["id"].get<int64_t>() : -1;
      if (rid == 1 && !rc.ready) {
        if (msg.contains("result")) {
          rc.ready = true;
          ws_.Send(id, json{{"method", "initialized"}, {"params", json::object()}}.dump());
        }
      } else {
        rc.responses[rid] = msg;
      }
      cv_.notify_all();
      return;
    }
    std::string method = msg.value("method", "");
    const json params = msg.value("params", json::object());
    if (!params.is_object()) {
      return;
    }
    auto p = rc.processes.find(params.value("processId", ""));
    if (p == rc.processes.end()) {
      return;
    }
    ProcessWatch& w = *p->second;
    int64_t seq = params.value("seq", int64_t{0});
    if (method == "process/output") {
      std::string bytes = Base64Decode(params.value("chunk", ""));
      w.chunks.emplace_back(seq, bytes);
      if (SessionRec* s = FindSessionLocked(w.session_id)) {
        json e = Event("agent.output.command_execution_output.delta");
        e.update({{"item_id", w.item_id},
                  {"output_index", w.output_index},
                  {"delta", bytes},
                  {"session_id", w.session_id},
                  {"turn_id", w.turn_id}});
        EmitLocked(*s, e);
      }
    } else if (method == "process/exited") {
      w.exit_code = params.value("exitCode", -1);
    } else if (method == "process/closed") {
      w.closed = true;
    }
    cv_.notify_all();
  }

  void OnWsClose(WsConnectionId id) {
    std::lock_guard lock(mu_);
    auto it = rpc_.find(id);
    if (it == rpc_.end()) {
      return;
    }
    std::string env_id = it->second.environment_id;
    it->second.gone = true;
    rpc_.erase(it);
    auto env = environments_.find(env_id);
    if (env != environments_.end()) {
      env->second.connections.erase(id);
      if (env->second.connections.empty()) {
        env->second.dropped_at = SteadyClock::now();
      }
      AnnounceLocked(env->second);
    }
    cv_.notify_all();
  }

  // Emits agent.session.environment.<status> when the status changed since the last event.
  void AnnounceLocked(EnvironmentRec& env) {
    std::string status = EnvironmentStatusLocked(env);
    if (status == env.reported) {
      return;
    }
    env.reported = status;
    if (SessionRec* s = FindSessionLocked(env.session_id)) {
      EmitLocked(*s, EnvironmentEvent(*s, env, status));
    }
  }

  void TimerLoop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, 50ms, [&] { return stopping_; });
      for (auto& [id, env] : environments_) {
        if (env.reported == "connected" && env.connections.empty()) {
          AnnounceLocked(env);
        }
      }
    }
  }

  // ---- admin API (/_emulator/openai/…) ----------------------------------------------------------

  HttpResponse HandleAdmin(const HttpRequest& req) {
    const auto& seg = req.segments;
    const std::string& m = req.method;
    if (seg.size() >= 2 && seg[1] == "openai") {
      if (seg.size() == 3 && seg[2] == "registrations" && m == "GET") {
        json out = json::object();
        for (const auto& [id, c] : Registrations()) {
          out[id] = {{"attempts", c.attempts}, {"successes", c.successes}};
        }
        return JsonResponse(200, out);
      }
      if (seg.size() == 3 && seg[2] == "registration_failure" && m == "POST") {
        json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
        std::string mode = body.is_object() ? body.value("mode", "") : "";
        RegistrationFailure f;
        if (mode == "none") {
          f = RegistrationFailure::kNone;
        } else if (mode == "ip") {
          f = RegistrationFailure::kIpNotAuthorized;
        } else if (mode == "scope") {
          f = RegistrationFailure::kMissingScope;
        } else {
          return ErrorResponse(BadRequest("mode must be none, ip or scope", "mode"));
        }
        SetRegistrationFailure(f);
        return JsonResponse(200, {{"mode", mode}});
      }
      if (seg.size() == 5 && seg[2] == "sessions" && seg[4] == "expire" && m == "POST") {
        if (!ExpireSession(seg[3])) {
          return ErrorResponse(NotFound("Session", seg[3]));
        }
        return JsonResponse(200, {{"expired", seg[3]}});
      }
      if (seg.size() == 5 && seg[2] == "environments" && seg[4] == "drop" && m == "POST") {
        {
          std::lock_guard lock(mu_);
          if (environments_.count(seg[3]) == 0) {
            return ErrorResponse(NotFound("Environment", seg[3]));
          }
        }
        return JsonResponse(200, {{"dropped", DropExecutor(seg[3])}});
      }
      if (seg.size() == 3 && seg[2] == "state" && m == "GET") {
        return JsonResponse(200, StateJson());
      }
      if (seg.size() == 3 && seg[2] == "reset" && m == "POST") {
        {
          std::lock_guard lock(mu_);
          registration_failure_ = RegistrationFailure::kNone;
          for (auto& [id, env] : environments_) {
            env.registrations = {};
          }
          unknown_registrations_.clear();
        }
        faults_->Reset();
        return JsonResponse(200, {{"reset", true}});
      }
      return ErrorResponse(NotFound("Admin path", req.path));
    }
    if (auto r = faults_->HandleAdmin(req)) {
      return *r;
    }
    return ErrorResponse(NotFound("Admin path", req.path));
  }

  json StateJson() {
    std::lock_guard lock(mu_);
    json sessions = json::array();
    for (const auto& [id, s] : sessions_) {
      sessions.push_back({{"id", id},
                          {"status", s->status},
                          {"environment_id", s->environment_id},
                          {"turns", s->turns.size()},
                          {"root_bound", s->root_bound},
                          {"subscribers", s->subscribers.size()}});
    }
    json envs = json::array();
    for (const auto& [id, env] : environments_) {
      envs.push_back({{"id", id},
                      {"session_id", env.session_id},
                      {"status", EnvironmentStatusLocked(env)},
                      {"connections", env.connections.size()},
                      {"deleted", env.deleted},
                      {"registrations",
                       {{"attempts", env.registrations.attempts},
                        {"successes", env.registrations.successes}}}});
    }
    static const char* kModes[] = {"none", "ip", "scope"};
    return {{"sessions", sessions},
            {"environments", envs},
            {"registration_failure", kModes[static_cast<int>(registration_failure_)]},
            {"strict_session_delete", options_.strict_session_delete},
            {"websocket_port", ws_port_}};
  }

  Options options_;
  std::unique_ptr<internal::FaultInjector> owned_faults_;
  internal::FaultInjector* faults_ = nullptr;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  int ws_port_ = 0;
  bool started_ = false;
  bool stopped_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                                                  // Guarded by mu_.
  std::mt19937_64 rng_;                                                    // Guarded by mu_.
  RegistrationFailure registration_failure_ = RegistrationFailure::kNone;  // Guarded by mu_.
  int64_t session_seq_ = 0;                                                // Guarded by mu_.
  int64_t process_seq_ = 0;                                                // Guarded by mu_.
  std::map<std::string, std::shared_ptr<SessionRec>> sessions_;            // Guarded by mu_.
  std::map<std::string, int64_t> session_seq_of_;       // incl. deleted.  // Guarded by mu_.
  std::map<std::string, EnvironmentRec> environments_;  // Guarded by mu_.
  std::map<std::string, RegistrationCount> unknown_registrations_;  // Guarded by mu_.
  std::map<std::string, Registration> registrations_;               // Guarded by mu_.
  std::map<WsConnectionId, RpcConnection> rpc_;                     // Guarded by mu_.
  std::vector<Runner> runners_;                                     // Guarded by mu_.

  internal::HttpServer http_;
  internal::WebSocketServer ws_;
  std::thread timer_;
};

OpenAiEmulator::OpenAiEmulator(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
OpenAiEmulator::~OpenAiEmulator() = default;
api::StatusOr<int> OpenAiEmulator::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void OpenAiEmulator::Stop() { impl_->Stop(); }
std::string OpenAiEmulator::base_url() const { return impl_->base_url(); }
std::string OpenAiEmulator::server_url() const { return impl_->server_url(); }
int OpenAiEmulator::websocket_port() const { return impl_->websocket_port(); }
internal::FaultInjector& OpenAiEmulator::faults() { return impl_->faults(); }
void OpenAiEmulator::SetRegistrationFailure(RegistrationFailure failure) {
  impl_->SetRegistrationFailure(failure);
}
std::map<std::string, OpenAiEmulator::RegistrationCount> OpenAiEmulator::Registrations() const {
  return impl_->Registrations();
}
bool OpenAiEmulator::DropExecutor(const std::string& environment_id) {
  return impl_->DropExecutor(environment_id);
}
bool OpenAiEmulator::ExpireSession(const std::string& session_id) {
  return impl_->ExpireSession(session_id);
}

}  // namespace sbx::emulator
