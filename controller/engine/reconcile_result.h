// ReconcileResult: what a successful reconcile asks of the worker loop (DESIGN §3 Reconcilers).
//
// kDone: the object matches its spec; nothing to do until it (or a dependency) changes or the
// periodic resync comes round. kRequeueAfter: look again after `after` (e.g. a sandbox that is
// still PENDING, or the 30 s executor-status probe cadence; Continue(): the rest at once). Errors
// are not results: a reconciler returns a non-OK Status and ClassifyError decides whether it is
// retried. A plain value type.
#pragma once

#include <chrono>

namespace sbx::controller {

struct ReconcileResult {
  enum class Action { kDone, kRequeueAfter };

  Action action = Action::kDone;
  // With kRequeueAfter: delay before the next reconcile of this key. A delay <= 0 asks for a
  // rate-limited requeue (per-key backoff), so a reconciler cannot hot-loop by mistake.
  std::chrono::milliseconds after{0};
  // With kRequeueAfter and after 0 (Continue()): the pass ended early on purpose and its rest
  // follows at once, with no backoff (WorkQueue::AddContinue; the key's failure count is left
  // as it is, and only a run of continues in a row backs off).
  bool at_once = false;

  static ReconcileResult Done() { return {}; }
  static ReconcileResult RequeueAfter(std::chrono::milliseconds d) {
    return {Action::kRequeueAfter, d};
  }
  // The rest of the work in a new pass, now: a split pass (the AgentWorker stores its new
  // session, then launches into it on the next pass, whose first paced call the launch is), or
  // a look again after an answer that showed our view was stale. Measured (issue #30): as a
  // rate-limited requeue, a worker whose session create had met two 503s waited 4 s of backoff
  // (1 s × 2²) before its launch, though nothing had failed since.
  static ReconcileResult Continue() {
    return {Action::kRequeueAfter, std::chrono::milliseconds(0), true};
  }

  friend bool operator==(const ReconcileResult&, const ReconcileResult&) = default;
};

}  // namespace sbx::controller
