#include "emulator/databricks/internal/state.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "api/fingerprint.h"

namespace sbx::emulator::internal::databricks {
namespace {

namespace fs = std::filesystem;

std::string NewRequestId(State& state) {
  std::string h = state.RandomHex(16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}

}  // namespace

State::State(DatabricksEmulator::Options options)
    : options(std::move(options)), rng(std::random_device{}()) {
  instance_id = RandomHex(6);
}

std::string State::base_url() const { return "http://" + host + ":" + std::to_string(port); }

std::filesystem::path State::SandboxDir(const std::string& id) const {
  return root / "sandboxes" / id;
}

std::string State::RandomHex(int bytes) {
  std::lock_guard lock(rng_mu);
  std::string out;
  static const char* kDigits = "0123456789abcdef";
  for (int i = 0; i < bytes * 2; ++i) {
    out.push_back(kDigits[rng() & 15]);
  }
  return out;
}

HttpResponse State::ErrorResponse(const ApiError& e) {
  json body = {{"error_code", e.error_code},
               {"message", e.message},
               {"details", json::array({{{"@type", "type.googleapis.com/google.rpc.RequestInfo"},
                                         {"request_id", NewRequestId(*this)},
                                         {"serving_data", ""}}})}};
  if (e.detail) {
    body["details"].push_back(*e.detail);
  }
  HttpResponse r{e.status, "application/json", {}, Dump(body)};
  if (e.retry_after) {
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after->count()));
  }
  return r;
}

std::string State::Marker(const std::string& sandbox_id) const {
  return std::string(kMarkerName) + "=" + instance_id + "/" + sandbox_id;
}

json State::SandboxJson(const SandboxRec& sb) const {
  json j = {{"name", "sandboxes/" + sb.id}};
  if (!sb.display_name.empty()) {
    j["display_name"] = sb.display_name;
  }
  json spec = json::object();
  std::optional<Duration> timeout = sb.inactivity_timeout;
  if (!timeout && options.fill_default_inactivity_timeout &&
      options.default_inactivity_timeout.count() > 0) {
    timeout = options.default_inactivity_timeout;
  }
  if (timeout) {
    spec["compute"]["inactivity_timeout"] = FormatDuration(*timeout);
  }
  if (!sb.image_uri.empty()) {
    spec["environment"]["image_uri"] = sb.image_uri;
  }
  if (!spec.empty()) {
    j["spec"] = spec;
  }
  if (!sb.custom_tags.empty()) {
    j["metadata"]["custom_tags"] = sb.custom_tags;
  }
  j["status"] = {{"state", StateName(sb.state)}};
  j["create_time"] = FormatTime(sb.create_time);
  j["update_time"] = FormatTime(sb.update_time);
  return j;
}

std::string State::PrincipalLocked(const HttpRequest& req) const {
  std::string h = req.Header("authorization");
  std::string token = h.size() > 7 ? Trim(h.substr(7)) : "";
  if (auto it = issued.find(token); it != issued.end()) {
    return "sp:" + it->second.client_id;
  }
  // A fingerprint: the PAT itself is a secret and never shown.
  return "user:" + api::Fingerprint(token).substr(0, 8);
}

void State::TransitionedLocked(SandboxRec& sb, SystemClock::time_point at) const {
  if (options.update_time_on_transitions) {
    sb.update_time = at;
  }
}

void State::BeginPendingLocked(SandboxRec& sb, SteadyClock::time_point now) {
  sb.state = SandboxState::kPending;
  TransitionedLocked(sb, SystemClock::now());
  sb.transition_at = now + options.pending_delay;
  sb.fail_provisioning = false;
  for (const std::string& key : {sb.id, std::string()}) {
    auto it = provisioning_failures.find(key);
    if (it != provisioning_failures.end() && it->second > 0) {
      sb.fail_provisioning = true;
      if (--it->second == 0) {
        provisioning_failures.erase(it);
      }
      break;
    }
  }
}

std::string State::BootEgressIpLocked(SandboxRec& sb) const {
  if (!sb.next_boot_egress_ip.empty()) {
    return std::exchange(sb.next_boot_egress_ip, std::string());
  }
  const std::uint64_t hash = api::Fnv1a64(sb.id + "#" + std::to_string(sb.boot));
  const std::uint32_t host = static_cast<std::uint32_t>(hash % 131070) + 1;  // 198.18.0.0/15
  return "198." + std::to_string(18 + (host >> 16)) + "." + std::to_string((host >> 8) & 255) +
         "." + std::to_string(host & 255);
}

Duration State::EffectiveTimeoutLocked(const SandboxRec& sb) const {
  return sb.inactivity_timeout.value_or(options.default_inactivity_timeout);
}

// Kills every process of the sandbox: in-flight exec-sync groups and anything carrying its
// marker (detached `setsid nohup` children included).
void State::KillSandboxLocked(SandboxRec& sb) {
  for (pid_t pg : sb.exec_pgids) {
    ::kill(-pg, SIGKILL);
  }
  internal::KillProcessesWithEnv(Marker(sb.id));
}

void State::WipeScratchLocked(const SandboxRec& sb) {
  std::error_code ec;
  fs::path tmp = SandboxDir(sb.id) / "tmp";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  fs::permissions(tmp, fs::perms::all | fs::perms::sticky_bit, ec);
}

void State::BeginStopLocked(SandboxRec& sb, SteadyClock::time_point now) {
  const SystemClock::time_point at = SystemClock::now();
  if (sb.state == SandboxState::kRunning && !sb.running_intervals.empty()) {
    sb.running_intervals.back().end = at;
  }
  sb.state = SandboxState::kStopping;
  TransitionedLocked(sb, at);
  sb.transition_at = now + options.stopping_delay;
  KillSandboxLocked(sb);
  cv.notify_all();
}

// Applies every transition whose time has come. Called on each observation and by the timer.
void State::AdvanceLocked(SteadyClock::time_point now) {
  for (auto it = sandboxes.begin(); it != sandboxes.end();) {
    SandboxRec& sb = it->second;
    if (sb.state == SandboxState::kPending && now >= sb.transition_at) {
      if (sb.fail_provisioning) {
        // §4: no FAILED state; early SDK text has a provisioning failure show as
        // PENDING → STOPPING → STOPPED.
        sb.fail_provisioning = false;
        ++provisioning_failures_total;
        spdlog::info("sandbox {}: provisioning failed (injected): PENDING → STOPPING", sb.id);
        BeginStopLocked(sb, now);
      } else {
        const SystemClock::time_point at = SystemClock::now();
        sb.state = SandboxState::kRunning;
        sb.running_intervals.push_back({at, std::nullopt});
        TransitionedLocked(sb, at);
        sb.last_activity = now;
        sb.egress_ip = BootEgressIpLocked(sb);
      }
    }
    if (sb.state == SandboxState::kRunning && sb.running_execs == 0) {
      Duration timeout = EffectiveTimeoutLocked(sb);
      if (timeout.count() > 0 && now - sb.last_activity >= timeout) {
        spdlog::info("sandbox {} idle for {}: auto-stop", sb.id, FormatDuration(timeout));
        BeginStopLocked(sb, now);
      }
    }
    if (sb.state == SandboxState::kStopping && now >= sb.transition_at) {
      KillSandboxLocked(sb);
      if (sb.deleting) {
        std::error_code ec;
        fs::remove_all(SandboxDir(sb.id), ec);
        it = sandboxes.erase(it);
        continue;
      }
      sb.state = SandboxState::kStopped;
      TransitionedLocked(sb, SystemClock::now());
      WipeScratchLocked(sb);
      if (options.clear_commands_on_stop) {
        sb.commands.clear();
      }
    }
    ++it;
  }
}

std::optional<SteadyClock::time_point> State::NextDeadlineLocked() const {
  std::optional<SteadyClock::time_point> next;
  auto consider = [&](SteadyClock::time_point t) {
    if (!next || t < *next) {
      next = t;
    }
  };
  for (const auto& [id, sb] : sandboxes) {
    if (sb.state == SandboxState::kPending || sb.state == SandboxState::kStopping) {
      consider(sb.transition_at);
    }
    if (sb.state == SandboxState::kRunning && sb.running_execs == 0) {
      Duration timeout = EffectiveTimeoutLocked(sb);
      if (timeout.count() > 0) {
        consider(sb.last_activity + timeout);
      }
    }
  }
  return next;
}

void State::TimerLoop(std::stop_token st) {
  std::unique_lock lock(mu);
  while (!st.stop_requested()) {
    AdvanceLocked(SteadyClock::now());
    auto next = NextDeadlineLocked();
    auto until = next ? *next : SteadyClock::now() + std::chrono::seconds(1);
    cv.wait_until(lock, st, until, [] { return false; });
  }
}

SandboxRec* State::FindLocked(const std::string& id) {
  AdvanceLocked(SteadyClock::now());
  auto it = sandboxes.find(id);
  return it == sandboxes.end() ? nullptr : &it->second;
}

}  // namespace sbx::emulator::internal::databricks
