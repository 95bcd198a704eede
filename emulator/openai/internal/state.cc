#include "emulator/openai/internal/state.h"

#include <algorithm>
#include <string>
#include <utility>

#include "emulator/openai/internal/webhook_sender.h"

namespace sbx::emulator::internal::openai {

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

State::State(OpenAiEmulator::Options options)
    : options(std::move(options)),
      rng(std::random_device{}()),
      registration_failure(this->options.registration_failure) {}

std::string State::server_url() const { return "http://" + host + ":" + std::to_string(port); }
std::string State::base_url() const { return server_url() + "/v1"; }
std::string State::RemoteUrl(const std::string& connect_token) const {
  return base_url() + "/agents/api/connect/" + connect_token;
}

bool SpeaksJsonRpc(const std::string& profile) {
  return profile == kPlainJsonRpcProfile || profile == kDirectTransport;
}

std::string State::NewId(const std::string& prefix) {
  static const char* kHex = "0123456789abcdef";
  std::string out = prefix;
  for (int i = 0; i < 24; ++i) {
    out += kHex[rng() % 16];
  }
  return out;
}

json State::SessionJson(const SessionRec& s) const {
  return {{"id", s.id},
          {"object", "agent.session"},
          {"status", s.status},
          {"required_actions", s.required_actions},
          {"environment",
           {{"type", "self_hosted"},
            {"id", s.environment_id},
            {"remote_url", RemoteUrl(s.connect_token)},
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

std::string State::EnvironmentStatusLocked(const EnvironmentRec& env) const {
  if (env.expired) {
    return "expired";
  }
  if (!env.connections.empty()) {
    return "connected";
  }
  if (!env.ever_connected) {
    return "pending";
  }
  return SteadyClock::now() - env.dropped_at >= options.disconnected_after ? "disconnected"
                                                                           : "connected";
}

json State::EnvironmentJson(const EnvironmentRec& env) const {
  return {{"id", env.id},           {"object", "agent.environment"},
          {"type", "self_hosted"},  {"status", EnvironmentStatusLocked(env)},
          {"files", json::array()}, {"plugins", json::array()},
          {"skills", json::array()}};
}

json State::TurnJson(const SessionRec& s, const TurnRec& t) const {
  auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  return {{"id", t.id},
          {"object", "agent.session.turn"},
          {"session_id", s.id},
          {"agent_id", s.agent.value("id", json(nullptr))},
          {"subagent_id", t.subagent_id.empty() ? json(nullptr) : json(t.subagent_id)},
          {"status", t.status},
          {"created_at", t.created_at},
          {"started_at", opt(t.started_at)},
          {"completed_at", opt(t.completed_at)},
          {"error", t.error},
          {"usage", t.usage}};
}

json State::Event(const std::string& type) {
  return {{"event_id", NewId("event_")}, {"type", type}};
}

json State::SessionEvent(const SessionRec& s, const std::string& type) {
  json e = Event(type);
  e["session"] = SessionJson(s);
  return e;
}

json State::EnvironmentEvent(const SessionRec& s, const EnvironmentRec& env,
                             const std::string& status) {
  json e = Event("agent.session.environment." + status);
  e["session_id"] = s.id;
  e["turn_id"] = nullptr;
  e["environment"] = {{"id", env.id}, {"type", "self_hosted"}, {"status", status}};
  return e;
}

json State::TurnEvent(const SessionRec& s, const TurnRec& t, const std::string& type) {
  json e = Event(type);
  e["session_id"] = s.id;
  e["turn_id"] = t.id;
  e["turn"] = TurnJson(s, t);
  if (type == "agent.session.turn.completed" || type == "agent.session.turn.failed" ||
      type == "agent.session.turn.cancelled") {
    // The real service was observed to send null here (reference §2.4); the emulator sends
    // the turn's usage, which the client also reads from the turn.
    e["usage"] = t.usage;
  }
  return e;
}

json State::ItemEvent(const SessionRec& s, const std::string& turn_id, const std::string& type,
                      const json& item, json output_index) {
  json e = Event(type);
  e["session_id"] = s.id;
  e["turn_id"] = turn_id;
  e["item"] = item;
  e["output_index"] = std::move(output_index);
  return e;
}

namespace {

// The worker a session's metadata names (sbx sets sbx.dev/worker on every session it creates).
std::string WorkerOf(const SessionRec& s) {
  auto it = s.metadata.find("sbx.dev/worker");
  return it != s.metadata.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

void State::OpenInputLocked(SessionRec& s) {
  ++s.open_inputs;
  s.counters.peak_open_inputs = std::max(s.counters.peak_open_inputs, s.open_inputs);
  totals.peak_open_inputs = std::max(totals.peak_open_inputs, s.open_inputs);
  if (const std::string worker = WorkerOf(s); !worker.empty()) {
    const int64_t open = ++open_inputs_by_worker[worker];
    totals.peak_worker_open_inputs = std::max(totals.peak_worker_open_inputs, open);
  }
}

void State::CloseInputLocked(SessionRec& s) {
  if (s.open_inputs == 0) {
    return;
  }
  --s.open_inputs;
  if (const std::string worker = WorkerOf(s); !worker.empty()) {
    auto it = open_inputs_by_worker.find(worker);
    if (it != open_inputs_by_worker.end() && --it->second <= 0) {
      open_inputs_by_worker.erase(it);
    }
  }
}

void State::ForgetOpenInputsLocked(SessionRec& s) {
  while (s.open_inputs > 0) {
    CloseInputLocked(s);
  }
}

void State::CountLocked(SessionRec& s, int64_t InputCounters::*counter, int64_t n) {
  s.counters.*counter += n;
  totals.*counter += n;
}

void State::EmitLocked(SessionRec& s, const json& event) {
  if (webhooks != nullptr) {
    webhooks->OnSessionEvent(event);  // takes only the sender's own mutex
  }
  std::string data = event.dump();
  for (auto& sub : s.subscribers) {
    if (!sub->closed) {
      sub->queue.push_back(data);
    }
  }
  cv.notify_all();
}

SessionRec* State::FindSessionLocked(const std::string& id) {
  auto it = sessions.find(id);
  return it == sessions.end() ? nullptr : it->second.get();
}

// Emits agent.session.environment.<status> when the status changed since the last event.
void State::AnnounceLocked(EnvironmentRec& env) {
  std::string status = EnvironmentStatusLocked(env);
  if (status == env.reported) {
    return;
  }
  env.reported = status;
  if (SessionRec* s = FindSessionLocked(env.session_id)) {
    EmitLocked(*s, EnvironmentEvent(*s, env, status));
  }
}

bool State::ExecutorConnectedLocked(const SessionRec& s) const {
  auto env = environments.find(s.environment_id);
  return env != environments.end() && !env->second.connections.empty();
}

// A ready plain-profile connection of the session's environment, or 0.
WsConnectionId State::ReadyConnectionLocked(const SessionRec& s) const {
  auto env = environments.find(s.environment_id);
  if (env == environments.end()) {
    return 0;
  }
  WsConnectionId best = 0;
  for (auto id : env->second.connections) {
    auto c = connections.find(id);
    if (c != connections.end() && c->second.ready && !c->second.gone) {
      best = std::max(best, id);
    }
  }
  return best;
}

bool State::NoiseOnlyLocked(const SessionRec& s) const {
  auto env = environments.find(s.environment_id);
  if (env == environments.end() || env->second.connections.empty()) {
    return false;
  }
  for (auto id : env->second.connections) {
    auto c = connections.find(id);
    if (c == connections.end() || c->second.profile != kNoiseProfile) {
      return false;
    }
  }
  return true;
}

bool State::ExpireSession(const std::string& session_id) {
  std::lock_guard lock(mu);
  auto it = sessions.find(session_id);
  if (it == sessions.end()) {
    return false;
  }
  SessionRec& s = *it->second;
  s.status = "failed";
  s.error = "session expired";
  s.required_actions = json::array();
  s.pending.clear();
  s.cancel_requested = s.runner_active;
  auto env = environments.find(s.environment_id);
  if (env != environments.end() && !env->second.expired) {
    env->second.expired = true;
    env->second.reported = "expired";
    EmitLocked(s, EnvironmentEvent(s, env->second, "expired"));
  }
  EmitLocked(s, SessionEvent(s, "agent.session.failed"));
  cv.notify_all();
  return true;
}

std::string State::NewIdLocked(const std::string& prefix) {
  std::lock_guard lock(mu);
  return NewId(prefix);
}

void State::BeginStop() {
  {
    std::lock_guard lock(mu);
    stopping = true;
    for (auto& [id, s] : sessions) {
      for (auto& sub : s->subscribers) {
        sub->closed = true;
      }
    }
  }
  cv.notify_all();
}

}  // namespace sbx::emulator::internal::openai
