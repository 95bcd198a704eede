#include "emulator/databricks/internal/admin_api.h"

#include <signal.h>

namespace sbx::emulator::internal::databricks {
namespace {

namespace fs = std::filesystem;

}  // namespace

AdminApi::AdminApi(State& state, FaultInjector& faults) : state_(state), faults_(faults) {}

HttpResponse AdminApi::AdminError(int status, const std::string& message) {
  return state_.ErrorResponse({status, internal::DefaultErrorCode(status), message, {}});
}

HttpResponse AdminApi::Handle(const HttpRequest& req) {
  const std::string& p = req.path;
  const std::string& m = req.method;
  if (p == "/_emulator/info" && m == "GET") {
    return Ok({{"instance_id", state_.instance_id},
               {"isolation", std::string(IsolationName(state_.isolation))},
               {"root_dir", state_.root.string()},
               {"bin_dir", state_.bin_dir.string()},
               {"databricks_url", state_.base_url()}});
  }
  if (p == "/_emulator/exec_log") {
    std::lock_guard lock(state_.mu);
    if (m == "DELETE") {
      state_.exec_log.clear();
      return Ok(json::object());
    }
    json entries = json::array();
    for (const auto& e : state_.exec_log) {
      entries.push_back({{"sandbox_id", e.sandbox_id},
                         {"command_id", e.command_id},
                         {"cmd", e.cmd},
                         {"args", e.args},
                         {"env_names", e.env_names}});
    }
    return Ok({{"commands", entries}});
  }
  if (p == "/_emulator/reset" && m == "POST") {
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    bool wipe = body.is_object() && body.value("sandboxes", false);
    faults_.Reset();
    std::lock_guard lock(state_.mu);
    state_.exec_log.clear();
    if (wipe) {
      for (auto& [id, sb] : state_.sandboxes) {
        state_.KillSandboxLocked(sb);
        std::error_code ec;
        fs::remove_all(state_.SandboxDir(id), ec);
      }
      state_.sandboxes.clear();
    }
    return Ok(json::object());
  }
  const std::string prefix = "/_emulator/sandboxes/";
  if (p.starts_with(prefix)) {
    std::string rest = p.substr(prefix.size());
    std::string id = rest.substr(0, rest.find('/'));
    std::string action = rest.size() > id.size() ? rest.substr(id.size() + 1) : "";
    std::lock_guard lock(state_.mu);
    SandboxRec* sb = state_.FindLocked(id);
    if (sb == nullptr) {
      return state_.ErrorResponse(SandboxNotFound(id));
    }
    if (action.empty() && m == "GET") {
      auto now = SteadyClock::now();
      return Ok({{"sandbox_id", id},
                 {"state", StateName(sb->state)},
                 {"boot", sb->boot},
                 {"home_dir", (state_.SandboxDir(id) / "home").string()},
                 {"tmp_dir", (state_.SandboxDir(id) / "tmp").string()},
                 {"running_execs", sb->running_execs},
                 // What the idle timer uses: "off" when nothing auto-stops the sandbox.
                 {"inactivity_timeout", state_.EffectiveTimeoutLocked(*sb).count() > 0
                                            ? FormatDuration(state_.EffectiveTimeoutLocked(*sb))
                                            : std::string("off")},
                 {"idle_ms",
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - sb->last_activity)
                      .count()}});
    }
    if (action == "stop" && m == "POST") {
      // Behind the client's back, exactly like an idle auto-stop.
      if (sb->state == SandboxState::kRunning || sb->state == SandboxState::kPending) {
        state_.BeginStopLocked(*sb, SteadyClock::now());
      }
      return Ok(state_.SandboxJson(*sb));
    }
    if (action == "kill_processes" && m == "POST") {
      for (pid_t pg : sb->exec_pgids) {
        ::kill(-pg, SIGKILL);
      }
      int killed = internal::KillProcessesWithEnv(state_.Marker(id));
      return Ok({{"killed", killed}});
    }
    if (action == "processes" && m == "GET") {
      return Ok({{"pids", internal::FindProcessesWithEnv(state_.Marker(id))}});
    }
    return AdminError(404, "unknown admin action '" + action + "'");
  }
  if (auto r = faults_.HandleAdmin(req)) {
    return *r;
  }
  return AdminError(404, "unknown admin endpoint " + m + " " + p);
}

}  // namespace sbx::emulator::internal::databricks
