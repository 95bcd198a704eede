// AgentTaskReconciler: runs an AgentTask as one root turn of its AgentWorker's session
// (DESIGN §7.1), the third user of the reconcile skeleton.
//
// Contract, by phase:
//   Pending/Queued → pick the worker (workerRef; workerSelector: a Ready worker with all the
//     labels, least busy first; poolRef: an idle Ready replica of the pool, bound to the task
//     alone in a store transaction, the pool's tasks first come first served — queuePosition
//     counts the pool's unbound tasks ahead, reason WaitingForReplica, PoolNotFound) and record
//     it in status.worker; the worker's unfinished tasks
//     run one at a time in creation order: a task with others ahead is Queued with
//     queuePosition = how many are ahead (Submitted=False, reason Queued); a worker that is not
//     Ready or has no session keeps it Queued (reason WaitingForWorker; WaitingForExecutor when
//     the worker has its session but its executor is gone); a worker whose OnDemand sandbox
//     sleeps keeps it Queued (WaitingForWake) and wakes it (on_demand_power.h). A cancel
//     request (annotation sbx.dev/cancel-requested) before submission ends it Cancelled, no turn.
//   Budget (DESIGN §8.2, workspace_budget.h) → before a pool task binds a replica, and before
//     any other task is submitted: while its Workspace's spec.budget is reached for the period
//     (the usage ledger, read then), the task stays Queued with reason BudgetExceeded, is no
//     demand for its pool, and depends on the Workspace, so raising the budget starts it at
//     once; the period rolling over starts it at the next look (queue_recheck).
//   Submit (exactly once) → status phase=Submitted, submittedAt, idempotencyKey = uid, sessionId
//     and previousTurnId (the session's newest root turn before ours: from its event stream when
//     the stream saw that turn created and ended, else one GET) are WRITTEN to the store
//     first, then the input is POSTed with Idempotency-Key = uid. A crash between the two, or a
//     POST whose answer was lost, re-POSTs with the same key later; the service dedupes it.
//   Submitted/Running → the task's turn is the oldest root turn newer than previousTurnId (the
//     worker runs no other root turn meanwhile); its status is read with GetTurn (reference
//     §2.6, the recovery procedure, used on every pass: nothing in memory is needed after a
//     restart). Only the ROOT turn's terminal status ends the task: completed → Succeeded,
//     failed → Failed with the service's error code and message, cancelled → Cancelled or
//     TimedOut. Subagent turns and an idle session change nothing.
//   Timeout (from submittedAt) or a cancel request → agent.session.input.cancel once
//     (cancelRequestedAt, cancelReason), then wait for turn.cancelled.
//   The executor gone (the worker's ExecutorConnected=False) while submitted → Completed=False
//     reason WaitingForExecutor; the service holds the turn for its connection wait and ends it
//     failed with its error code if the executor does not come back.
//   While running, the session's event stream (SessionEventStreams, one per worker session,
//     opened before the input is POSTed) logs the turn live and enqueues the task on its turn's
//     creation and on the root turn's terminal event; a pass then makes no API call. The turn is
//     read here (GetTurn, saved items) only when the stream cannot have seen everything: no
//     stream, a stream not open (a slow fallback poll), or the task just bound to a stream after
//     a restart (reference §2.6). Without streams (sbxd --once, unit tests) every pass polls.
//   The input POST runs in the background (InputSubmitter): while no executor is connected the
//     service holds it up to 5 minutes. Meanwhile the task is Submitted with Completed=False
//     reason WaitingForExecutor when its worker's executor is not connected; it continues when
//     the service accepts the input, and fails with the service's error code (e.g. a connection
//     wait that ran out) when it refuses it.
//   A submitted task with no turn and no POST in flight re-POSTs its input with the same
//     Idempotency-Key after the engine's Backoff (10 s doubling to 5 min; the service dedupes
//     the key).
//   Terminal → the rest of the turn's items go to the task log (assistant text, command lines,
//     their output and exit codes), result.message = the last assistant message, usage, commands;
//     then every collect path is read with exec-sync (collect_file.sh: at most maxBytes, base64)
//     and stored with its sha256 (at most 16 MiB per task); completedAt; Completed=True reason =
//     the phase.
//   An attempt ends (every finished phase above, once submitted) → status.attempts[] gets its
//     entry; if task_attempts.h ShouldRetry (its failure kind in spec.retryOn, attempts so far
//     ≤ backoffLimit) the task starts afresh but for attempts: Queued, Submitted=False reason
//     Retrying, nextAttemptAt (10 s doubling, ≥ a Retry-After), no collect; a pool replica is
//     given back once that is stored. Attempt n ≥ 2 submits with Idempotency-Key <uid>-<n>. A
//     worker or sandbox deleted mid-turn ends the attempt Failed (WorkerLost). The attempt's
//     token usage goes to status.usage (with its cost at the Workspace's spec.pricing) and, first,
//     to the store's usage ledger, keyed by (uid, attempt): a pass retried after a crash or a
//     conflict never counts it twice, and deleting the task does not take it back.
//   Finished → a pool task gives its replica back once its final status is stored; with
//     ttlAfterFinished, the task is deleted that long after completedAt.
//   Deleted while submitted/running → cancel, wait for the turn to end, then let it go.
// Dependencies: a task depends on its worker and on the tasks ahead of it, so a worker's status
// change or the end of the task ahead reconciles it at once.
//
// Thread-safety: Reconcile may run on several workers at once for different keys.
// Collaborators must outlive the reconciler; `dependencies` may be null.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "api/resources.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/manager.h"
#include "controller/reconcilers/input_submitter.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/session_event_streams.h"
#include "controller/reconcilers/task_log_writer.h"
#include "controller/reconcilers/task_session.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct AgentTaskReconcilerOptions {
  // How often a submitted or running task looks at its turn when there are no event streams.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
  // With event streams: how often a task polls while its session's stream is not open, and how
  // often it checks (no API call) that the stream still is.
  std::chrono::milliseconds stream_fallback_poll{std::chrono::seconds(5)};
  std::chrono::milliseconds stream_check{std::chrono::seconds(30)};
  // A queued task looks again at least this often (dependencies usually wake it sooner).
  std::chrono::milliseconds queue_recheck{std::chrono::seconds(5)};
  // A submitted task whose turn has not appeared re-POSTs its input with the same
  // Idempotency-Key (the first POST may never have arrived) after Delay(n) of this policy since
  // the n-th POST.
  BackoffPolicy resubmit{std::chrono::seconds(10), std::chrono::minutes(5), 0.1};
  // Power OnDemand: wakes the worker's sleeping sandbox and keeps a stop from crossing a
  // submission (on_demand_power.h); shared with the Sandbox reconciler. May be null.
  OnDemandPower* power = nullptr;
  // Wakes a task when its input POST, made in the background (input_submitter.h), ends. Null:
  // the POST is made inside the reconcile (sbxd --once, unit tests).
  Enqueuer* enqueuer = nullptr;
  // Applied to every collected file before its sha256 is taken and it is stored: sbxd scrubs
  // artifacts of the known secret values as it scrubs logs (log::Scrub), so status.artifacts
  // describes the bytes stored. Null: stored as read. It cannot catch an encoded secret.
  std::function<std::string(std::string_view)> scrub_artifact;
  // The boot marker the executor scripts use (as AgentWorkerReconcilerOptions::boot_marker): a
  // PerTask worker's tasks launch their own executors.
  std::string boot_marker = reconcilers_internal::kDefaultBootMarker;
  // How soon a PerTask session the service refused to delete is tried again.
  std::chrono::milliseconds session_close_retry{std::chrono::seconds(2)};
};

class AgentTaskReconciler final : public Reconciler {
 public:
  // `streams` (may be null: every pass polls) must outlive the reconciler; its log writer is
  // the one the reconciler writes through.
  AgentTaskReconciler(Store& store, CloudClients& clouds, Clock& clock,
                      DependencyIndex* dependencies, AgentTaskReconcilerOptions options = {},
                      SessionEventStreams* streams = nullptr);

  api::Kind kind() const override { return api::Kind::kAgentTask; }
  // Errors: the store's and the clouds' (retried by the Manager through ClassifyError).
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

 private:
  struct Target;
  api::StatusOr<ReconcileResult> Converge(Target& t);
  api::StatusOr<ReconcileResult> Queue(Target& t);
  // Queued, Submitted=False and Completed=False with `why`; looks again after queue_recheck.
  ReconcileResult Wait(Target& t, std::string_view why, std::string message);
  // poolRef: binds the task to an idle Ready replica of its pool (pool_binding.h), first come
  // first served, or says why it waits (nullopt once bound: status.worker is the replica).
  // `tasks`: the namespace's unfinished tasks, as of `now` (the pass's one clock reading).
  api::StatusOr<std::optional<ReconcileResult>> BindToPool(Target& t,
                                                           const std::vector<api::Object>& tasks,
                                                           Clock::WallTime now);
  // Queued with reason BudgetExceeded while the Workspace `workspace_id`'s budget is reached
  // (nullopt: it may go on).
  api::StatusOr<std::optional<ReconcileResult>> HoldForBudget(Target& t,
                                                              const std::string& workspace_id,
                                                              Clock::WallTime now);
  // Queued with reason ConcurrencyLimited while its Workspace (t.workspace, found by
  // HoldForBudget) has spec.limits.maxConcurrentTasks tasks holding slots (Store::
  // AcquireTaskSlot); else the task holds a slot (nullopt: it may go on). Slots of holders that
  // are gone or finished are given back first. The slot is given back after the status that
  // ends or retries the attempt is stored, and when the task is deleted.
  api::StatusOr<std::optional<ReconcileResult>> HoldForConcurrency(Target& t);
  // The RUNNING time of its sandbox since the ending attempt began to need it (0 when it never
  // did, or its sandbox is not loaded).
  int64_t AttemptComputeMillis(Target& t);
  // The attempt that just ended, which `used` that many tokens, into the usage ledger (once),
  // and status.usage.cost at its Workspace's pricing; wakes the Workspace.
  api::Status RecordAttemptUsage(Target& t, int attempt, api::TaskPhase phase,
                                 const api::TaskUsageTotals& used, bool task_finished);
  // A pool task that is done with `replica` gives it back (after its status is stored).
  api::Status Unbind(Target& t, const std::string& replica);
  api::StatusOr<ReconcileResult> Submit(Target& t);
  api::StatusOr<ReconcileResult> Follow(Target& t);
  // Follow's turn part, once the worker is loaded and a PerTask session is known open.
  api::StatusOr<ReconcileResult> FollowTurn(Target& t);
  // The turn ended (openai::IsTerminal): Finish with the phase its status means.
  api::StatusOr<ReconcileResult> FinishTurn(Target& t, const openai::Turn& turn);
  // `usage`: the terminal turn's, when known (else the turn is read for it).
  api::StatusOr<ReconcileResult> Finish(Target& t, api::TaskPhase phase,
                                        std::optional<openai::Usage> usage = std::nullopt);
  api::StatusOr<ReconcileResult> FailRefused(Target& t, const api::Status& refused);
  // The attempt just recorded in status.attempts failed and spec allows another
  // (task_attempts.h): Queued, reason Retrying, until status.nextAttemptAt.
  api::StatusOr<ReconcileResult> Retry(Target& t);
  // submitter_.Take, remembering a transient failure (and its Retry-After) for the attempt.
  InputSubmitter::Outcome TakePost(const std::string& uid);
  // The attempt's last transient input POST failure ("" if none, or none since a success).
  std::string LastPostFailure(const std::string& uid);
  api::StatusOr<ReconcileResult> Expire(Target& t);
  api::StatusOr<std::optional<ReconcileResult>> Finalize(Target& t);
  // Loads the worker, its sandbox and the Agents API into `t`.
  api::Status LoadWorker(Target& t, const std::string& name);
  // Appends the turn's saved items not yet in the task log; `final` takes unfinished ones too.
  void SyncLog(Target& t, bool final);
  void Collect(Target& t);
  void Log(Target& t, const std::vector<Store::TaskLogEntry>& entries);
  void SetWaitingCondition(Target& t);
  // Starts the input POST (InputSubmitter), with the task's uid as Idempotency-Key.
  void PostInput(Target& t);
  // When a submitted task without a turn may POST its input again.
  Clock::WallTime NextResubmit(const Target& t);
  // The task is done with its turn: unbind its stream, forget its log book and resubmits.
  void Release(Target& t);
  // session: PerTask (task_session.h). Whether the task's worker (loaded) is PerTask; the task's
  // own session for the worker's sandbox; opening it (session and executor); closing whatever
  // is open (true once nothing is: none was, or all is closed).
  static bool PerTask(const Target& t);
  TaskSessionTarget SessionTarget(const Target& t) const;
  api::StatusOr<openai::Session> OpenTaskSession(Target& t);
  api::StatusOr<bool> CloseTaskSession(Target& t);

  Store& store_;
  CloudClients& clouds_;
  Clock& clock_;
  DependencyIndex* dependencies_;
  const AgentTaskReconcilerOptions options_;
  SessionEventStreams* const streams_;
  TaskLogWriter own_log_;
  TaskLogWriter& log_;
  const Backoff resubmit_backoff_;
  InputSubmitter submitter_;
  EventRecorder events_;
  SessionLifecycle sessions_;
  ExecutorControl executor_;
  TaskSession task_sessions_;
  struct Resubmits {
    int posts = 1;  // the first POST is Submit's
    Clock::WallTime last{};
    std::string last_failure;                  // TakePost
    std::chrono::milliseconds retry_after{0};  // of the last transient failure
    static Resubmits First(Clock::WallTime at) {
      Resubmits r;
      r.last = at;
      return r;
    }
  };
  std::mutex mu_;
  std::map<std::string, Resubmits> resubmits_;  // by task uid. Guarded by mu_.
};

}  // namespace sbx::controller
