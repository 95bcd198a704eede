#include "controller/reconcilers/task_session.h"

#include <optional>
#include <utility>
#include <vector>

namespace sbx::controller {

using api::Status;
using api::StatusOr;

TaskSession::TaskSession(SessionLifecycle& sessions, const ExecutorControl& executor,
                         EventRecorder& events,
                         reconcilers_internal::SessionDeletePolicy delete_policy)
    : sessions_(sessions), executor_(executor), events_(events), delete_policy_(delete_policy) {}

std::string TaskSession::WorkspaceDirectory(const std::string& task_uid) {
  return "/home/sandbox-agent/tasks/" + task_uid;
}

ExecutorTarget TaskSession::Executor(const TaskSessionTarget& t) {
  return ExecutorTarget{.sandbox_id = t.sandbox_id,
                        .worker = "tasks/" + t.owner.uid,
                        .workspace_directory = WorkspaceDirectory(t.owner.uid),
                        .command = t.command};
}

StatusOr<openai::Session> TaskSession::Open(const TaskSessionTarget& t, TaskSessionSpec spec,
                                            openai::AgentsApi& agents,
                                            databricks::SandboxApi& sandboxes,
                                            std::stop_token stop) {
  spec.session.workspace_directory = WorkspaceDirectory(t.owner.uid);
  ASSIGN_OR_RETURN(openai::Session session,
                   sessions_.Ensure(t.owner, agents, std::move(spec.session), stop));
  spec.launch.envs["SBX_REMOTE_URL"] = session.environment.remote_url;
  spec.launch.envs["SBX_ENVIRONMENT_ID"] = session.environment.id;
  const ExecutorTarget executor = Executor(t);
  ASSIGN_OR_RETURN(ExecutorReport report, executor_.Launch(sandboxes, executor, spec.launch, stop));
  if (report.action == "missing") {
    return api::FailedPreconditionError(
        !report.command_found
            ? "executor command " + t.command + " not found in sandbox " + t.sandbox_id
            : "the task's workspace " + executor.workspace_directory +
                  " cannot be made in sandbox " + t.sandbox_id);
  }
  if (report.action == "launched") {
    events_.Normal(t.owner.key, "ExecutorLaunched",
                   "launched " + t.command + " exec-server in sandbox " + t.sandbox_id +
                       " for the task's session " + session.id + " (environment " +
                       session.environment.id + ")");
  }
  return session;
}

StatusOr<bool> TaskSession::Close(const TaskSessionTarget& t, openai::AgentsApi& agents,
                                  databricks::SandboxApi* sandboxes, std::stop_token stop) {
  // The rows say what is still to close; none: a close that already finished (no exec, no call).
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> rows,
                   sessions_.Recorded(t.owner.workspace, t.owner.uid));
  if (rows.empty()) {
    return true;
  }
  // Inside the sandbox first, while the rows still say there is something to close.
  if (sandboxes != nullptr) {
    const ExecutorTarget executor = Executor(t);
    std::vector<std::string> remove = {ExecutorControl::Dir(executor.worker)};
    if (!t.keep_workspace) {
      remove.push_back(executor.workspace_directory);
    }
    RETURN_IF_ERROR(executor_.StopAndRemove(*sandboxes, executor, remove, stop));
  }
  std::optional<std::vector<openai::Session>> listed;
  bool settled = true;
  for (const Store::InventoryRecord& row : rows) {
    ASSIGN_OR_RETURN(
        SessionLifecycle::RowDeletion done,
        sessions_.DeleteRecorded(
            row, agents, listed, delete_policy_, stop,
            [&](const std::string& id, const reconcilers_internal::SessionDeleteResult& result) {
              if (result.cancelled) {
                events_.Normal(
                    t.owner.key, "TurnCancelled",
                    "cancelled the active turn of session " + id + " before deleting it");
              }
              if (result.deleted) {
                events_.Normal(t.owner.key, "SessionDeleted", "deleted the task's session " + id);
              }
            }));
    settled = settled && done.settled;
  }
  return settled;
}

StatusOr<bool> TaskSession::HasOpen(const TaskSessionTarget& t) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> rows,
                   sessions_.Recorded(t.owner.workspace, t.owner.uid));
  return !rows.empty();
}

}  // namespace sbx::controller
