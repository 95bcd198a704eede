// ReconcileResult: what a successful reconcile asks of the worker loop (DESIGN §3 Reconcilers).
//
// kDone: the object matches its spec; nothing to do until it (or a dependency) changes or the
// periodic resync comes round. kRequeueAfter: look again after `after` (e.g. a sandbox that is
// still PENDING, or the 30 s executor-status probe cadence). Errors are not results: a reconciler
// returns a non-OK Status and ClassifyError decides whether it is retried. A plain value type.
#pragma once

#include <chrono>

namespace sbx::controller {

struct ReconcileResult {
  enum class Action { kDone, kRequeueAfter };

  Action action = Action::kDone;
  // With kRequeueAfter: delay before the next reconcile of this key. A delay <= 0 asks for a
  // rate-limited requeue (per-key backoff), so a reconciler cannot hot-loop by mistake.
  std::chrono::milliseconds after{0};

  static ReconcileResult Done() { return {}; }
  static ReconcileResult RequeueAfter(std::chrono::milliseconds d) {
    return {Action::kRequeueAfter, d};
  }

  friend bool operator==(const ReconcileResult&, const ReconcileResult&) = default;
};

}  // namespace sbx::controller
