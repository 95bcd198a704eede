// TaskSession: the session a task of a PerTask worker runs in (DESIGN §8.1, issue #27 item 4),
// from its open to its close, for the AgentTask reconciler:
//   * Open: the task's own session (SessionLifecycle, owner = the task: an intent before the
//     create, so a crash between the create and its record adopts the session rather than making
//     a second) with workspace_directory /home/sandbox-agent/tasks/<task uid>, and `codex
//     exec-server` launched for its environment in the worker's sandbox (executor.sh: idempotent,
//     its directory /home/sandbox-agent/.sbx/tasks/<task uid>; secrets only in the exec envs).
//     The input may be sent at once: the service holds it until the executor connects.
//   * Close: stops that executor and removes its directory and, unless the task keeps it, the
//     task's workspace (stop_executor.sh), then cancels any active turn and deletes the session,
//     and forgets it (its inventory row, or an intent's sessions found by the task's uid). The
//     rows are the record of what is still to close: they go last, so a close cut short by a
//     crash is made again by the next pass, and each step may run twice.
// Thread-safety: stateless apart from its collaborators; safe for concurrent use on different
// tasks as they are. Collaborators must outlive it.
#pragma once

#include <stop_token>
#include <string>

#include "api/status.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/event_recorder.h"
#include "controller/reconcilers/executor_control.h"
#include "controller/reconcilers/internal/session_deletion.h"
#include "controller/reconcilers/session_lifecycle.h"

namespace sbx::controller {

// One task on one PerTask worker.
struct TaskSessionTarget {
  SessionOwner owner;           // the task: key, uid, and the inventory workspace of its worker's
  std::string sandbox_id;       // the worker's sandbox, as sbx created it
  std::string command;          // the worker's spec.executor.command
  bool keep_workspace = false;  // the task's spec.keepWorkspace
};

// What Open needs besides the target: the session's agent settings (model, instructions; the
// workspace directory is the task's) and the executor's launch (args; CODEX_API_KEY and
// spec.executor.env resolved; Open adds SBX_REMOTE_URL and SBX_ENVIRONMENT_ID).
struct TaskSessionSpec {
  openai::CreateSessionRequest session;
  ExecutorLaunch launch;
};

class TaskSession {
 public:
  TaskSession(SessionLifecycle& sessions, const ExecutorControl& executor, EventRecorder& events,
              reconcilers_internal::SessionDeletePolicy delete_policy);

  // /home/sandbox-agent/tasks/<uid>: the task's workspace, its session's workspace_directory.
  static std::string WorkspaceDirectory(const std::string& task_uid);
  // The executor of the task: its directory is ExecutorControl::Dir("tasks/<uid>").
  static ExecutorTarget Executor(const TaskSessionTarget& t);

  // The task's session, its executor launched (Normal events SessionCreated or SessionAdopted,
  // and ExecutorLaunched). kFailedPrecondition when the sandbox has no such command or the
  // workspace cannot be made (the launch report's "missing"); else the errors of the Store, the
  // AgentsApi and ExecSync.
  api::StatusOr<openai::Session> Open(const TaskSessionTarget& t, TaskSessionSpec spec,
                                      openai::AgentsApi& agents, databricks::SandboxApi& sandboxes,
                                      std::stop_token stop);

  // Closes what Open made. `sandboxes` null: the sandbox is gone or not running (nothing inside
  // it is left to stop or remove). Returns false while a session the service refuses to delete
  // is still being retried (call again later), true once everything is closed. Costs nothing
  // (no exec, no API call) when the rows say all is closed already.
  api::StatusOr<bool> Close(const TaskSessionTarget& t, openai::AgentsApi& agents,
                            databricks::SandboxApi* sandboxes, std::stop_token stop);

  // Whether the task still has something to close (a recorded session or intent).
  api::StatusOr<bool> HasOpen(const TaskSessionTarget& t);

 private:
  SessionLifecycle& sessions_;
  const ExecutorControl& executor_;
  EventRecorder& events_;
  reconcilers_internal::SessionDeletePolicy delete_policy_;
};

}  // namespace sbx::controller
