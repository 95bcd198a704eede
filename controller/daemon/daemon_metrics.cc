#include "controller/daemon/daemon_metrics.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "controller/cloud/http_cloud_clients.h"
#include "controller/engine/workspace_leases.h"
#include "controller/notify/notification_deliverer.h"
#include "controller/reconcilers/agent_worker_reconciler.h"
#include "controller/reconcilers/garbage_collector.h"
#include "controller/reconcilers/git_source_reconciler.h"
#include "controller/reconcilers/sandbox_cache.h"
#include "controller/reconcilers/sandbox_sweeper.h"
#include "controller/reconcilers/session_event_streams.h"
#include "controller/webhook/webhook_receiver.h"

namespace sbx::controller::daemon {

void CollectWorkQueue(Metrics& m, const ManagerStats& s) {
  m.gauge("sbx_workqueue_depth", "Keys ready to be reconciled", {})
      .Set(static_cast<double>(s.queue.depth));
  m.gauge("sbx_workqueue_waiting", "Keys waiting for a delay or backoff", {})
      .Set(static_cast<double>(s.queue.waiting));
  m.gauge("sbx_workqueue_processing", "Keys being reconciled", {})
      .Set(static_cast<double>(s.queue.processing));
  m.counter("sbx_workqueue_retries_total", "Rate-limited requeues", {})
      .RaiseTo(static_cast<double>(s.queue.retries_total));
}

void CollectLeases(Metrics& m, bool leader, const WorkspaceLeases* leases, const ManagerStats& s) {
  m.gauge("sbx_leader", "1 while this sbxd holds the leader lease", {}).Set(leader ? 1 : 0);
  if (leases == nullptr) {
    return;
  }
  m.gauge("sbx_workspace_leases_held", "Workspaces this replica reconciles now", {})
      .Set(static_cast<double>(leases->Held().size()));
  m.counter("sbx_reconciles_not_owned_total",
            "Queued keys dropped because another replica owns their workspace", {})
      .RaiseTo(static_cast<double>(s.not_owned_total));
}

void CollectSandboxes(Metrics& m, const SandboxCache& cache, const SandboxSweeper& sweeper,
                      const GarbageCollector& gc) {
  m.ResetGauges("sbx_sandboxes");
  for (const auto& [state, n] : cache.CountByState()) {
    m.gauge("sbx_sandboxes", "Live sandboxes by state, as last observed", {{"state", state}})
        .Set(static_cast<double>(n));
  }
  m.counter("sbx_sweeps_total", "Completed LIST sweeps", {})
      .RaiseTo(static_cast<double>(sweeper.sweeps_total()));
  const SandboxCache::AimedLooks aimed = cache.aimed_looks();
  using Found = std::pair<const char*, int64_t>;
  for (const auto& [found, n] : {Found{"RUNNING", aimed.hits}, Found{"PENDING", aimed.misses}}) {
    m.counter("sbx_sweep_aimed_looks_total",
              "Sandboxes a sweep aimed at the learned end of our start's PENDING found, by what "
              "it found",
              {{"found", found}})
        .RaiseTo(static_cast<double>(n));
  }
  for (const auto& [workspace, failed] : sweeper.SweepErrorsByWorkspace()) {
    m.counter("sbx_sweep_errors_total",
              "Failed sweeps (LIST, or garbage collection after it) by workspace",
              {{"workspace", workspace}})
        .RaiseTo(static_cast<double>(failed));
  }
  m.counter("sbx_gc_deleted_total", "Sandboxes deleted by garbage collection", {})
      .RaiseTo(static_cast<double>(gc.deleted_total()));
}

void CollectWorkers(Metrics& m, const AgentWorkerReconciler& workers,
                    const SessionEventStreams* streams) {
  m.counter("sbx_executor_exits_total",
            "Executors sbx launched and then found exited (crashed, killed or refused)", {})
      .RaiseTo(static_cast<double>(workers.executor_exits_total()));
  m.counter("sbx_executor_relaunches_total",
            "Executor launches after the first in a worker's session (after an exit, a stop)", {})
      .RaiseTo(static_cast<double>(workers.executor_relaunches_total()));
  if (streams == nullptr) {
    return;
  }
  m.gauge("sbx_session_streams_open", "Agent session event streams (SSE) open now", {})
      .Set(streams->open_streams());
  m.counter("sbx_session_streams_opened_total",
            "Agent session event streams accepted, reconnects included", {})
      .RaiseTo(static_cast<double>(streams->opened_total()));
}

void CollectWebhooks(Metrics& m, const WebhookReceiver& receiver) {
  for (const auto& [outcome, n] : receiver.Counts()) {
    m.counter("sbx_webhook_deliveries_total",
              "Webhook deliveries by result (accepted, rejected, unavailable) and reason",
              {{"result", outcome.first}, {"reason", outcome.second}})
        .RaiseTo(static_cast<double>(n));
  }
}

void CollectGitSources(Metrics& m, const GitSourceReconciler& git_sources) {
  // Both results from the start: an alert on failures needs the series before the first one.
  constexpr std::string_view kSyncsHelp = "GitSource syncs by result (success, failure)";
  m.counter("sbx_gitsource_syncs_total", kSyncsHelp, {{"result", "success"}})
      .RaiseTo(static_cast<double>(git_sources.syncs_succeeded()));
  m.counter("sbx_gitsource_syncs_total", kSyncsHelp, {{"result", "failure"}})
      .RaiseTo(static_cast<double>(git_sources.syncs_failed()));
  m.ResetGauges("sbx_gitsource_last_success_timestamp_seconds");  // a GitSource gone
  for (const auto& [key, seconds] : git_sources.LastSuccess()) {
    m.gauge("sbx_gitsource_last_success_timestamp_seconds",
            "When each GitSource last applied its commit (seconds since the epoch)",
            {{"namespace", key.first}, {"name", key.second}})
        .Set(seconds);
  }
}

void CollectUsage(Metrics& m, Store& store) {
  api::StatusOr<std::vector<Store::UsageTotal>> totals = store.UsageTotals();
  if (!totals.ok()) {
    return;  // the families keep their last values; the store's trouble shows elsewhere
  }
  std::map<std::pair<std::string, std::string>, api::UsageSum> tokens;  // (namespace, workspace)
  for (const Store::UsageTotal& t : *totals) {
    const auto [ns, name] = ParseWorkspaceId(t.workspace)
                                .value_or(std::pair<std::string, std::string>(t.workspace, ""));
    if (t.sum.tasks > 0) {
      m.counter("sbx_tasks_finished_total",
                "AgentTasks that ran and ended, by workspace, namespace and final phase (the "
                "usage ledger, shared by the replicas: aggregate with max)",
                {{"workspace", name}, {"namespace", ns}, {"phase", t.phase}})
          .RaiseTo(static_cast<double>(t.sum.tasks));
    }
    api::UsageSum& sum = tokens[{ns, name}];
    sum.input_tokens += t.sum.input_tokens;
    sum.cached_input_tokens += t.sum.cached_input_tokens;
    sum.output_tokens += t.sum.output_tokens;
    sum.reasoning_tokens += t.sum.reasoning_tokens;
    sum.compute_millis += t.sum.compute_millis;  // the sandboxes' RUNNING pieces (phase "")
  }
  for (const auto& [key, sum] : tokens) {
    for (const auto& [type, n] :
         {std::pair{"input", sum.input_tokens}, std::pair{"cached_input", sum.cached_input_tokens},
          std::pair{"output", sum.output_tokens}, std::pair{"reasoning", sum.reasoning_tokens}}) {
      m.counter("sbx_task_tokens_total",
                "Tokens AgentTasks' root turns used, by workspace, namespace and type (input, "
                "cached_input ⊂ input, output, reasoning ⊂ output; the usage ledger, shared by "
                "the replicas: aggregate with max)",
                {{"workspace", key.second}, {"namespace", key.first}, {"type", type}})
          .RaiseTo(static_cast<double>(n));
    }
    m.counter("sbx_sandbox_running_seconds_total",
              "Seconds the workspace's Sandboxes were RUNNING, as sbx observed them, by workspace "
              "and namespace (the usage ledger, counted in pieces of at most a resync; shared by "
              "the replicas: aggregate with max)",
              {{"workspace", key.second}, {"namespace", key.first}})
        .RaiseTo(static_cast<double>(sum.compute_millis) / 1000);
  }
}

void CollectPacing(Metrics& m, HttpCloudClients& clouds) {
  m.ResetGauges("sbx_api_pacing_requests_per_second");  // a workspace gone reads 0
  m.ResetGauges("sbx_api_pacing_max_requests_per_second");
  m.ResetGauges("sbx_api_pacing_class_requests_per_second");
  for (const HttpCloudClients::Pacing& p : clouds.PacingRates()) {
    const Labels labels{{"api", p.api}, {"workspace", p.workspace}};
    m.gauge("sbx_api_pacing_requests_per_second",
            "Client-side request rate per API and workspace now (adaptive: AIMD)", labels)
        .Set(p.rate);
    m.gauge("sbx_api_pacing_max_requests_per_second",
            "The most the client-side request rate may rise to", labels)
        .Set(p.max_rate);
    m.counter("sbx_api_pacing_cuts_total",
              "Times a 429 cut the client-side request rate of an endpoint class", labels)
        .RaiseTo(static_cast<double>(p.cuts));
    m.counter("sbx_api_pacing_wait_seconds_total",
              "Seconds calls spent waiting for the client-side rate limit, summed over the "
              "calls (each waits inside the reconcile that makes it)",
              labels)
        .RaiseTo(p.waited_seconds);
    m.counter("sbx_api_pacing_deferrals_total",
              "Needed calls whose wait for the client-side rate limit was given back to the work "
              "queue (a place in line for their reconcile) instead of held on a worker thread",
              labels)
        .RaiseTo(static_cast<double>(p.deferrals));
    m.counter("sbx_api_pacing_deferred_seconds_total",
              "Seconds of those waits given back to the work queue, summed over the calls", labels)
        .RaiseTo(p.deferred_seconds);
    for (int c = 0; c < kEndpointClasses; ++c) {
      Labels with_class = labels;
      with_class["class"] = std::string(EndpointClassName(static_cast<EndpointClass>(c)));
      m.gauge("sbx_api_pacing_class_requests_per_second",
              "Client-side request rate per API, workspace and endpoint class now (a 429 cuts "
              "only its class)",
              with_class)
          .Set(p.class_rates[static_cast<size_t>(c)]);
    }
  }
}

void CollectNotifications(Metrics& m, const notify::NotificationDeliverer& deliverer,
                          Store& store) {
  const notify::NotificationDeliverer::Stats stats = deliverer.stats();
  constexpr std::string_view kHelp =
      "Notifier deliveries by result: delivered, failed (an attempt, retried later), abandoned "
      "(its Notifier is gone), dropped (over a Notifier's bound; the store's count, shared by the "
      "replicas)";
  m.counter("sbx_notifications_total", kHelp, {{"result", "delivered"}})
      .RaiseTo(static_cast<double>(stats.delivered));
  m.counter("sbx_notifications_total", kHelp, {{"result", "failed"}})
      .RaiseTo(static_cast<double>(stats.failed));
  m.counter("sbx_notifications_total", kHelp, {{"result", "abandoned"}})
      .RaiseTo(static_cast<double>(stats.abandoned));
  api::StatusOr<std::vector<Store::NotificationCount>> counts = store.NotificationCounts();
  if (!counts.ok()) {
    return;
  }
  int64_t pending = 0;
  int64_t dropped = 0;
  for (const Store::NotificationCount& c : *counts) {
    pending += c.pending;
    dropped += c.dropped;
  }
  m.counter("sbx_notifications_total", kHelp, {{"result", "dropped"}})
      .RaiseTo(static_cast<double>(dropped));
  m.gauge("sbx_notification_queue_depth",
          "Notifications in the store's outbox waiting for delivery (shared by the replicas)", {})
      .Set(static_cast<double>(pending));
}

}  // namespace sbx::controller::daemon
