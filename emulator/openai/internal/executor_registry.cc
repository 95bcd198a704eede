#include "emulator/openai/internal/executor_registry.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "api/base64.h"
#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/internal/direct_transport.h"
#include "emulator/openai/internal/ip_allowlist.h"

namespace sbx::emulator::internal::openai {
namespace {

using namespace std::chrono_literals;

}  // namespace

ExecutorRegistry::ExecutorRegistry(State& state, FaultInjector& faults)
    : state_(state),
      faults_(faults),
      ws_(WebSocketHandlers{[this](const std::string& r) { return OnWsValidate(r); },
                            [this](WsConnectionId id, const std::string& r) { OnWsOpen(id, r); },
                            [this](WsConnectionId id, const std::string& t) { OnWsText(id, t); },
                            [this](WsConnectionId id) { OnWsClose(id); }}) {}

ExecutorRegistry::~ExecutorRegistry() { Stop(); }

api::StatusOr<int> ExecutorRegistry::Start(const std::string& host) {
  std::string error;
  int ws_port = ws_.Start(host, 0, error);
  if (ws_port < 0) {
    return api::Status(api::StatusCode::kUnavailable, error);
  }
  return ws_port;
}

void ExecutorRegistry::StartTimer() {
  timer_ = std::thread([this] { TimerLoop(); });
}

void ExecutorRegistry::Stop() {
  state_.cv.notify_all();
  ws_.Stop();
  state_.cv.notify_all();
  if (timer_.joinable()) {
    timer_.join();
  }
}

HttpResponse ExecutorRegistry::HandleRegister(const std::string& connect_token,
                                              const std::string& env_id, const HttpRequest& req) {
  return Admit(connect_token, env_id, req, Transport::kRelay);
}

HttpResponse ExecutorRegistry::HandleDirectRegister(const std::string& connect_token,
                                                    const std::string& env_id,
                                                    const HttpRequest& req) {
  return Admit(connect_token, env_id, req, Transport::kDirect);
}

HttpResponse ExecutorRegistry::Admit(const std::string& connect_token, const std::string& env_id,
                                     const HttpRequest& req, Transport transport) {
  CallPlan plan = faults_.AdmitAndDelay("openai.executor.register", false);
  if (plan.fault && !plan.fault->after) {
    return RegistryFault(*plan.fault);
  }
  std::optional<HttpResponse> denied = CheckCallerAddress(state_, env_id, req);
  HttpResponse r = denied ? *denied : Register(connect_token, env_id, req, transport);
  if (plan.fault && plan.fault->after) {
    r = RegistryFault(*plan.fault);
  }
  return r;
}

void ExecutorRegistry::SetRegistrationFailure(State::RegistrationFailure failure) {
  std::lock_guard lock(state_.mu);
  state_.registration_failure = failure;
}

void ExecutorRegistry::ResetRegistrations() {
  std::lock_guard lock(state_.mu);
  state_.registration_failure = State::RegistrationFailure::kNone;
  for (auto& [id, env] : state_.environments) {
    env.registrations = {};
  }
  state_.unknown_registrations.clear();
}

bool ExecutorRegistry::Send(WsConnectionId id, const json& message) {
  return ws_.Send(id, message.dump());
}

std::map<std::string, State::RegistrationCount> ExecutorRegistry::Registrations() const {
  std::lock_guard lock(state_.mu);
  std::map<std::string, State::RegistrationCount> out;
  for (const auto& [id, env] : state_.environments) {
    out[id] = env.registrations;
  }
  for (const auto& [id, count] : state_.unknown_registrations) {
    out[id] = count;
  }
  return out;
}

bool ExecutorRegistry::DropExecutor(const std::string& environment_id) {
  std::set<WsConnectionId> conns;
  {
    std::lock_guard lock(state_.mu);
    auto it = state_.environments.find(environment_id);
    if (it == state_.environments.end()) {
      return false;
    }
    conns = it->second.connections;
  }
  for (auto id : conns) {
    ws_.Close(id, 1001, "dropped by the emulator admin API");
  }
  return !conns.empty();
}

std::optional<HttpResponse> ExecutorRegistry::CheckRemoteUrlLocked(const std::string& connect_token,
                                                                   const std::string& env_id,
                                                                   const HttpRequest& req) const {
  auto env = state_.environments.find(env_id);
  if (env != state_.environments.end() && env->second.connect_token == connect_token) {
    return std::nullopt;
  }
  const bool known =
      std::any_of(state_.environments.begin(), state_.environments.end(),
                  [&](const auto& e) { return e.second.connect_token == connect_token; });
  if (!known) {
    // No session has this remote_url: the path does not exist (as any unknown URL).
    return ErrorResponse({404,
                          "invalid_request_error",
                          "unknown_url",
                          "Unknown request URL: " + req.method + " " + req.path + ".",
                          {},
                          {}});
  }
  if (env == state_.environments.end()) {
    return std::nullopt;  // answered below as an unknown environment
  }
  // Another session's remote_url knows no such environment.
  return RegistryError(404, "environment_not_found", "Environment " + env_id + " not found");
}

HttpResponse ExecutorRegistry::Register(const std::string& connect_token, const std::string& env_id,
                                        const HttpRequest& req, Transport transport) {
  std::lock_guard lock(state_.mu);
  auto env = state_.environments.find(env_id);
  if (env != state_.environments.end()) {
    ++env->second.registrations.attempts;
  } else {
    ++state_.unknown_registrations[env_id].attempts;
  }
  if (auto refused = CheckRemoteUrlLocked(connect_token, env_id, req)) {
    return *refused;
  }
  if (state_.registration_failure == State::RegistrationFailure::kIpNotAuthorized) {
    HttpResponse r;
    r.status = 401;
    r.content_type = "text/plain";
    r.body = "IP is not authorized";
    return r;
  }
  if (state_.registration_failure == State::RegistrationFailure::kMissingScope) {
    return RegistryError(403, "missing_scope",
                         "Missing required scope api.agents.environments.connect");
  }
  if (transport == Transport::kDirect) {
    if (auto refused = CheckSigV4Authorization(req)) {
      return *refused;
    }
  } else {
    std::string token = BearerToken(req);
    if (token.empty()) {
      return RegistryError(401, "missing_api_key", "Missing bearer token");
    }
    auto has = [&](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), token) != keys.end();
    };
    if (!state_.options.accept_any_executor_key && !has(state_.options.executor_keys)) {
      if (state_.options.accept_any_api_key || has(state_.options.api_keys)) {
        return RegistryError(403, "missing_scope",
                             "Missing required scope api.agents.environments.connect");
      }
      return RegistryError(401, "invalid_api_key", "Incorrect API key provided");
    }
  }
  if (env == state_.environments.end() || env->second.deleted) {
    return RegistryError(404, "environment_not_found", "Environment " + env_id + " not found");
  }
  if (env->second.expired) {
    return RegistryError(410, "environment_expired", "Environment " + env_id + " has expired");
  }
  std::string profile = kDirectTransport;
  if (transport == Transport::kDirect) {
    if (auto refused = CheckDirectRegisterBody(req.body)) {
      return *refused;
    }
  } else {
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return RegistryError(400, "invalid_request", "Registration body must be a JSON object");
    }
    profile = body.value("security_profile", "");
    if (profile != kNoiseProfile && profile != kPlainJsonRpcProfile) {
      return RegistryError(400, "unsupported_security_profile",
                           "Unsupported security_profile '" + profile + "'");
    }
  }
  std::string reg_id = state_.NewId("exreg_");
  state_.registrations[reg_id] = Registration{env_id, profile};
  ++env->second.registrations.successes;
  const std::string url = "ws://" + state_.host + ":" + std::to_string(state_.ws_port) +
                          "/rendezvous/" + env_id + "/" + reg_id;
  if (transport == Transport::kDirect) {
    return JsonResponse(200, DirectRegistrationAnswer(env_id, reg_id, url));
  }
  return JsonResponse(200, {{"environment_id", env_id},
                            {"url", url},
                            {"security_profile", profile},
                            {"executor_registration_id", reg_id}});
}

HttpResponse ExecutorRegistry::RegistryFault(const FaultSpec& f) {
  return RegistryError(f.status, f.error_code.empty() ? "injected_fault" : f.error_code,
                       f.message.empty() ? "Injected fault on registration" : f.message);
}

std::optional<std::pair<std::string, Registration>> ExecutorRegistry::ParseRendezvousLocked(
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
  auto reg = state_.registrations.find(reg_id);
  if (reg == state_.registrations.end() || reg->second.environment_id != env_id) {
    return std::nullopt;
  }
  auto env = state_.environments.find(env_id);
  if (env == state_.environments.end() || env->second.deleted || env->second.expired) {
    return std::nullopt;
  }
  return std::make_pair(reg_id, reg->second);
}

int ExecutorRegistry::OnWsValidate(const std::string& resource) {
  faults_.Admit("openai.executor.connect", false);
  std::lock_guard lock(state_.mu);
  // 4xx makes the real codex re-register (codex-exec-server.md §3.3).
  return ParseRendezvousLocked(resource) ? 101 : 404;
}

void ExecutorRegistry::OnWsOpen(WsConnectionId id, const std::string& resource) {
  std::lock_guard lock(state_.mu);
  auto reg = ParseRendezvousLocked(resource);
  if (!reg) {
    return;
  }
  RpcConnection rc;
  rc.id = id;
  rc.environment_id = reg->second.environment_id;
  rc.profile = reg->second.profile;
  state_.connections[id] = rc;
  EnvironmentRec& env = state_.environments[rc.environment_id];
  env.connections.insert(id);
  env.ever_connected = true;
  state_.AnnounceLocked(env);
  if (SpeaksJsonRpc(rc.profile)) {
    Send(id, {{"id", 1}, {"method", "initialize"}, {"params", {{"clientName", "sbx-emulator"}}}});
  }
  state_.cv.notify_all();
}

void ExecutorRegistry::OnWsText(WsConnectionId id, const std::string& text) {
  json msg = json::parse(text, nullptr, false);
  std::lock_guard lock(state_.mu);
  auto it = state_.connections.find(id);
  if (it == state_.connections.end()) {
    return;
  }
  RpcConnection& rc = it->second;
  if (msg.is_discarded() || !msg.is_object() || !SpeaksJsonRpc(rc.profile)) {
    return;
  }
  if (msg.contains("id") && !msg.contains("method")) {
    int64_t rid = msg["id"].is_number_integer() ? msg["id"].get<int64_t>() : -1;
    if (rid == 1 && !rc.ready) {
      if (msg.contains("result")) {
        rc.ready = true;
        Send(id, {{"method", "initialized"}, {"params", json::object()}});
      }
    } else {
      rc.responses[rid] = msg;
    }
    state_.cv.notify_all();
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
    std::string bytes = api::Base64Decode(params.value("chunk", "")).value_or("");
    w.chunks.emplace_back(seq, bytes);
    if (SessionRec* s = state_.FindSessionLocked(w.session_id)) {
      json e = state_.Event("agent.output.command_execution_output.delta");
      e.update({{"item_id", w.item_id},
                {"output_index", w.output_index},
                {"delta", bytes},
                {"session_id", w.session_id},
                {"turn_id", w.turn_id}});
      state_.EmitLocked(*s, e);
    }
  } else if (method == "process/exited") {
    w.exit_code = params.value("exitCode", -1);
  } else if (method == "process/closed") {
    w.closed = true;
  }
  state_.cv.notify_all();
}

void ExecutorRegistry::OnWsClose(WsConnectionId id) {
  std::lock_guard lock(state_.mu);
  auto it = state_.connections.find(id);
  if (it == state_.connections.end()) {
    return;
  }
  std::string env_id = it->second.environment_id;
  it->second.gone = true;
  state_.connections.erase(it);
  auto env = state_.environments.find(env_id);
  if (env != state_.environments.end()) {
    env->second.connections.erase(id);
    if (env->second.connections.empty()) {
      env->second.dropped_at = SteadyClock::now();
    }
    state_.AnnounceLocked(env->second);
  }
  state_.cv.notify_all();
}

void ExecutorRegistry::TimerLoop() {
  std::unique_lock lock(state_.mu);
  while (!state_.stopping) {
    state_.cv.wait_for(lock, 50ms, [&] { return state_.stopping; });
    for (auto& [id, env] : state_.environments) {
      if (env.reported == "connected" && env.connections.empty()) {
        state_.AnnounceLocked(env);
      }
    }
  }
}

}  // namespace sbx::emulator::internal::openai
