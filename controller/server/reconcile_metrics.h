// ReconcileMetrics: the Manager's ReconcileObserver for /metrics and the log.
//
// Per reconcile it counts sbx_reconciles_total{kind,result} (result = done | requeue |
// transient_error | terminal_error | retry_scheduled), observes
// sbx_reconcile_duration_seconds{kind} (the duration measured on the Manager's Clock), and logs a
// "reconciled" line: debug for successes, warn for errors, with the ClassifyError reason and the
// error message.
//
// Thread-safety: OnReconciled is called concurrently from worker threads; it only touches the
// thread-safe Metrics and the logger. Ownership: `metrics` must outlive this observer.
#pragma once

#include <string_view>

#include "controller/engine/manager.h"
#include "controller/server/metrics.h"

namespace sbx::controller {

class ReconcileMetrics final : public ReconcileObserver {
 public:
  explicit ReconcileMetrics(Metrics& metrics);

  void OnReconciled(const ReconcileRecord& record) override;

  // The `result` label for a record.
  static std::string_view ResultLabel(const ReconcileRecord& record);

 private:
  Metrics& metrics_;
};

}  // namespace sbx::controller
