// AgentWorkerReconciler, the executor's connection (agent_worker_reconciler.h): the environment
// read (CheckEnvironment), what it says (ReportConnection), and why there is no connection when
// the probe says so: the directory or command is missing, the executor died (its log, the
// crash-loop delay), or the session is gone.
#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "api/conditions.h"
#include "controller/base/classify_error.h"
#include "controller/base/inline_wait.h"
#include "controller/reconcilers/agent_worker_reconciler.h"
#include "controller/reconcilers/internal/agent_worker_target.h"
#include "controller/reconcilers/internal/object_updates.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusCode;
using api::StatusOr;
using reconcilers_internal::PacedOut;
using std::chrono::milliseconds;

std::string CamelCase(std::string_view snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out.empty() ? std::string(reason::kUnknown) : out;
}

}  // namespace

// GET the environment. Not found counts as expired. Any other error is not evidence either way:
// the connection is unknown until the status can be read again (Ready keeps its last value; see
// RecordOutcome). A routine look that was skipped or throttled is no answer; one that failed
// otherwise (a 503) is made again at once as a needed look, whose retries and failures count as
// any look's (a single 503 on a one-attempt look must not flip ExecutorConnected: measured, the
// 200-object chaos run's injected 503s on environments.get kept 10–18 of 100 workers flapping).
StatusOr<openai::Environment> AgentWorkerReconciler::CheckEnvironment(Target& t, bool routine) {
  StatusOr<openai::Environment> got =
      t.agents->GetEnvironment(t.status().environment_id, t.stop, routine);
  if (routine && !got.ok() && !PacedOut(got.status()) &&
      got.status().code() != StatusCode::kNotFound &&
      got.status().code() != StatusCode::kCancelled) {
    got = t.agents->GetEnvironment(t.status().environment_id, t.stop, /*routine=*/false);
  }
  if (IsRetryScheduled(got.status()) || (routine && PacedOut(got.status()))) {
    return got.status();  // no answer yet: ExecutorConnected stays as last seen
  }
  if (!got.ok() && got.status().code() != StatusCode::kNotFound) {
    Set(t, condition::kExecutorConnected, ConditionStatus::kUnknown,
        ClassifyError(got.status()).reason,
        "the environment status cannot be read: " + ConditionMessage(got.status()));
    return got.status();
  }
  t.cache.last_check = clock_.Steady();
  openai::Environment env;
  if (got.ok()) {
    env = *std::move(got);
  } else {
    env.id = t.status().environment_id;
    env.status = openai::EnvironmentStatus::kExpired;
    env.status_raw = "not found";
  }
  t.status().environment_status = env.status_raw;
  return env;
}

StatusOr<ReconcileResult> AgentWorkerReconciler::SessionLost(Target& t,
                                                             const openai::Environment& env) {
  const std::string lost = t.status().session_id;
  RETURN_IF_ERROR(ReplaceSession(t, reason::kSessionLost, "environment " + env.status_raw));
  events_.Warning(t.key(), "SessionLost",
                  "environment " + env.id + " is " + env.status_raw + "; session " + lost +
                      " deleted, creating a new one");
  Set(t, condition::kReady, ConditionStatus::kFalse, reason::kSessionLost,
      "environment " + env.status_raw);
  return ReconcileResult::Continue();
}

// Running (a probe vouched for it, or the connection does): Ready follows the connection.
ReconcileResult AgentWorkerReconciler::ReportConnection(Target& t, const openai::Environment& env,
                                                        bool connected) {
  Set(t, condition::kExecutorRunning, ConditionStatus::kTrue, reason::kRunning, "");
  if (connected) {
    if (api::ConditionStatusOf(t.status().conditions, condition::kExecutorConnected) !=
        ConditionStatus::kTrue) {
      Milestone(options_.milestone, t.key(), "connected_seen");
    }
    t.status().connected_environment_id = t.status().environment_id;  // bring-up over
    Set(t, condition::kExecutorConnected, ConditionStatus::kTrue, reason::kConnected, "");
    Set(t, condition::kReady, ConditionStatus::kTrue, reason::kReady, "executor connected");
    return ReconcileResult::RequeueAfter(schedule_.NextLook(true));
  }
  // Running but not connected: the probe has vouched for the process; it is looked at again
  // soon only if the environment reports a disconnect (ExecutorConnected=False, Disconnected).
  const std::string message = "environment " + env.id + " is " + env.status_raw;
  Set(t, condition::kExecutorConnected, ConditionStatus::kFalse, CamelCase(env.status_raw),
      message);
  Set(t, condition::kReady, ConditionStatus::kFalse, reason::kExecutorNotConnected, message);
  return ReconcileResult::RequeueAfter(schedule_.NextLook(false));
}

// The workspace dir or the command is missing: nothing can be launched until the user fixes it.
ReconcileResult AgentWorkerReconciler::ReportMissing(Target& t, const ExecutorReport& report,
                                                     bool workspace_needed) {
  std::string why, message;
  if (workspace_needed && !report.workspace_exists) {
    why = reason::kWorkspaceDirectoryMissing;
    message = "workspace directory " + t.spec().workspace_directory +
              " does not exist in sandbox " + t.sandbox_id() +
              " or is not writable (sbx creates it only under /home/sandbox-agent; elsewhere "
              "create it in the Sandbox's setup)";
  } else {
    why = reason::kExecutorNotFound;
    message = "command \"" + t.spec().executor.command + "\" not found on PATH in sandbox " +
              t.sandbox_id() + " (install @openai/codex under /home/sandbox-agent)";
  }
  t.status().executor.pid = 0;
  Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, why, message);
  Set(t, condition::kExecutorConnected, ConditionStatus::kFalse, reason::kExecutorNotRunning, "");
  Set(t, condition::kReady, ConditionStatus::kFalse, why, message);
  return ReconcileResult::RequeueAfter(std::chrono::seconds(30));
}

// The probe found no executor of ours alive. One we launched in this boot exited: its log says
// why, and the next launch waits for the crash-loop delay (status.executor.nextLaunchAfter, set
// once per launch) instead of looping hot.
StatusOr<ReconcileResult> AgentWorkerReconciler::HandleDeadExecutor(Target& t,
                                                                    const ExecutorReport& report) {
  api::ExecutorStatus& executor = t.status().executor;
  // Seen running after its launch: it ran, then died (killed, crashed later) — not an exit on
  // start, so no crash-loop delay unless its log names an auth failure.
  const bool ran = t.facts.phase == ExecutorPhase::kRunning;
  executor.pid = 0;
  Set(t, condition::kExecutorConnected, ConditionStatus::kFalse, reason::kExecutorNotRunning, "");
  if (!report.workspace_exists || !report.command_found) {
    return ReportMissing(t, report);
  }
  const bool ours = report.LaunchedThisBoot(t.status().environment_id);
  const Clock::WallTime now = clock_.Now();
  if (!ours && executor.last_exit_reason == reason::kIpNotAuthorized &&
      !executor.next_launch_after.empty() && !report.boot.empty() &&
      report.boot != report.current_boot) {
    // The seed's troubleshooting row: after "401 … IP is not authorized", re-check after a
    // restart — the egress IP can change across stop and start. The sandbox booted since that
    // exit, so the delay meant for the old address does not hold this launch back.
    executor.next_launch_after.clear();
    events_.Normal(t.key(), "RecheckAfterRestart",
                   "sandbox " + t.sandbox_id() +
                       " restarted since the executor was refused with IPNotAuthorized; its "
                       "egress address may have changed, launching again");
  }
  if (ours && executor.next_launch_after.empty()) {
    std::string exit_reason = DiagnoseExecutorLog(report.log_tail);
    if (exit_reason.empty()) {
      exit_reason = ran ? reason::kExecutorExited : reason::kExecutorExitedOnStart;
    }
    std::string message = LastLine(report.log_tail);
    if (exit_reason == reason::kIpNotAuthorized) {
      // What sbx can know: the Databricks API reports no egress address (reference §2: the
      // Sandbox object has none), only that this boot's address was refused.
      message += " (boot " + report.current_boot + " of sandbox " + t.sandbox_id() +
                 ": its egress address is not on the OpenAI organisation's IP allowlist; the "
                 "Databricks API does not report the address, which can change across stop and "
                 "start: sbx launches again after the sandbox's next start, or after the auth "
                 "backoff)";
    }
    executor.last_exit_reason = exit_reason;
    ++executor_exits_total_;
    executor.next_launch_after =
        FormatRfc3339(now + schedule_.CrashLoopDelay(exit_reason, ran, executor.restarts));
    events_.Warning(t.key(), exit_reason, "executor exited: " + message);
    Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, exit_reason, message);
    Set(t, condition::kReady, ConditionStatus::kFalse, exit_reason, message);
  } else if (ran) {
    Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, reason::kExecutorNotRunning, "");
  }
  if (ours && t.spec().restart_policy == api::RestartPolicy::kNever) {
    return ReconcileResult::Done();
  }
  if (const milliseconds wait = ExecutorSchedule::UntilLaunchAllowed(executor, now);
      wait > milliseconds(0)) {
    return ReconcileResult::RequeueAfter(wait);
  }
  return Launch(t, /*relaunch=*/ours || !executor.launched_at.empty());
}

}  // namespace sbx::controller
