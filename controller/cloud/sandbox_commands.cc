#include "controller/cloud/sandbox_commands.h"

namespace sbx::controller {
namespace {

CommandOutcome OutcomeOf(databricks::ExecStatus status) {
  switch (status) {
    case databricks::ExecStatus::kCompleted:
      return CommandOutcome::kCompleted;
    case databricks::ExecStatus::kFailed:
      return CommandOutcome::kFailed;
    case databricks::ExecStatus::kTimedOut:
      return CommandOutcome::kTimedOut;
    default:
      return CommandOutcome::kUnknown;
  }
}

}  // namespace

api::StatusOr<CommandResult> CloudSandboxCommands::Run(const std::string& namespace_,
                                                       const std::string& workspace_ref,
                                                       const std::string& sandbox_id,
                                                       const CommandRequest& request,
                                                       std::stop_token stop) {
  if (sandbox_id.empty()) {
    return api::InvalidArgumentError("run a command: the sandbox id is empty");
  }
  if (request.cmd.empty()) {
    return api::InvalidArgumentError("run a command: cmd is empty");
  }
  ASSIGN_OR_RETURN(databricks::SandboxApi * api, clouds_.Sandboxes(namespace_, workspace_ref));
  databricks::ExecRequest exec;
  exec.cmd = request.cmd;
  exec.args = request.args;
  exec.envs = request.env;
  exec.execution_timeout = request.timeout;
  ASSIGN_OR_RETURN(databricks::ExecResult r, api->ExecSync(sandbox_id, exec, stop));
  CommandResult out;
  out.outcome = OutcomeOf(r.status);
  out.exit_code = r.exit_code;
  out.stdout_text = std::move(r.stdout_text);
  out.stderr_text = std::move(r.stderr_text);
  out.truncated = r.truncated;
  return out;
}

}  // namespace sbx::controller
