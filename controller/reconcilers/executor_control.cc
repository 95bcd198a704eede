#include "controller/reconcilers/executor_control.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "api/conditions.h"
#include "api/text.h"
#include "controller/base/inline_wait.h"
#include "controller/reconcilers/scripts/executor_scripts.h"

namespace sbx::controller {
namespace {

namespace reason = api::reason;
using api::Lower;

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// `bash -c SCRIPT VERB DIR WORKSPACE MARKER COMMAND`, as executor.sh expects it.
databricks::ExecRequest ExecutorRequest(const char* verb, const ExecutorTarget& t,
                                        const std::string& boot_marker) {
  databricks::ExecRequest request;
  request.cmd = "/bin/bash";
  request.args = {"-c",
                  std::string(scripts::kExecutor),
                  verb,
                  ExecutorControl::Dir(t.worker),
                  t.workspace_directory,
                  boot_marker,
                  t.command};
  request.execution_timeout = std::chrono::seconds(30);
  return request;
}

}  // namespace

ExecutorReport ParseExecutorReport(std::string_view out) {
  ExecutorReport p;
  constexpr std::string_view kMarker = "---log---\n";
  const size_t log_at = out.find(kMarker);
  std::istringstream in(std::string(out.substr(0, log_at)));
  if (log_at != std::string_view::npos) {
    p.log_tail = std::string(out.substr(log_at + kMarker.size()));
  }
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string k = line.substr(0, eq);
    const std::string v = line.substr(eq + 1);
    if (k == "action") {
      p.action = v;
    } else if (k == "pid") {
      p.pid = std::atoll(v.c_str());
    } else if (k == "alive") {
      p.alive = v == "1";
    } else if (k == "env") {
      p.env = v;
    } else if (k == "boot") {
      p.boot = v;
    } else if (k == "current_boot") {
      p.current_boot = v;
    } else if (k == "workspace") {
      p.workspace_exists = v == "1";
    } else if (k == "command") {
      p.command_found = v == "1";
    }
  }
  return p;
}

std::string DiagnoseExecutorLog(const std::string& log_tail) {
  const std::string log = Lower(log_tail);
  if (Contains(log, "ip is not authorized") || Contains(log, "ip not authorized")) {
    return std::string(reason::kIpNotAuthorized);
  }
  if (Contains(log, "api.agents.environments.connect") ||
      (Contains(log, "403") && Contains(log, "missing") && Contains(log, "scope"))) {
    return std::string(reason::kMissingScope);
  }
  if (Contains(log, "requires chatgpt authentication or api key authentication")) {
    return std::string(reason::kMissingExecutorKey);
  }
  if (Contains(log, "workspace directory") && Contains(log, "does not exist")) {
    return std::string(reason::kWorkspaceDirectoryMissing);
  }
  if (Contains(log, "command not found") || Contains(log, "no such file or directory")) {
    return std::string(reason::kExecutorNotFound);
  }
  return "";
}

bool IsAuthReason(std::string_view r) {
  return r == reason::kIpNotAuthorized || r == reason::kMissingScope ||
         r == reason::kMissingExecutorKey;
}

std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      last = line;
    }
  }
  return last.size() > 300 ? last.substr(last.size() - 300) : last;
}

api::StatusOr<ExecutorLaunch> ResolveExecutorLaunch(CloudClients& clouds, const api::Object& worker,
                                                    const std::string& workspace_ref) {
  const std::string& ns = worker.metadata.namespace_;
  const api::ExecutorSpec& spec = worker.agent_worker_spec().executor;
  const std::string what = "AgentWorker " + worker.metadata.name + " spec.executor.";
  ExecutorLaunch launch;
  launch.args = spec.args;
  ASSIGN_OR_RETURN(std::string key,
                   clouds.ExecutorKey(ns, workspace_ref, spec.api_key_from, what + "apiKeyFrom"));
  launch.envs = {{"CODEX_API_KEY", std::move(key)}};
  for (size_t i = 0; i < spec.env.size(); ++i) {
    const api::EnvVar& var = spec.env[i];
    std::string value = var.value;
    if (!var.value_from.empty()) {
      ASSIGN_OR_RETURN(value, clouds.Secret(ns, var.value_from,
                                            what + "env[" + std::to_string(i) + "].valueFrom"));
    }
    launch.envs.emplace(var.name, std::move(value));
  }
  return launch;
}

std::string ExecutorControl::Dir(const std::string& worker) {
  return "/home/sandbox-agent/.sbx/" + worker;
}

api::StatusOr<ExecutorReport> ExecutorControl::Probe(databricks::SandboxApi& sandboxes,
                                                     const ExecutorTarget& t, std::stop_token stop,
                                                     bool routine) const {
  databricks::ExecRequest request = ExecutorRequest("sbx-probe", t, boot_marker_);
  request.routine = routine;
  ASSIGN_OR_RETURN(databricks::ExecResult r, sandboxes.ExecSync(t.sandbox_id, request, stop));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    return api::UnavailableError("executor probe in sandbox " + t.sandbox_id +
                                 " failed: " + LastLine(r.stderr_text));
  }
  return ParseExecutorReport(r.stdout_text);
}

api::StatusOr<ExecutorReport> ExecutorControl::Launch(databricks::SandboxApi& sandboxes,
                                                      const ExecutorTarget& t,
                                                      const ExecutorLaunch& launch,
                                                      std::stop_token stop) const {
  databricks::ExecRequest request = ExecutorRequest("sbx-launch", t, boot_marker_);
  request.args.insert(request.args.end(), launch.args.begin(), launch.args.end());
  request.envs = launch.envs;
  if (launch.replace) {
    request.envs.emplace("SBX_RELAUNCH", "1");
  }
  ASSIGN_OR_RETURN(databricks::ExecResult r, sandboxes.ExecSync(t.sandbox_id, request, stop));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    return api::UnavailableError("executor launch in sandbox " + t.sandbox_id + " failed (exit " +
                                 std::to_string(r.exit_code.value_or(-1)) +
                                 "): " + LastLine(r.stderr_text + "\n" + r.stdout_text));
  }
  return ParseExecutorReport(r.stdout_text);
}

void ExecutorControl::Stop(databricks::SandboxApi& sandboxes, const ExecutorTarget& t,
                           std::stop_token stop) const {
  // Best effort, its error ignored: its pacing wait is waited here rather than given back (which
  // would skip the stop without a word).
  const ScopedInlinePacing inline_pacing;
  (void)StopAndRemove(sandboxes, t, {}, stop);
}

api::Status ExecutorControl::StopAndRemove(databricks::SandboxApi& sandboxes,
                                           const ExecutorTarget& t,
                                           const std::vector<std::string>& remove,
                                           std::stop_token stop) const {
  databricks::ExecRequest request;
  request.cmd = "/bin/bash";
  request.args = {"-c", std::string(scripts::kStopExecutor), "sbx-stop", Dir(t.worker),
                  boot_marker_};
  request.args.insert(request.args.end(), remove.begin(), remove.end());
  request.execution_timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(databricks::ExecResult r, sandboxes.ExecSync(t.sandbox_id, request, stop));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    return api::UnavailableError("executor stop in sandbox " + t.sandbox_id +
                                 " failed: " + LastLine(r.stderr_text));
  }
  return api::Status();
}

}  // namespace sbx::controller
