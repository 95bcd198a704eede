#include "emulator/openai/internal/admin_api.h"

#include <mutex>

#include "emulator/openai/internal/api_error.h"

namespace sbx::emulator::internal::openai {

AdminApi::AdminApi(State& state, ExecutorRegistry& registry, FaultInjector& faults)
    : state_(state), registry_(registry), faults_(faults) {}

HttpResponse AdminApi::Handle(const HttpRequest& req) {
  const auto& seg = req.segments;
  const std::string& m = req.method;
  if (seg.size() >= 2 && seg[1] == "openai") {
    if (seg.size() == 3 && seg[2] == "registrations" && m == "GET") {
      json out = json::object();
      for (const auto& [id, c] : registry_.Registrations()) {
        out[id] = {{"attempts", c.attempts}, {"successes", c.successes}};
      }
      return JsonResponse(200, out);
    }
    if (seg.size() == 3 && seg[2] == "registration_failure" && m == "POST") {
      json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
      std::string mode = body.is_object() ? body.value("mode", "") : "";
      State::RegistrationFailure f;
      if (mode == "none") {
        f = State::RegistrationFailure::kNone;
      } else if (mode == "ip") {
        f = State::RegistrationFailure::kIpNotAuthorized;
      } else if (mode == "scope") {
        f = State::RegistrationFailure::kMissingScope;
      } else {
        return ErrorResponse(BadRequest("mode must be none, ip or scope", "mode"));
      }
      registry_.SetRegistrationFailure(f);
      return JsonResponse(200, {{"mode", mode}});
    }
    if (seg.size() == 5 && seg[2] == "sessions" && seg[4] == "expire" && m == "POST") {
      if (!state_.ExpireSession(seg[3])) {
        return ErrorResponse(NotFound("Session", seg[3]));
      }
      return JsonResponse(200, {{"expired", seg[3]}});
    }
    if (seg.size() == 5 && seg[2] == "environments" && seg[4] == "drop" && m == "POST") {
      {
        std::lock_guard lock(state_.mu);
        if (state_.environments.count(seg[3]) == 0) {
          return ErrorResponse(NotFound("Environment", seg[3]));
        }
      }
      return JsonResponse(200, {{"dropped", registry_.DropExecutor(seg[3])}});
    }
    if (seg.size() == 3 && seg[2] == "state" && m == "GET") {
      return JsonResponse(200, StateJson());
    }
    if (seg.size() == 3 && seg[2] == "reset" && m == "POST") {
      registry_.ResetRegistrations();
      faults_.Reset();
      return JsonResponse(200, {{"reset", true}});
    }
    return ErrorResponse(NotFound("Admin path", req.path));
  }
  if (auto r = faults_.HandleAdmin(req)) {
    return *r;
  }
  return ErrorResponse(NotFound("Admin path", req.path));
}

json AdminApi::StateJson() {
  std::lock_guard lock(state_.mu);
  json sessions = json::array();
  for (const auto& [id, s] : state_.sessions) {
    sessions.push_back({{"id", id},
                        {"status", s->status},
                        {"environment_id", s->environment_id},
                        {"turns", s->turns.size()},
                        {"root_bound", s->root_bound},
                        {"subscribers", s->subscribers.size()}});
  }
  json envs = json::array();
  for (const auto& [id, env] : state_.environments) {
    envs.push_back(
        {{"id", id},
         {"session_id", env.session_id},
         {"status", state_.EnvironmentStatusLocked(env)},
         {"connections", env.connections.size()},
         {"deleted", env.deleted},
         {"registrations",
          {{"attempts", env.registrations.attempts}, {"successes", env.registrations.successes}}}});
  }
  static const char* kModes[] = {"none", "ip", "scope"};
  return {{"sessions", sessions},
          {"environments", envs},
          {"registration_failure", kModes[static_cast<int>(state_.registration_failure)]},
          {"strict_session_delete", state_.options.strict_session_delete},
          {"websocket_port", state_.ws_port}};
}

}  // namespace sbx::emulator::internal::openai
