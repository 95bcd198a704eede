// ExecutorControl: the AgentWorker's hands inside its sandbox. Each operation is one exec-sync of
// a complete script compiled in as a resource (scripts/executor.sh, scripts/stop_executor.sh;
// their contracts are written at their tops), and its report is parsed here:
//   * Probe: looks only — is the pid recorded for this worker alive, for which environment and
//     boot was it launched, do the workspace directory and the command exist, the log tail;
//   * Launch: launches `codex exec-server` detached and idempotently (an executor of ours that
//     runs for this environment is left alone), secrets only in the exec-sync envs, and reports
//     like the probe;
//   * Stop: kills the executor of the running boot, best effort, and then removes the given
//     directories (a PerTask task's executor directory and workspace; stop_executor.sh).
// DiagnoseExecutorLog names what an exited executor's log says went wrong.
// Stateless apart from its options; thread-safe as the SandboxApi is.
#pragma once

#include <cstdint>
#include <map>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/sandbox_api.h"

namespace sbx::controller {

// What executor.sh reported (see its header for the fields).
struct ExecutorReport {
  std::string action;  // probed, running, launched, missing
  bool alive = false;
  int64_t pid = 0;
  std::string env;           // environment id of the last launch
  std::string boot;          // boot id of the last launch
  std::string current_boot;  // boot id of the running boot
  bool workspace_exists = false;
  bool command_found = false;
  std::string log_tail;

  // We launched one for this environment in this boot (it may have died since).
  bool LaunchedThisBoot(const std::string& environment_id) const {
    return env == environment_id && boot == current_boot && !boot.empty();
  }
  // Our executor for this environment in this boot, alive.
  bool Running(const std::string& environment_id) const {
    return alive && LaunchedThisBoot(environment_id);
  }
};

// Parses executor.sh's output: key=value lines, then "---log---" and the log tail. Unknown keys
// and lines without '=' are ignored; missing keys keep their defaults.
ExecutorReport ParseExecutorReport(std::string_view output);

// What the executor's log says went wrong, as a condition reason (api/conditions.h:
// IPNotAuthorized, MissingScope, MissingExecutorKey, WorkspaceDirectoryMissing,
// ExecutorNotFound); "" when it says nothing we recognise.
std::string DiagnoseExecutorLog(const std::string& log_tail);
// Whether `reason` is an authentication failure (a longer crash-loop delay).
bool IsAuthReason(std::string_view reason);
// The last non-empty line of `text` (at most 300 bytes), for messages.
std::string LastLine(const std::string& text);

// One worker's executor in one sandbox.
struct ExecutorTarget {
  std::string sandbox_id;
  std::string worker;               // the AgentWorker's name: the executor dir is named after it
  std::string workspace_directory;  // spec.workspaceDirectory
  std::string command;              // spec.executor.command
};

struct ExecutorLaunch {
  std::vector<std::string> args;  // spec.executor.args
  // CODEX_API_KEY, SBX_REMOTE_URL, SBX_ENVIRONMENT_ID and spec.executor.env (values resolved).
  std::map<std::string, std::string> envs;
  bool replace = false;  // stop ours even if it runs for this environment (its spec changed)
};

// What a launch of `worker`'s spec.executor needs: its args, and CODEX_API_KEY (apiKeyFrom) and
// spec.executor.env with every valueFrom resolved; the caller adds SBX_REMOTE_URL and
// SBX_ENVIRONMENT_ID. Secrets enter the sandbox only through these envs. Errors name the field,
// never a value.
api::StatusOr<ExecutorLaunch> ResolveExecutorLaunch(CloudClients& clouds, const api::Object& worker,
                                                    const std::string& workspace_ref);

class ExecutorControl {
 public:
  // `boot_marker`: the marker file of the current boot (internal/boot_marker.h).
  explicit ExecutorControl(std::string boot_marker) : boot_marker_(std::move(boot_marker)) {}

  // The worker's directory inside the sandbox (pid, env, boot, log, CODEX_HOME).
  static std::string Dir(const std::string& worker);

  // Errors: those of ExecSync; kUnavailable when the script did not complete with exit 0.
  // `routine`: a look due only by its cadence (ExecRequest::routine: not sent, kResourceExhausted,
  // when the pacing has no spare token now).
  api::StatusOr<ExecutorReport> Probe(databricks::SandboxApi& sandboxes, const ExecutorTarget& t,
                                      std::stop_token stop, bool routine = false) const;
  api::StatusOr<ExecutorReport> Launch(databricks::SandboxApi& sandboxes, const ExecutorTarget& t,
                                       const ExecutorLaunch& launch, std::stop_token stop) const;
  // Best effort: errors are ignored (a stopped sandbox has no executor anyway).
  void Stop(databricks::SandboxApi& sandboxes, const ExecutorTarget& t, std::stop_token stop) const;
  // Stops the executor and then removes `remove` (paths under /home/sandbox-agent/.sbx/tasks/ or
  // /home/sandbox-agent/tasks/ only). Errors: those of ExecSync; kUnavailable when the script did
  // not complete with exit 0.
  api::Status StopAndRemove(databricks::SandboxApi& sandboxes, const ExecutorTarget& t,
                            const std::vector<std::string>& remove, std::stop_token stop) const;

 private:
  std::string boot_marker_;
};

}  // namespace sbx::controller
