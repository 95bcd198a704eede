// AgentTaskReconciler, from Pending to runnable (agent_task_reconciler.h): the budget, the
// pool binding, the worker a selector picks, the task's place on its worker, the wake of an
// OnDemand sandbox and the concurrency slot, in that order; then Submit
// (agent_task_reconciler.cc). Every hold is a Queued task with Submitted=False and its reason.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/conditions.h"
#include "controller/reconcilers/agent_task_reconciler.h"
#include "controller/reconcilers/internal/agent_task_target.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/pool_binding.h"
#include "controller/reconcilers/task_attempts.h"
#include "controller/reconcilers/workspace_budget.h"
#include "controller/reconcilers/workspace_of.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::AssignedWorker;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusOr;
using api::TaskPhase;
using LogKind = Store::TaskLogKind;
using reconcilers_internal::ExecutorLost;

}  // namespace

ReconcileResult AgentTaskReconciler::Wait(Target& t, std::string_view why, std::string message) {
  t.status().phase = TaskPhase::kQueued;
  reconcilers_internal::SetCondition(t.object, condition::kSubmitted, ConditionStatus::kFalse, why,
                                     std::move(message), clock_);
  reconcilers_internal::SetCondition(t.object, condition::kCompleted, ConditionStatus::kFalse, why,
                                     "", clock_);
  return ReconcileResult::RequeueAfter(options_.queue_recheck);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Queue(Target& t) {
  auto wait = [&](std::string_view why, std::string message) {
    return Wait(t, why, std::move(message));
  };
  if (t.object.metadata.annotations.count(std::string(api::kCancelRequestedAnnotation)) != 0) {
    Log(t, {TaskLogLine(LogKind::kStatus, "cancelled before submission")});
    return Finish(t, TaskPhase::kCancelled);
  }
  const Clock::WallTime now = clock_.Now();
  if (AwaitingRetry(t.object, now)) {
    const Clock::WallTime at = *ParseRfc3339(t.status().next_attempt_at);
    t.status().queue_position = 0;
    Wait(t, reason::kRetrying, RetryMessage(t.spec(), t.status()));
    return ReconcileResult::RequeueAfter(std::chrono::ceil<std::chrono::milliseconds>(at - now));
  }
  ListOptions same_ns;
  same_ns.namespace_ = t.object.metadata.namespace_;
  same_ns.kind = api::Kind::kAgentTask;
  same_ns.unfinished_only = true;  // the live tasks: what a pass costs grows with them alone
  ASSIGN_OR_RETURN(std::vector<Object> tasks, store_.List(same_ns));

  // Held by the budget first: before a pool task binds (a held task is no demand for the pool),
  // and before a task counts as waiting behind others on its worker (which are held too). A
  // workerSelector task's workspace is known once its worker is picked: checked below then.
  ASSIGN_OR_RETURN(const std::optional<std::string> workspace, WorkspaceOf(store_, t.key()));
  if (workspace) {
    ASSIGN_OR_RETURN(std::optional<ReconcileResult> held, HoldForBudget(t, *workspace, now));
    if (held) {
      return *held;
    }
  }
  if (!t.spec().pool_ref.empty()) {
    // A pool task takes its slot before it binds: one held by the limit is no demand.
    ASSIGN_OR_RETURN(std::optional<ReconcileResult> limited, HoldForConcurrency(t));
    if (limited) {
      return *limited;
    }
    ASSIGN_OR_RETURN(std::optional<ReconcileResult> waiting, BindToPool(t, tasks, now));
    if (waiting) {
      return *waiting;
    }
  }
  std::string worker_name = AssignedWorker(t.object);
  if (worker_name.empty()) {
    // workerSelector: a Ready worker with all the labels, the one with the fewest unfinished
    // tasks first (then by name).
    same_ns.kind = api::Kind::kAgentWorker;
    ASSIGN_OR_RETURN(std::vector<Object> workers, store_.List(same_ns));
    int best_load = 0;
    for (const Object& w : workers) {
      if (api::ConditionStatusOf(w.conditions(), condition::kReady) != ConditionStatus::kTrue ||
          !api::MatchesLabels(w, t.spec().worker_selector->match_labels)) {
        continue;
      }
      const int load =
          static_cast<int>(std::count_if(tasks.begin(), tasks.end(), [&](const Object& o) {
            return AssignedWorker(o) == w.metadata.name;
          }));
      if (worker_name.empty() || load < best_load) {
        worker_name = w.metadata.name;
        best_load = load;
      }
    }
    if (worker_name.empty()) {
      return wait(reason::kNoMatchingWorker, "no Ready AgentWorker matches the workerSelector");
    }
    t.status().worker = worker_name;
  }
  t.status().worker = worker_name;
  const api::ObjectKey worker_key{api::Kind::kAgentWorker, t.object.metadata.namespace_,
                                  worker_name};

  std::vector<api::ObjectKey> ahead;
  for (const Object& o : tasks) {
    if (o.metadata.uid != t.object.metadata.uid && AssignedWorker(o) == worker_name &&
        !AwaitingRetry(o, now) &&
        (CreatedBefore(o, t.object) || o.agent_task_status().phase == TaskPhase::kSubmitted ||
         o.agent_task_status().phase == TaskPhase::kRunning)) {
      ahead.push_back(api::KeyOf(o));
    }
  }
  if (dependencies_ != nullptr) {
    std::vector<api::ObjectKey> deps = ahead;
    deps.push_back(worker_key);
    dependencies_->SetDependencies(t.key(), deps);
  }
  t.status().queue_position = static_cast<int>(ahead.size());
  if (!ahead.empty()) {
    return wait(reason::kQueued,
                std::to_string(ahead.size()) + " task(s) ahead on worker " + worker_name);
  }
  Status loaded = LoadWorker(t, worker_name);
  if (loaded.code() == api::StatusCode::kNotFound) {
    return wait(reason::kWorkerNotFound, loaded.message());
  }
  RETURN_IF_ERROR(loaded);
  if (!workspace) {
    ASSIGN_OR_RETURN(std::optional<ReconcileResult> held,
                     HoldForBudget(t,
                                   WorkspaceId(t.object.metadata.namespace_,
                                               api::PlannedSandbox(t.sandbox).workspace_ref),
                                   now));
    if (held) {
      return *held;
    }
  }
  // From here the attempt needs the sandbox (to wake it, or to run on it): its compute is the
  // sandbox's RUNNING time from now to the attempt's end (sandbox_usage.h).
  if (!t.status().usage.attempt_start_running_millis) {
    t.status().usage.attempt_start_running_millis =
        api::RunningMillisAt(t.sandbox.sandbox_status().usage, now);
  }
  // Runnable? On an OnDemand sandbox (on_demand_power.h) the task wakes it and waits for the
  // executor; the hold keeps a stop from crossing the submission.
  TaskAdmission admission = AdmitTask(options_.power, t.worker, t.sandbox);
  if (admission.gate == TaskGate::kWaitForWake) {
    return wait(reason::kWaitingForWake, admission.message);
  }
  if (admission.gate != TaskGate::kSubmit) {
    // The worker has its session but lost its executor (killed, sandbox stopped): say so, as
    // for a submitted task, rather than the generic not-Ready.
    if (!t.worker.agent_worker_status().session_id.empty() && ExecutorLost(t.worker)) {
      return wait(reason::kWaitingForExecutor,
                  "the executor of worker " + worker_name + " is not connected");
    }
    return wait(reason::kWaitingForWorker, admission.message);
  }
  ASSIGN_OR_RETURN(std::optional<ReconcileResult> limited, HoldForConcurrency(t));
  if (limited) {
    return *limited;
  }
  return Submit(t);
}

StatusOr<std::optional<ReconcileResult>> AgentTaskReconciler::HoldForBudget(
    Target& t, const std::string& workspace_id, Clock::WallTime now) {
  ASSIGN_OR_RETURN(t.workspace, FindWorkspace(store_, workspace_id));
  const std::optional<Object>& workspace = t.workspace;
  if (!workspace) {
    return std::optional<ReconcileResult>();
  }
  ASSIGN_OR_RETURN(const std::optional<std::string> reached, BudgetHold(store_, *workspace, now));
  if (!reached) {
    return std::optional<ReconcileResult>();
  }
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(t.key(), {api::KeyOf(*workspace)});  // a raise wakes it
  }
  t.status().queue_position = 0;
  return std::optional(
      Wait(t, reason::kBudgetExceeded,
           "the budget of Workspace " + workspace->metadata.name + " is used up: " + *reached));
}

StatusOr<std::optional<ReconcileResult>> AgentTaskReconciler::HoldForConcurrency(Target& t) {
  if (!t.workspace || t.workspace->workspace_spec().limits.max_concurrent_tasks <= 0) {
    return std::optional<ReconcileResult>();
  }
  const Object& workspace = *t.workspace;
  const int limit = workspace.workspace_spec().limits.max_concurrent_tasks;
  const std::string workspace_id =
      WorkspaceId(workspace.metadata.namespace_, workspace.metadata.name);
  for (;;) {
    ASSIGN_OR_RETURN(const Store::SlotGrant grant,
                     store_.AcquireTaskSlot(workspace_id, t.key(), t.object.metadata.uid, limit));
    if (grant.granted) {
      return std::optional<ReconcileResult>();
    }
    // A slot whose task is gone or finished (a crash before its end gave it back) is free:
    // give it back and ask again. Otherwise wait for the holders (a finish wakes this task).
    bool freed = false;
    std::vector<api::ObjectKey> holders = {api::KeyOf(workspace)};
    for (const auto& [key, uid] : grant.holders) {
      StatusOr<Object> holder = store_.Get(key);
      if (holder.status().code() != api::StatusCode::kNotFound) {
        RETURN_IF_ERROR(holder.status());
      }
      if (!holder.ok() || holder->metadata.uid != uid ||
          api::IsFinished(holder->agent_task_status().phase)) {
        RETURN_IF_ERROR(store_.ReleaseTaskSlot(uid));
        freed = true;
      }
      holders.push_back(key);
    }
    if (freed) {
      continue;
    }
    if (dependencies_ != nullptr) {
      dependencies_->SetDependencies(t.key(), holders);
    }
    t.status().queue_position = 0;
    return std::optional(Wait(t, reason::kConcurrencyLimited,
                              std::to_string(grant.holders.size()) + " of " +
                                  std::to_string(limit) + " tasks of Workspace " +
                                  workspace.metadata.name +
                                  " are Submitted or Running (spec.limits.maxConcurrentTasks)"));
  }
}

StatusOr<std::optional<ReconcileResult>> AgentTaskReconciler::BindToPool(
    Target& t, const std::vector<Object>& tasks, Clock::WallTime now) {
  const std::string& ns = t.object.metadata.namespace_;
  const std::string& pool_name = t.spec().pool_ref;
  const std::string& uid = t.object.metadata.uid;
  const api::ObjectKey pool_key{api::Kind::kAgentPool, ns, pool_name};
  auto wait = [&](std::string_view why, std::string message) {
    return std::optional(Wait(t, why, std::move(message)));
  };
  StatusOr<Object> pool = store_.Get(pool_key);
  if (pool.status().code() == api::StatusCode::kNotFound) {
    t.status().worker.clear();
    if (dependencies_ != nullptr) {
      dependencies_->SetDependencies(t.key(), {pool_key});  // its creation wakes the task
    }
    return wait(reason::kPoolNotFound, "AgentPool " + pool_name + " does not exist");
  }
  RETURN_IF_ERROR(pool.status());
  ASSIGN_OR_RETURN(std::vector<Object> replicas, ListReplicas(store_, *pool));
  const PoolPick pick = PickReplica(t.object, replicas, tasks, now);
  t.status().worker = pick.bound;  // "": not bound, or its replica went before the input was sent
  if (!pick.bound.empty()) {
    return std::optional<ReconcileResult>();
  }
  if (dependencies_ != nullptr) {
    std::vector<api::ObjectKey> deps = {pool_key};
    for (const Object& r : replicas) {
      deps.push_back(api::KeyOf(r));
    }
    dependencies_->SetDependencies(t.key(), deps);
  }
  t.status().queue_position = pick.ahead;
  if (options_.enqueuer != nullptr) {
    // Queued work is the pool's demand. The pool alone: every queued task of the pool depends on
    // it, and waking them all from each one's pass kept them cycling through the queue.
    options_.enqueuer->EnqueueOne(pool_key);
  }
  const Object* replica = pick.Candidate();
  if (replica == nullptr) {
    return wait(reason::kWaitingForReplica,
                std::to_string(pick.ahead) + " task(s) ahead in pool " + pool_name + ", " +
                    std::to_string(pick.free.size()) + " replica(s) free");
  }
  Status claimed = Bind(store_, *replica, uid);
  if (claimed.code() == api::StatusCode::kAborted ||
      claimed.code() == api::StatusCode::kFailedPrecondition ||
      claimed.code() == api::StatusCode::kNotFound) {
    // Another task won it, or it is going: look again at once.
    return std::optional(ReconcileResult::RequeueAfter(std::chrono::milliseconds(100)));
  }
  RETURN_IF_ERROR(claimed);
  t.status().worker = replica->metadata.name;
  t.status().queue_position = 0;
  Log(t, {TaskLogLine(LogKind::kStatus,
                      "bound to replica " + replica->metadata.name + " of pool " + pool_name)});
  return std::optional<ReconcileResult>();
}

Status AgentTaskReconciler::Unbind(Target& t, const std::string& replica) {
  if (t.spec().pool_ref.empty() || replica.empty()) {
    return api::OkStatus();
  }
  RETURN_IF_ERROR(
      controller::Unbind(store_, {api::Kind::kAgentWorker, t.object.metadata.namespace_, replica},
                         t.object.metadata.uid, clock_.Now()));
  if (options_.enqueuer != nullptr) {
    // The pool may scale down now. The tasks waiting for a replica are woken by the replica's
    // own write (they depend on it), not through the pool.
    options_.enqueuer->EnqueueOne(
        {api::Kind::kAgentPool, t.object.metadata.namespace_, t.spec().pool_ref});
  }
  return api::OkStatus();
}

}  // namespace sbx::controller
