#include "controller/server/reconcile_metrics.h"

#include <chrono>
#include <string>

#include "controller/server/log.h"

namespace sbx::controller {

ReconcileMetrics::ReconcileMetrics(Metrics& metrics) : metrics_(metrics) {}

std::string_view ReconcileMetrics::ResultLabel(const ReconcileRecord& record) {
  if (record.status.ok()) {
    if (record.result && record.result->action == ReconcileResult::Action::kRequeueAfter) {
      return "requeue";
    }
    return "done";
  }
  // A missing class cannot happen from the Manager; treat it as transient, as the Manager does.
  if (record.error && !record.error->transient()) {
    return "terminal_error";
  }
  if (IsPacingDeferred(record.status)) {
    return "paced";  // a call's wait for its pacing token handed back (endpoint_pacing.h)
  }
  if (IsRetryScheduled(record.status)) {
    return "retry_scheduled";  // a call's retry wait handed back to the queue (inline_wait.h)
  }
  return "transient_error";
}

void ReconcileMetrics::OnReconciled(const ReconcileRecord& record) {
  const std::string kind(api::KindName(record.key.kind));
  const std::string_view result = ResultLabel(record);
  const double seconds = std::chrono::duration<double>(record.duration).count();

  metrics_
      .counter("sbx_reconciles_total", "Reconciles by kind and result.",
               {{"kind", kind}, {"result", std::string(result)}})
      .Inc();
  metrics_
      .histogram("sbx_reconcile_duration_seconds", "Time spent in one reconcile, by kind.",
                 DefaultDurationBuckets(), {{"kind", kind}})
      .Observe(seconds);

  const std::string name = record.key.namespace_ + "/" + record.key.name;
  const std::string duration_ms = std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(record.duration).count());
  if (record.status.ok()) {
    if (!log::Enabled(log::Level::kDebug)) {
      return;
    }
    if (record.result && record.result->action == ReconcileResult::Action::kRequeueAfter) {
      log::Debug("reconciled", {{"kind", kind},
                                {"name", name},
                                {"result", std::string(result)},
                                {"requeue_after_ms", std::to_string(record.result->after.count())},
                                {"duration_ms", duration_ms}});
    } else {
      log::Debug("reconciled", {{"kind", kind},
                                {"name", name},
                                {"result", std::string(result)},
                                {"duration_ms", duration_ms}});
    }
    return;
  }
  // A handed-back retry is routine on a flaky cloud: logged, not warned about. A handed-back
  // pacing wait is routine at the rate limit: only at debug.
  if (IsPacingDeferred(record.status) && !log::Enabled(log::Level::kDebug)) {
    return;
  }
  auto* const write = IsPacingDeferred(record.status)   ? &log::Debug
                      : IsRetryScheduled(record.status) ? &log::Info
                                                        : &log::Warn;
  // When the key comes back: a pacing place's or a retry's time, as the Manager requeued it.
  const std::string back_after_ms =
      record.status.retry_after() ? std::to_string(record.status.retry_after()->count()) : "";
  write("reconciled", {{"kind", kind},
                       {"name", name},
                       {"result", std::string(result)},
                       {"reason", record.error ? record.error->reason : "Unknown"},
                       {"error", record.status.ToString()},
                       {"retry_after_ms", back_after_ms},
                       {"requeues", std::to_string(record.num_requeues)},
                       {"duration_ms", duration_ms}});
}

}  // namespace sbx::controller
