// The metric families of sbxd's parts, one collector per owner (issue #26): each reads its
// owner's counters when /metrics is rendered (Metrics::AddCollector). ReconcileMetrics
// (server/) is the Manager's observer for the per-reconcile families. They live here, not in
// each owner's folder, because engine/ and reconcilers/ do not depend on server/'s registry.
//
// Counts kept by their owners are exported as counters (…_total, RaiseTo); what is true now as
// gauges. A labelled gauge whose label may disappear (a state, a workspace) is reset first, so
// a value nobody has any more reads 0 instead of its last value.
//
// Thread-safety: collectors run on the metrics server's threads; every owner's accessor used
// here is thread-safe.
#pragma once

#include "controller/engine/manager.h"
#include "controller/server/metrics.h"
#include "controller/store/store.h"

namespace sbx::controller {
class AgentWorkerReconciler;
class GarbageCollector;
class GitSourceReconciler;
class HttpCloudClients;
class SandboxCache;
class SandboxSweeper;
class SessionEventStreams;
class WebhookReceiver;
class WorkspaceLeases;
}  // namespace sbx::controller

namespace sbx::controller::notify {
class NotificationDeliverer;
}  // namespace sbx::controller::notify

namespace sbx::controller::daemon {

// sbx_workqueue_{depth,waiting,processing}, sbx_workqueue_retries_total.
void CollectWorkQueue(Metrics& m, const ManagerStats& stats);
// sbx_leader; with workspace leases sbx_workspace_leases_held and
// sbx_reconciles_not_owned_total.
void CollectLeases(Metrics& m, bool leader, const WorkspaceLeases* leases,
                   const ManagerStats& stats);
// sbx_sandboxes{state}, sbx_sweeps_total, sbx_sweep_errors_total{workspace},
// sbx_gc_deleted_total.
void CollectSandboxes(Metrics& m, const SandboxCache& cache, const SandboxSweeper& sweeper,
                      const GarbageCollector& gc);
// sbx_executor_{exits,relaunches}_total; sbx_session_streams_open and …_opened_total when
// streams run (not in --once).
void CollectWorkers(Metrics& m, const AgentWorkerReconciler& workers,
                    const SessionEventStreams* streams);
// sbx_webhook_deliveries_total{result,reason}.
void CollectWebhooks(Metrics& m, const WebhookReceiver& receiver);
// sbx_gitsource_syncs_total{result}, sbx_gitsource_last_success_timestamp_seconds.
void CollectGitSources(Metrics& m, const GitSourceReconciler& git_sources);
// sbx_api_pacing_{,max_,class_}requests_per_second, sbx_api_pacing_cuts_total,
// sbx_api_pacing_wait_seconds_total, sbx_api_pacing_deferrals_total,
// sbx_api_pacing_deferred_seconds_total.
void CollectPacing(Metrics& m, HttpCloudClients& clouds);
// sbx_tasks_finished_total and sbx_task_tokens_total (DESIGN §8.2) from the store's usage
// ledger, which only grows: every replica exports the same totals.
void CollectUsage(Metrics& m, Store& store);

// sbx_notifications_total{result} (this process's attempts; dropped: the store's count, shared)
// and sbx_notification_queue_depth (the outbox, shared by the replicas).
void CollectNotifications(Metrics& m, const notify::NotificationDeliverer& deliverer, Store& store);

}  // namespace sbx::controller::daemon
