#include "emulator/openai/internal/admin_api.h"

#include <mutex>

#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/internal/webhook_sender.h"

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
    if (seg.size() == 3 && seg[2] == "ip_allowlist" && (m == "GET" || m == "POST")) {
      return IpAllowlistCall(req);
    }
    if (seg.size() == 5 && seg[2] == "sessions" && seg[4] == "expire" && m == "POST") {
      if (!state_.ExpireSession(seg[3])) {
        return ErrorResponse(NotFound("Session", seg[3]));
      }
      return JsonResponse(200, {{"expired", seg[3]}});
    }
    if (seg.size() == 5 && seg[2] == "sessions" && seg[4] == "drop_streams" && m == "POST") {
      // Ends every open SSE stream of the session (EOF), as a proxy or the service dropping
      // them would: a client must recover (reference §2.6).
      std::lock_guard lock(state_.mu);
      SessionRec* s = state_.FindSessionLocked(seg[3]);
      if (s == nullptr) {
        return ErrorResponse(NotFound("Session", seg[3]));
      }
      int64_t dropped = 0;
      for (auto& sub : s->subscribers) {
        dropped += sub->closed ? 0 : 1;
        sub->closed = true;
      }
      state_.cv.notify_all();
      return JsonResponse(200, {{"session_id", seg[3]}, {"dropped", dropped}});
    }
    if (seg.size() == 5 && seg[2] == "sessions" && seg[4] == "hold_inputs" && m == "POST") {
      return HoldInputs(seg[3], req);
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
    if (seg.size() == 3 && seg[2] == "webhooks" && state_.webhooks != nullptr) {
      return HandleWebhookAdmin(*state_.webhooks, req);
    }
    if (seg.size() == 3 && seg[2] == "state" && m == "GET") {
      return JsonResponse(200, StateJson());
    }
    if (seg.size() == 3 && seg[2] == "reset" && m == "POST") {
      registry_.ResetRegistrations();
      faults_.Reset();
      {
        std::lock_guard lock(state_.mu);
        state_.totals = InputCounters{};  // sessions keep their own counters
      }
      return JsonResponse(200, {{"reset", true}});
    }
    return ErrorResponse(NotFound("Admin path", req.path));
  }
  if (auto r = faults_.HandleAdmin(req)) {
    return *r;
  }
  return ErrorResponse(NotFound("Admin path", req.path));
}

// GET: the allowlist and the caller address of each environment's last registration.
// POST {"enabled": bool, "addresses": ["198.18.0.0/15", "203.0.113.7", …]}: replaces it (an
// omitted field keeps its value).
HttpResponse AdminApi::IpAllowlistCall(const HttpRequest& req) {
  std::lock_guard lock(state_.mu);
  if (req.method == "POST") {
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object() || (body.contains("enabled") && !body["enabled"].is_boolean()) ||
        (body.contains("addresses") && !body["addresses"].is_array())) {
      return ErrorResponse(BadRequest(
          "expected {\"enabled\": bool, \"addresses\": [IPv4 address or CIDR, …]}", "addresses"));
    }
    std::vector<std::string> entries = state_.ip_allowlist.entries();
    if (body.contains("addresses")) {
      entries.clear();
      for (const json& a : body["addresses"]) {
        if (!a.is_string()) {
          return ErrorResponse(BadRequest("addresses must be strings", "addresses"));
        }
        entries.push_back(a.get<std::string>());
      }
    }
    api::StatusOr<IpAllowlist> parsed =
        IpAllowlist::Parse(body.value("enabled", state_.ip_allowlist.enabled()), entries);
    if (!parsed.ok()) {
      return ErrorResponse(BadRequest(parsed.status().message(), "addresses"));
    }
    state_.ip_allowlist = *std::move(parsed);
  }
  return JsonResponse(200, {{"enabled", state_.ip_allowlist.enabled()},
                            {"addresses", state_.ip_allowlist.entries()},
                            {"last_registration_addresses", state_.registration_addresses}});
}

json AdminApi::CountersJson(const InputCounters& c) {
  return {{"accepted_inputs", c.accepted_inputs},
          {"deduped_inputs", c.deduped_inputs},
          {"dropped_inputs", c.dropped_inputs},
          {"turns_started", c.turns_started},
          {"peak_open_inputs", c.peak_open_inputs}};
}

HttpResponse AdminApi::HoldInputs(const std::string& session_id, const HttpRequest& req) {
  json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (!body.is_object() || !body.value("count", json()).is_number_integer() ||
      body["count"].get<int64_t>() < 0) {
    return ErrorResponse(BadRequest("count must be a non-negative integer", "count"));
  }
  json release = body.value("release_after_ms", json());
  if (!release.is_null() && (!release.is_number_integer() || release.get<int64_t>() < 0)) {
    return ErrorResponse(
        BadRequest("release_after_ms must be a non-negative integer", "release_after_ms"));
  }
  std::lock_guard lock(state_.mu);
  SessionRec* s = state_.FindSessionLocked(session_id);
  if (s == nullptr) {
    return ErrorResponse(NotFound("Session", session_id));
  }
  s->hold_inputs = static_cast<int>(body["count"].get<int64_t>());
  s->hold_release.reset();
  if (!release.is_null()) {
    s->hold_release = std::chrono::milliseconds(release.get<int64_t>());
  }
  return JsonResponse(
      200,
      {{"session_id", session_id}, {"hold_inputs", s->hold_inputs}, {"release_after_ms", release}});
}

json AdminApi::StateJson() {
  std::lock_guard lock(state_.mu);
  json sessions = json::array();
  for (const auto& [id, s] : state_.sessions) {
    json entry = {{"id", id},
                  {"status", s->status},
                  {"environment_id", s->environment_id},
                  {"turns", s->turns.size()},
                  {"root_bound", s->root_bound},
                  {"subscribers", s->subscribers.size()},
                  {"subscriptions_total", s->subscriptions_total},
                  {"hold_inputs", s->hold_inputs}};
    entry.update(CountersJson(s->counters));
    sessions.push_back(std::move(entry));
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
  json totals = CountersJson(state_.totals);
  totals["peak_worker_open_inputs"] = state_.totals.peak_worker_open_inputs;
  return {{"sessions", sessions},
          {"totals", totals},
          {"environments", envs},
          {"registration_failure", kModes[static_cast<int>(state_.registration_failure)]},
          {"strict_session_delete", state_.options.strict_session_delete},
          {"websocket_port", state_.ws_port}};
}

}  // namespace sbx::emulator::internal::openai
