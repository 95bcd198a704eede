#include "controller/daemon/daemon.h"

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controller/apiserver/api_server.h"
#include "controller/apiserver/http_server.h"
#include "controller/apiserver/tokens.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http_cloud_clients.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/daemon/audit_file.h"
#include "controller/daemon/daemon_metrics.h"
#include "controller/engine/leader_elector.h"
#include "controller/engine/manager.h"
#include "controller/engine/periodic_resync.h"
#include "controller/engine/store_compactor.h"
#include "controller/engine/store_watch.h"
#include "controller/engine/wake_hints.h"
#include "controller/engine/workspace_leases.h"
#include "controller/gitops/git_client.h"
#include "controller/gitops/process_runner.h"
#include "controller/notify/notification_deliverer.h"
#include "controller/reconcilers/agent_pool_reconciler.h"
#include "controller/reconcilers/agent_task_reconciler.h"
#include "controller/reconcilers/agent_worker_reconciler.h"
#include "controller/reconcilers/garbage_collector.h"
#include "controller/reconcilers/git_source_reconciler.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/sandbox_cache.h"
#include "controller/reconcilers/sandbox_reconciler.h"
#include "controller/reconcilers/sandbox_sweeper.h"
#include "controller/reconcilers/session_event_streams.h"
#include "controller/reconcilers/task_log_writer.h"
#include "controller/reconcilers/workspace_of.h"
#include "controller/reconcilers/workspace_reconciler.h"
#include "controller/server/counting_transport.h"
#include "controller/server/health_server.h"
#include "controller/server/log.h"
#include "controller/server/metrics.h"
#include "controller/server/reconcile_metrics.h"
#include "controller/store/open_store.h"
#include "controller/store/scrubbing_store.h"
#include "controller/store/sqlite_store.h"
#include "controller/webhook/webhook_receiver.h"
#include "controller/webhook/webhook_server.h"

namespace sbx::controller::daemon {
namespace {

// ---- Options of the parts, from the config ----------------------------------------------------

void OnLeaseError(std::string_view operation, const api::Status& error) {
  log::Warn("lease store error",
            {{"operation", std::string(operation)}, {"error", error.ToString()}});
}

void OnSourceError(std::string_view source, const api::Status& error) {
  log::Warn("source error", {{"source", std::string(source)}, {"error", error.ToString()}});
}

SqliteStore::Options StoreOptions(const DaemonConfig& c) {
  SqliteStore::Options o;
  o.max_events_per_object = c.events_per_object;
  return o;
}

// Replicas splitting workspaces (DESIGN §7.4): this replica's workspace leases. Its fence guards
// every mutating cloud request; the Manager and the sweeper act only on its share.
std::unique_ptr<WorkspaceLeases> MakeLeases(const DaemonConfig& c, Store& store, Clock& clock) {
  if (!c.split_by_workspace || c.once) {
    return nullptr;
  }
  WorkspaceLeasesOptions o;
  o.identity = c.identity;
  o.lease_duration = c.lease_duration;
  o.renew_interval = c.lease_duration / 3;
  o.on_store_error = OnLeaseError;
  return std::make_unique<WorkspaceLeases>(store, clock, o);
}

HttpCloudClientsOptions CloudOptions(const DaemonConfig& c, WorkspaceLeases* fence) {
  HttpCloudClientsOptions o;
  o.openai_requests_per_second = c.openai_requests_per_second;
  o.openai_max_requests_per_second = c.openai_max_requests_per_second;
  o.databricks_max_requests_per_second = c.databricks_max_requests_per_second;
  o.on_secret = [](const std::string& secret) { log::RegisterSecret(secret); };
  o.secrets = c.secrets;
  o.fence = fence;
  return o;
}

// Where the time of a convergence goes (bench/converge.sh): debug lines, one per milestone.
MilestoneFn Milestones() {
  if (!log::Enabled(log::Level::kDebug)) {
    return {};
  }
  return [](const api::ObjectKey& object, std::string_view step) {
    log::Debug("timeline", {{"object", object.ToString()}, {"step", std::string(step)}});
  };
}

SandboxReconcilerOptions SandboxOptions(OnDemandPower& power) {
  SandboxReconcilerOptions o;
  o.milestone = Milestones();
  o.power = &power;
  return o;
}

SandboxSweeperOptions SweeperOptions(const DaemonConfig& c, WorkspaceLeases* leases) {
  SandboxSweeperOptions o;
  o.period = c.sweep_interval;
  o.page_size = c.page_size;
  if (leases != nullptr) {
    o.owns_workspace = [leases](const std::string& workspace) {
      api::StatusOr<bool> owned = leases->Owns(workspace);
      return owned.ok() && *owned;
    };
  }
  return o;
}

ManagerOptions ManagerOptionsOf(const DaemonConfig& c) {
  ManagerOptions o;
  o.workers = c.workers;
  o.defer_pacing = c.pacing_give_back;
  return o;
}

AgentWorkerReconcilerOptions WorkerOptions(const DaemonConfig& c, WakeHints& wake_hints) {
  AgentWorkerReconcilerOptions o;
  o.wake_hints = &wake_hints;
  o.milestone = Milestones();
  o.schedule.status_interval = c.executor_status_interval;
  o.schedule.probe_interval = c.executor_probe_interval;
  return o;
}

AgentTaskReconcilerOptions TaskOptions(OnDemandPower& power, Manager& manager) {
  AgentTaskReconcilerOptions o;
  o.power = &power;
  o.enqueuer = &manager;  // input POSTs in the background (held up to 5 minutes)
  o.scrub_artifact = [](std::string_view text) { return log::Scrub(text); };
  return o;
}

// GitSource: git runs with PATH and the proxy settings of sbxd's environment only.
gitops::GitClientOptions GitOptions(const DaemonConfig& c) {
  gitops::GitClientOptions o;
  o.cache_dir = c.git_cache_dir;
  o.fetch_timeout = c.git_timeout;
  o.allow_file_urls = c.git_allow_file_urls;
  for (const std::string& e : c.environment) {
    for (const char* name : {"PATH=", "http_proxy=", "https_proxy=", "no_proxy=", "HTTP_PROXY=",
                             "HTTPS_PROXY=", "NO_PROXY=", "SSL_CERT_FILE=", "SSL_CERT_DIR="}) {
      if (e.starts_with(name)) {
        o.environment.push_back(e);
      }
    }
  }
  return o;
}

GitSourceReconcilerOptions GitSourceOptions(const DaemonConfig& c, Manager& manager) {
  GitSourceReconcilerOptions o;
  o.validation.secret_env_prefix = c.secrets.env_prefix;
  // Fetches on threads of their own, never a reconcile worker (a --once pass waits for them).
  o.enqueuer = c.once ? nullptr : &manager;
  o.fetch_workers = c.git_fetch_workers;
  return o;
}

// The global lease: with --work-split leader, the one active sbxd; with workspace, the replica
// that also does what belongs to no workspace (GitSources, objects whose references do not
// exist yet) and compacts the change log.
LeaderElectorOptions ElectorOptions(const DaemonConfig& c) {
  LeaderElectorOptions o;
  o.identity = c.identity;
  o.lease_duration = c.lease_duration;
  o.renew_interval = c.lease_duration / 3;
  o.on_store_error = OnLeaseError;
  return o;
}

StoreWatchOptions WatchOptions(WakeHints& wake_hints) {
  StoreWatchOptions o;
  o.on_error = OnSourceError;
  o.wake_hints = &wake_hints;  // webhooks received by another replica
  return o;
}

PeriodicResyncOptions ResyncOptions(const DaemonConfig& c) {
  PeriodicResyncOptions o;
  o.period = c.resync;
  o.on_error = OnSourceError;
  return o;
}

// Blocks until `stop` is requested.
void WaitForStop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
}

class NullEnqueuer final : public Enqueuer {
 public:
  void Enqueue(const api::ObjectKey&) override {}
  void EnqueueDependents(const api::ObjectKey&) override {}
};

}  // namespace

// ---- The parts, in dependency order: each is built after, and destroyed before, what it uses ---

struct Daemon::Parts {
  Parts(DaemonConfig c, std::unique_ptr<Store> opened)
      : config(std::move(c)),
        opened_store(std::move(opened)),
        store(*opened_store, [](std::string_view text) { return log::Scrub(text); }),
        leases(MakeLeases(config, store, clock)),
        plain(http::MakeCppRestTransport()),
        transport(*plain, metrics, CloudApiOf),
        streaming(http::MakeCppRestStreamingTransport()),
        clouds(store, clock, transport, *streaming, databricks::ProcessEnv(),
               CloudOptions(config, Leases())),
        cache(&clock),
        gc(store, cache, clock, GarbageCollectorOptions{config.gc_grace}),
        power(store),
        sandboxes(store, clouds, cache, clock, SandboxOptions(power)),
        sweeper(store, clouds, cache, &gc, clock, SweeperOptions(config, Leases())),
        manager(clock, ManagerOptionsOf(config)),
        workers(store, clouds, clock, &manager.dependencies(), WorkerOptions(config, wake_hints)),
        workspaces(store, clouds, clock, &manager.dependencies()),
        task_log(store),
        // One SSE stream per worker session, shared by its tasks (live task logs, turn outcomes
        // without polling). Not in a --once pass: it polls, as nothing would read the streams.
        streams(config.once ? nullptr
                            : std::make_unique<SessionEventStreams>(task_log, manager, clock)),
        tasks(store, clouds, clock, &manager.dependencies(), TaskOptions(power, manager),
              streams.get()),
        git(git_runner, GitOptions(config)),
        git_sources(store, clouds, git, clock, GitSourceOptions(config, manager)),
        pools(store, clock, &manager.dependencies()),
        elector(store, clock, ElectorOptions(config)),
        watch(store, clock, WatchOptions(wake_hints)),
        resyncer(store, clock, ResyncOptions(config)),
        reconcile_metrics(metrics),
        health(metrics, [this] { return Readiness(); }),
        sandbox_commands(clouds) {}

  WorkspaceLeases* Leases() { return leases.get(); }

  // Whether this replica acts on `key`: with --work-split workspace, whoever holds the lease of
  // its workspace (the global lease's holder for an object of none); otherwise the leader.
  api::StatusOr<bool> Owns(const api::ObjectKey& key) {
    if (!leases) {
      return elector.is_leader();
    }
    ASSIGN_OR_RETURN(std::optional<std::string> workspace, WorkspaceOf(store, key));
    return workspace ? leases->Owns(*workspace) : api::StatusOr<bool>(elector.is_leader());
  }

  // Every reconciler, in the order of a --once pass: AgentPools first (they make AgentWorkers),
  // Sandboxes before the AgentWorkers that use them, Workspaces late (one being deleted goes in
  // the same pass as the last object using it). The Manager registers the same list.
  std::vector<Reconciler*> Reconcilers() {
    return {&pools, &sandboxes, &workers, &tasks, &workspaces, &git_sources};
  }

  std::pair<bool, std::string> Readiness() const {
    if (!leases && !elector.is_leader()) {
      return {false, "standby: another sbxd holds the lease"};
    }
    if (watch.last_revision() < 0) {
      return {false, "initial sync in progress"};
    }
    return {true, "ok"};
  }

  DaemonConfig config;
  std::unique_ptr<Store> opened_store;
  // Everything sbxd writes where people look passes the logger's secret registry.
  ScrubbingStore store;
  SystemClock clock;
  Metrics metrics;
  std::unique_ptr<WorkspaceLeases> leases;  // with --work-split workspace only
  std::unique_ptr<http::HttpTransport> plain;
  CountingTransport transport;
  std::unique_ptr<http::StreamingTransport> streaming;
  HttpCloudClients clouds;
  SandboxCache cache;  // learns the workspaces' PENDING times on `clock`
  GarbageCollector gc;
  // Power OnDemand: shared by the Sandbox and AgentTask reconcilers (a stop never crosses a
  // submission); it queues sandboxes and records dependencies through the Manager.
  OnDemandPower power;
  SandboxReconciler sandboxes;
  SandboxSweeper sweeper;
  Manager manager;
  WakeHints wake_hints;
  AgentWorkerReconciler workers;
  WorkspaceReconciler workspaces;
  TaskLogWriter task_log;
  std::unique_ptr<SessionEventStreams> streams;
  AgentTaskReconciler tasks;
  gitops::PosixProcessRunner git_runner;
  gitops::GitClient git;
  GitSourceReconciler git_sources;
  AgentPoolReconciler pools;
  LeaderElector elector;
  StoreWatch watch;
  PeriodicResync resyncer;
  // The webhook endpoint: its receiver acts (enqueues) only while the Manager runs; the
  // listener answers from start-up on (503 while standby, so the sender retries).
  std::optional<WebhookVerifier> webhook_verifier;
  std::optional<WebhookReceiver> webhook_receiver;
  std::optional<WebhookServer> webhook_server;
  ReconcileMetrics reconcile_metrics;
  HealthServer health;
  // The API server: its own connections to the store (one for requests, one for the watch
  // hub), so that reads neither wait for the controller's writes nor disturb its watch.
  std::unique_ptr<Store> api_store;
  std::unique_ptr<Store> api_watch_store;
  std::optional<apiserver::TokenTable> tokens;
  CloudSandboxCommands sandbox_commands;
  std::unique_ptr<apiserver::ApiServer> api_server;
  std::unique_ptr<apiserver::HttpServer> api_http;
  int metrics_port = 0;
  int webhook_port = 0;
  int api_port = 0;
  // Threads of Run, joined by Drain before anything above goes.
  std::atomic<bool> lost{false};
  std::jthread renewals;
  std::jthread workspace_rounds;
  std::jthread compaction;
  // Notifier deliveries (DESIGN §8.3): by the owner of each object's workspace; every Notifier's
  // status by the leader.
  std::unique_ptr<notify::NotificationDeliverer> notifications;
  std::jthread notification_rounds;
  // --audit-log: every replica copies the store's audit log to its file.
  std::unique_ptr<AuditFile> audit_file;
  std::jthread audit_export;
  bool drained = false;
};

// ---- Lifecycle ----------------------------------------------------------------------------------

api::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(DaemonConfig config) {
  // Scrubbed from every log line, status and event from the first line on (SECURITY.md).
  for (std::string& value : KnownSecretValues(config.secrets, config.environment)) {
    log::RegisterSecret(std::move(value));
  }
  // A postgres:// URL opens a PostgresStore; otherwise SqliteStore::Open creates the missing
  // directories of the database 0700 and the file 0600.
  api::StatusOr<std::unique_ptr<Store>> opened = OpenStore(config.db, StoreOptions(config));
  if (!opened.ok()) {
    return opened.status().Annotate("cannot open the store");
  }
  auto parts = std::make_unique<Parts>(std::move(config), *std::move(opened));
  Parts& p = *parts;
  if (p.leases) {
    p.manager.SetOwnership([&p](const api::ObjectKey& key) { return p.Owns(key); });
  }
  p.power.Attach([&p](const api::ObjectKey& key) { p.manager.queue().Add(key); },
                 &p.manager.dependencies());
  for (Reconciler* reconciler : p.Reconcilers()) {
    p.manager.Register(*reconciler);
  }
  p.manager.AddSource(p.watch);
  p.manager.AddSource(p.resyncer);
  p.manager.AddSource(p.sweeper);
  p.manager.SetObserver(&p.reconcile_metrics);
  if (!p.config.audit_log.empty() && !p.config.once) {
    api::StatusOr<std::unique_ptr<AuditFile>> audit = AuditFile::Open(p.store, p.config.audit_log);
    if (!audit.ok()) {
      return audit.status();
    }
    p.audit_file = *std::move(audit);
  }
  {
    notify::NotificationDelivererOptions o;
    o.secrets = p.config.secrets;
    o.env = databricks::ProcessEnv();  // as the cloud clients resolve {env: …}
    o.owns = [&p](const api::ObjectKey& key) { return p.Owns(key); };
    o.owns_status = [&p] { return p.elector.is_leader(); };
    o.register_secret = [](const std::string& secret) { log::RegisterSecret(secret); };
    p.notifications =
        std::make_unique<notify::NotificationDeliverer>(p.store, *p.plain, p.clock, std::move(o));
  }
  if (p.config.webhook_secret) {
    p.webhook_verifier.emplace(*p.config.webhook_secret, p.clock);
    p.webhook_receiver.emplace(
        *p.webhook_verifier, p.store, p.wake_hints,
        WebhookReceiverOptions{.path = p.config.webhook_path, .share_hints = p.leases != nullptr});
    p.manager.AddSource(*p.webhook_receiver);
    p.webhook_server.emplace(
        [&receiver = *p.webhook_receiver](const WebhookRequest& r) { return receiver.Handle(r); });
  }
  p.metrics.AddCollector([&p](Metrics& m) {
    const ManagerStats stats = p.manager.Stats();
    CollectWorkQueue(m, stats);
    CollectLeases(m, p.elector.is_leader(), p.leases.get(), stats);
    CollectSandboxes(m, p.cache, p.sweeper, p.gc);
    CollectWorkers(m, p.workers, p.streams.get());
    if (p.webhook_receiver) {
      CollectWebhooks(m, *p.webhook_receiver);
    }
    CollectGitSources(m, p.git_sources);
    CollectPacing(m, p.clouds);
    CollectUsage(m, p.store);
    CollectNotifications(m, *p.notifications, p.store);
  });
  if (!p.config.listen.empty()) {
    api::StatusOr<apiserver::TokenTable> tokens = apiserver::TokenTable::Load(p.config.tokens_file);
    if (!tokens.ok()) {
      return api::InvalidArgumentError("--tokens-file: " + tokens.status().message());
    }
    p.tokens = *std::move(tokens);
    auto requests = OpenStore(p.config.db, StoreOptions(p.config));
    auto watches = requests.ok() ? OpenStore(p.config.db, StoreOptions(p.config))
                                 : api::StatusOr<std::unique_ptr<Store>>(requests.status());
    if (!watches.ok()) {
      return watches.status().Annotate("cannot open the store for the API");
    }
    p.api_store = *std::move(requests);
    p.api_watch_store = *std::move(watches);
  }
  return std::unique_ptr<Daemon>(new Daemon(std::move(parts)));
}

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Drain(); }

int Daemon::metrics_port() const { return parts_->metrics_port; }
int Daemon::webhook_port() const { return parts_->webhook_port; }
int Daemon::api_port() const { return parts_->api_port; }

api::Status Daemon::Serve() {
  Parts& p = *parts_;
  if (p.webhook_server) {
    api::StatusOr<int> port = p.webhook_server->Start(p.config.webhook_addr);
    if (!port.ok()) {
      return port.status().Annotate("cannot serve webhooks");
    }
    p.webhook_port = *port;
    log::Info("serving webhooks", {{"addr", p.config.webhook_addr},
                                   {"port", std::to_string(*port)},
                                   {"path", p.config.webhook_path}});
  }
  if (!p.config.metrics_addr.empty()) {
    api::StatusOr<int> port = p.health.Start(p.config.metrics_addr);
    if (!port.ok()) {
      return port.status().Annotate("cannot serve metrics");
    }
    p.metrics_port = *port;
    log::Info("serving health and metrics",
              {{"addr", p.config.metrics_addr}, {"port", std::to_string(*port)}});
  }
  if (!p.api_store) {
    return api::OkStatus();
  }
  if (p.tokens->size() == 0) {
    log::Warn("the tokens file has no tokens: every API request will be refused",
              {{"file", p.config.tokens_file}});
  }
  apiserver::ApiServerOptions api_options;
  api_options.validation.secret_env_prefix = p.config.secrets.env_prefix;
  api_options.max_watches = p.config.max_watches;
  api_options.scrub_log = [](std::string_view text) { return log::Scrub(text); };
  p.api_server = std::make_unique<apiserver::ApiServer>(*p.api_store, *p.api_watch_store, *p.tokens,
                                                        &p.sandbox_commands, p.clock, api_options);
  RETURN_IF_ERROR(p.api_server->Start());
  apiserver::HttpServerOptions http_options;
  http_options.tls_cert_file = p.config.tls_cert;
  http_options.tls_key_file = p.config.tls_key;
  http_options.max_body_bytes = p.config.max_request_bytes;
  // Every watch holds a connection: leave room for ordinary requests beside them.
  http_options.max_connections = p.config.max_watches + 256;
  // The token is checked from the head; no anonymous body is read (#24).
  http_options.check_head = [&server = *p.api_server](const apiserver::HttpRequest& head) {
    return server.CheckHead(head);
  };
  p.api_http = std::make_unique<apiserver::HttpServer>(
      [&server = *p.api_server](apiserver::HttpExchange& x) { server.Handle(x); }, http_options);
  const apiserver::ListenAddress addr = *apiserver::ParseListenAddress(p.config.listen);
  api::StatusOr<int> port = p.api_http->Start(addr.host, addr.port);
  if (!port.ok()) {
    return port.status().Annotate("cannot serve the API");
  }
  p.api_port = *port;
  log::Info("serving the API", {{"addr", p.config.listen},
                                {"port", std::to_string(*port)},
                                {"tls", p.config.tls_cert.empty() ? "off" : "on"},
                                {"tokens", std::to_string(p.tokens->size())}});
  return api::OkStatus();
}

int Daemon::Run(std::stop_token outer) {
  Parts& p = *parts_;
  std::stop_source stop;  // the caller's stop, or a lost leader lease
  std::stop_callback forward(outer, [&stop] { stop.request_stop(); });
  log::Info("starting", {{"db", DisplayDatabase(p.config.db)},
                         {"identity", p.elector.identity()},
                         {"work_split", p.leases ? "workspace" : "leader"},
                         {"workers", std::to_string(p.config.workers)}});
  // Every replica, leader or standby, copies the audit log to its --audit-log file.
  if (p.audit_file) {
    p.audit_export = std::jthread([&p](std::stop_token own) {
      p.audit_file->Run(own, p.clock, std::chrono::seconds(1), [](const api::Status& error) {
        log::Warn("cannot write the audit log file", {{"error", error.ToString()}});
      });
    });
  }
  // Every replica delivers the notifications of the objects it owns (the leader: all of them).
  p.notification_rounds = std::jthread([&p](std::stop_token own) {
    p.notifications->Run(own, [](const api::Status& error) {
      log::Warn("notification delivery failed", {{"error", error.ToString()}});
    });
  });
  // What a replica that just took work over must look at: everything (the gate drops the rest).
  const auto enqueue_all = [&p] {
    api::StatusOr<std::vector<api::Object>> all = p.store.List(ListOptions{});
    if (!all.ok()) {
      log::Warn("cannot list objects to enqueue", {{"error", all.status().ToString()}});
      return;
    }
    for (const api::Object& o : *all) {
      p.manager.queue().Add(api::KeyOf(o));
    }
  };
  const std::string& lease_name = p.elector.options().lease_name;
  if (p.leases) {
    // Every replica works from the start on its share; the global lease moves between them.
    p.manager.Start();
    p.renewals = std::jthread([&p, enqueue_all, &lease_name](std::stop_token own) {
      while (p.elector.WaitUntilLeader(own)) {
        log::Info("took the global lease", {{"lease", lease_name}});
        enqueue_all();
        p.elector.RunRenewals(own, [] { log::Warn("lost the global lease"); });
      }
    });
    p.workspace_rounds = std::jthread([&p, enqueue_all](std::stop_token own) {
      p.leases->Run(own, [&](const WorkspaceLeases::Round& round) {
        for (const std::string& w : round.lost) {
          log::Warn("lost a workspace lease", {{"workspace", w}});
        }
        for (const std::string& w : round.released) {
          log::Info("gave a workspace up",
                    {{"workspace", w}, {"replicas", std::to_string(round.members)}});
        }
        for (const std::string& w : round.acquired) {
          log::Info("took a workspace",
                    {{"workspace", w},
                     {"token", std::to_string(p.leases->Token(w).value_or(FenceToken{}).token)},
                     {"replicas", std::to_string(round.members)}});
        }
        if (!round.acquired.empty()) {
          enqueue_all();
        }
      });
    });
  } else {
    if (!p.elector.WaitUntilLeader(stop.get_token())) {
      Drain();
      log::Info("stopped while standby");
      return 0;
    }
    log::Info("became leader", {{"lease", lease_name}});
    p.manager.Start();
    p.renewals = std::jthread([&p, &stop](std::stop_token own) {
      p.elector.RunRenewals(own, [&] {
        p.lost = true;
        log::Error("lost the leader lease; stopping");
        stop.request_stop();
      });
    });
  }
  if (p.config.compaction_interval.count() > 0) {
    p.compaction = std::jthread([&p](std::stop_token own) {
      // Only the leader compacts, never past its own watch, so it never has to re-list for it.
      // Split by workspace: only the global lease's holder compacts (the others expire events).
      StoreCompactorOptions o;
      o.interval = p.config.compaction_interval;
      o.event_ttl = p.config.event_ttl;
      o.audit_retention = p.config.audit_retention;
      o.watermark = [&p] {
        return !p.leases || p.elector.is_leader() ? p.watch.last_revision() : -1;
      };
      StoreCompactor compactor(p.store, p.clock, o);
      compactor.Run(own, [](const api::StatusOr<StoreCompactor::Round>& round) {
        if (!round.ok()) {
          log::Warn("store compaction failed", {{"error", round.status().ToString()}});
          return;
        }
        log::Debug("store compacted",
                   {{"revision", round->compacted_to ? std::to_string(*round->compacted_to) : "-"},
                    {"changes_deleted", std::to_string(round->changes_deleted)},
                    {"events_deleted", std::to_string(round->events_deleted)}});
      });
    });
  }
  WaitForStop(stop.get_token());
  log::Info("draining in-flight reconciles");
  Drain();  // before `stop` goes: the renewals thread may still request it
  log::Info("stopped");
  return p.lost ? 1 : 0;
}

// The one shutdown sequence (Run's end, a standby's stop, the destructor): no new intake, let
// in-flight reconciles finish, join Run's threads, give the leases up (the others take over at
// their next round, not after an expiry), then close the listeners.
void Daemon::Drain() {
  Parts& p = *parts_;
  if (p.drained) {
    return;
  }
  p.drained = true;
  if (p.streams) {
    p.streams->Stop();  // closes every session stream; a pass still running falls back to polling
  }
  if (p.api_server) {
    p.api_server->Stop();  // ends watches and follows first, so the HTTP threads can be joined
  }
  if (p.api_http) {
    p.api_http->Stop();
  }
  p.manager.Stop();
  p.notification_rounds = {};
  p.audit_export = {};  // after the last API write: its final round copies it
  p.compaction = {};    // stops and joins
  p.workspace_rounds = {};
  p.renewals = {};
  if (p.leases) {
    p.leases->ReleaseAll();
  }
  if (!p.lost) {
    p.elector.Release();
  }
  if (p.webhook_server) {
    p.webhook_server->Stop();
  }
  p.health.Stop();
}

// ---- --once -------------------------------------------------------------------------------------

namespace {

// Why `--once` did not run: the lease, its holder and until when, as far as the store tells.
std::string LeaseHeldMessage(Store& store, const std::string& lease, const std::string& db,
                             Clock& clock) {
  std::string holder = "another sbxd";
  api::StatusOr<std::optional<Store::Lease>> current = store.GetLease(lease);
  if (current.ok() && *current) {
    const auto left =
        std::chrono::duration_cast<std::chrono::seconds>((*current)->expires_at - clock.Now());
    holder = "\"" + (*current)->holder + "\" (renewed " + (*current)->renewed_at + ", expires in " +
             std::to_string(std::max<int64_t>(left.count(), 0)) + "s)";
  }
  return "sbxd: error: --once: the leader lease \"" + lease + "\" on " + db + " is held by " +
         holder + "; a running sbxd is reconciling this store, so no pass was run (stop it, or " +
         "let it do the work)\n";
}

// A replica splitting workspaces that is alive now (its member lease unexpired), if any.
std::optional<std::string> LiveReplica(Store& store, Clock& clock) {
  api::StatusOr<std::vector<Store::Lease>> members =
      store.ListLeases(std::string(WorkspaceLeases::kMemberPrefix));
  if (members.ok()) {
    for (const Store::Lease& m : *members) {
      if (m.expires_at > clock.Now()) {
        return m.holder;
      }
    }
  }
  return std::nullopt;
}

// One full pass: sweep every workspace (fills the cache, runs GC), then reconcile every object
// once, kind by kind in `reconcilers`' order. Returns the number of failures; a stop (SIGTERM, a
// lost lease) ends the pass between two reconciles and counts as one.
int RunPass(Store& store, SandboxSweeper& sweeper, const std::vector<Reconciler*>& reconcilers,
            std::stop_token stop) {
  NullEnqueuer sink;
  int failures = 0;
  if (api::Status s = sweeper.SweepAll(sink, {}); !s.ok()) {
    log::Error("sweep failed", {{"error", s.ToString()}});
    ++failures;
  }
  for (Reconciler* reconciler : reconcilers) {
    ListOptions all;
    all.kind = reconciler->kind();
    api::StatusOr<std::vector<api::Object>> objects = store.List(all);
    if (!objects.ok()) {
      log::Error("list failed", {{"error", objects.status().ToString()}});
      return failures + 1;
    }
    for (const api::Object& o : *objects) {
      if (stop.stop_requested()) {
        log::Error("pass stopped before it was complete");
        return failures + 1;
      }
      api::StatusOr<ReconcileResult> r = reconciler->Reconcile(api::KeyOf(o), {});
      if (!r.ok()) {
        log::Error("reconcile failed",
                   {{"object", api::KeyOf(o).ToString()}, {"error", r.status().ToString()}});
        ++failures;
      } else {
        log::Info("reconciled", {{"object", api::KeyOf(o).ToString()}});
      }
    }
  }
  return failures;
}

}  // namespace

int Daemon::RunOnce(std::stop_token outer, std::ostream& err) {
  Parts& p = *parts_;
  const std::string& lease_name = p.elector.options().lease_name;
  // The pass acts like a leader, so it holds the leader's lease — never next to a running sbxd.
  api::StatusOr<bool> held = p.elector.TryAcquire();
  if (!held.ok()) {
    log::Error("cannot take the leader lease", {{"error", held.status().ToString()}});
    return 1;
  }
  if (!*held) {
    err << LeaseHeldMessage(p.store, lease_name, DisplayDatabase(p.config.db), p.clock);
    return kExitLeaseHeld;
  }
  // Replicas splitting workspaces hold member leases; a pass must not run next to them.
  if (std::optional<std::string> replica = LiveReplica(p.store, p.clock)) {
    p.elector.Release();
    err << "sbxd: error: --once: sbxd replica \"" << *replica << "\" is reconciling "
        << DisplayDatabase(p.config.db) << ", so no pass was run\n";
    return kExitLeaseHeld;
  }
  log::Info("took the leader lease for one pass",
            {{"lease", lease_name}, {"identity", p.elector.identity()}});
  std::stop_source stop;
  std::stop_callback forward(outer, [&stop] { stop.request_stop(); });
  p.renewals = std::jthread([&p, &stop](std::stop_token own) {
    p.elector.RunRenewals(own, [&] {
      p.lost = true;
      log::Error("lost the leader lease; stopping the pass");
      stop.request_stop();
    });
  });
  const int failures = RunPass(p.store, p.sweeper, p.Reconcilers(), stop.get_token());
  Drain();
  log::Info("pass complete", {{"failures", std::to_string(failures)}});
  return failures == 0 && !p.lost ? 0 : 1;
}

}  // namespace sbx::controller::daemon
