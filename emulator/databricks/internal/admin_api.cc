#include "emulator/databricks/internal/admin_api.h"

#include <arpa/inet.h>
#include <signal.h>

#include "api/rfc3339.h"

namespace sbx::emulator::internal::databricks {
namespace {

namespace fs = std::filesystem;

}  // namespace

AdminApi::AdminApi(State& state, FaultInjector& faults) : state_(state), faults_(faults) {}

HttpResponse AdminApi::AdminError(int status, const std::string& message) {
  return state_.ErrorResponse({status, internal::DefaultErrorCode(status), message, {}});
}

// POST /_emulator/sandboxes/{id}/egress {"ip": A, "next_boot_ip": B}: `ip` changes the
// address now (the docs: egress IPs "can change at any time"), `next_boot_ip` is the one the
// next start gets (instead of the deterministic per-boot default). Either may be given. mu held.
HttpResponse AdminApi::SetEgress(SandboxRec& sb, const HttpRequest& req) {
  json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (!body.is_object()) {
    return AdminError(400, "body must be a JSON object");
  }
  for (const char* field : {"ip", "next_boot_ip"}) {
    if (!body.contains(field)) {
      continue;
    }
    in_addr parsed{};
    if (!body[field].is_string() ||
        ::inet_pton(AF_INET, body[field].get<std::string>().c_str(), &parsed) != 1) {
      return AdminError(400, std::string(field) + " must be an IPv4 address like 198.18.0.7");
    }
  }
  if (body.contains("ip")) {
    sb.egress_ip = body["ip"].get<std::string>();
  }
  if (body.contains("next_boot_ip")) {
    sb.next_boot_egress_ip = body["next_boot_ip"].get<std::string>();
  }
  return Ok({{"sandbox_id", sb.id},
             {"egress_ip", sb.egress_ip},
             {"next_boot_egress_ip", sb.next_boot_egress_ip}});
}

// GET: what is still to fail and how many did. POST {"count": N, "sandbox": ID}: the next N
// provisionings (a create's or a start's PENDING) of sandbox ID, or of any sandbox without it,
// end STOPPING → STOPPED instead of RUNNING. count 0 clears. DELETE clears all.
HttpResponse AdminApi::ProvisioningFailures(const HttpRequest& req) {
  std::lock_guard lock(state_.mu);
  if (req.method == "POST") {
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object() || !body.contains("count") || !body["count"].is_number_integer() ||
        body["count"].get<int64_t>() < 0 || body["count"].get<int64_t>() > 1'000'000 ||
        (body.contains("sandbox") && !body["sandbox"].is_string())) {
      return AdminError(400, "expected {\"count\": N (0..1000000), \"sandbox\": ID (optional)}");
    }
    const std::string id = body.value("sandbox", "");
    const int count = static_cast<int>(body["count"].get<int64_t>());
    if (count == 0) {
      state_.provisioning_failures.erase(id);
    } else {
      state_.provisioning_failures[id] = count;
    }
  } else if (req.method == "DELETE") {
    state_.provisioning_failures.clear();
  } else if (req.method != "GET") {
    return AdminError(405, "use GET, POST or DELETE");
  }
  json pending = json::object();
  for (const auto& [id, count] : state_.provisioning_failures) {
    pending[id.empty() ? "*" : id] = count;
  }
  return Ok({{"pending", pending}, {"failed", state_.provisioning_failures_total}});
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
  if (p == "/_emulator/provisioning_failures") {
    return ProvisioningFailures(req);
  }
  if (p == "/_emulator/sandboxes" && m == "GET") {
    // Every sandbox's id and state, for a benchmark's sampler: unlike the API's LIST, neither
    // counted nor rate-limited, so watching costs the client under test nothing.
    std::lock_guard lock(state_.mu);
    json list = json::array();
    for (const auto& [id, sb] : state_.sandboxes) {
      list.push_back({{"sandbox_id", id}, {"state", StateName(sb.state)}});
    }
    return Ok({{"sandboxes", list}});
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
      // Its RUNNING intervals in Unix milliseconds (end null while it runs), and their total up
      // to now: what compute accounting is checked against.
      json intervals = json::array();
      int64_t running_ms = 0;
      const int64_t now_ms = api::UnixMillis(SystemClock::now());
      for (const SandboxRec::RunningInterval& r : sb->running_intervals) {
        const int64_t start = api::UnixMillis(r.start);
        const std::optional<int64_t> end =
            r.end ? std::optional<int64_t>(api::UnixMillis(*r.end)) : std::nullopt;
        intervals.push_back({{"start_ms", start}, {"end_ms", end ? json(*end) : json(nullptr)}});
        running_ms += end.value_or(now_ms) - start;
      }
      return Ok({{"sandbox_id", id},
                 {"state", StateName(sb->state)},
                 {"boot", sb->boot},
                 {"owner", sb->owner},
                 // The address this boot's outbound connections come from ("" before it ran).
                 {"egress_ip", sb->egress_ip},
                 {"next_boot_egress_ip", sb->next_boot_egress_ip},
                 {"home_dir", (state_.SandboxDir(id) / "home").string()},
                 {"tmp_dir", (state_.SandboxDir(id) / "tmp").string()},
                 {"running_execs", sb->running_execs},
                 // What the idle timer uses: "off" when nothing auto-stops the sandbox.
                 {"inactivity_timeout", state_.EffectiveTimeoutLocked(*sb).count() > 0
                                            ? FormatDuration(state_.EffectiveTimeoutLocked(*sb))
                                            : std::string("off")},
                 {"running_intervals", intervals},
                 {"running_ms", running_ms},
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
    if (action == "egress" && m == "POST") {
      return SetEgress(*sb, req);
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
