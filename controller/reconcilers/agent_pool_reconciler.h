// AgentPoolReconciler: AgentWorkers made from a template, as many as the pool's queue of tasks
// needs (DESIGN §8.1), the sixth user of the reconcile skeleton.
//
// Contract, each pass:
//   Replicas are AgentWorkers named <pool>-<5 chars>, labelled sbx.dev/pool=<pool>, annotated
//     with the templateHash they were made from, controlled by the pool (an owner reference;
//     sbx.dev/created-by-uid from the create on). Each owns its inline Sandbox, as any worker
//     with an inline sandbox does.
//   Demand → busy replicas (a live binding, pool_binding.h) + the pool's queued tasks (not bound
//     yet; none while the Workspace's budget is used up, at most its maxConcurrentTasks less the
//     busy ones) + spec.warm, at least spec.replicas.min, at most spec.replicas.max. Replicas that
//     are starting count as supply: the missing ones are created at once, all in this pass.
//   Scale down → an idle replica (Ready, no task) above the demand that has been idle for
//     spec.scaleDownAfter (since its creation or its last task's completion) is claimed
//     (binding "retiring", so no task can take it meanwhile) and deleted. Never a busy one.
//   Rollout → a replica made from an older template is retired as soon as it holds no task:
//     idle ones at once, busy ones after their task; the demand makes their successors.
//     Progressing=True (RollingOut, then RolloutComplete); False, RolloutStuck, while a replica
//     of the current template has not become Ready within spec.progressDeadline.
//   Stale bindings (a finished or deleted task's uid) are cleared.
//   Status → replicas, ready, busy, idle (Ready, awake, free), sleeping (Ready, its OnDemand
//     sandbox asleep, free), queued, updatedReplicas, templateHash; Ready (True when a replica
//     is Ready, or none is needed: ScaledToZero), ScalingLimited (True, AtMaxReplicas, while
//     queued tasks wait and max is reached).
//   Deleted → every replica is deleted (their own finalizers clean their sandboxes and
//     sessions); the pool's finalizer goes once none is left.
// Dependencies: the pool depends on its replicas (a replica's status change reconciles it);
// pool tasks enqueue their pool when they queue, bind and finish.
//
// Thread-safety: Reconcile may run on several workers at once for different keys.
// Collaborators must outlive the reconciler; `dependencies` may be null.
#pragma once

#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "api/resources.h"
#include "controller/base/clock.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct AgentPoolReconcilerOptions {
  // The longest a pool goes without looking (scale-down timers and progress deadlines are due
  // sooner when they are).
  std::chrono::milliseconds recheck{std::chrono::seconds(30)};
  // The 5-character suffix of a new replica's name; default: random [a-z0-9]. Tests inject it.
  std::function<std::string()> suffix;
};

class AgentPoolReconciler final : public Reconciler {
 public:
  AgentPoolReconciler(Store& store, Clock& clock, DependencyIndex* dependencies,
                      AgentPoolReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kAgentPool; }
  // Errors: the store's (retried by the Manager through ClassifyError).
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

  // The fingerprint of what a replica is made from: the template (labels and spec) and the
  // session mode. Replicas carry it; status.templateHash is the current one.
  static std::string TemplateHash(const api::Object& pool);

 private:
  struct Target;
  struct Pass;  // what one pass sees and decides
  api::StatusOr<ReconcileResult> Converge(Target& t);
  // Lists the replicas and the namespace's tasks; clears stale bindings, finishes claimed
  // deletions, counts the queue.
  api::Status Observe(Target& t, Pass& p);
  // What the pool's Workspace holds back (DESIGN §8.2): whether its budget is used up at `now`
  // (its queued tasks are then no demand), and its limits.maxConcurrentTasks (0: none; at most
  // that many of its tasks hold slots, so no more are demand); tracks the Workspace as a
  // dependency when it has either.
  struct WorkspaceHolds {
    bool budget_reached = false;
    int max_concurrent_tasks = 0;
  };
  api::StatusOr<WorkspaceHolds> HeldByWorkspace(Target& t, Clock::WallTime now);
  // Retires free replicas of older templates, creates the missing ones, retires free ones idle
  // for scaleDownAfter above the demand.
  api::Status Scale(Target& t, Pass& p);
  // Status counts and conditions.
  void Report(Target& t, Pass& p);
  api::StatusOr<std::optional<ReconcileResult>> Finalize(Target& t);
  // Creates one replica from the template.
  api::Status CreateReplica(Target& t, const std::string& hash);
  // Claims `replica` (binding kRetiring) and deletes it; false if a task won the claim.
  api::StatusOr<bool> Retire(Target& t, const api::Object& replica, const std::string& why);

  Store& store_;
  Clock& clock_;
  DependencyIndex* dependencies_;
  EventRecorder events_;
  AgentPoolReconcilerOptions options_;
};

}  // namespace sbx::controller
