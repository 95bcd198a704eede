// sbxd: the controller daemon (DESIGN §4). Builds the concrete objects, wires them, and runs
// them until SIGTERM/SIGINT: leader election on the store, then the Manager (workers, store
// watch, periodic resync, live-state sweeper with garbage collection) and the health/metrics
// server. `--once` runs one full pass instead and exits non-zero if anything failed; it takes
// the same leader lease first and exits kExitLeaseHeld when a running sbxd holds it.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/duration.h"
#include "api/resources.h"
#include "cli/main_guard.h"
#include "controller/apiserver/api_server.h"
#include "controller/apiserver/http_server.h"
#include "controller/apiserver/tokens.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http_cloud_clients.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/engine/leader_elector.h"
#include "controller/engine/manager.h"
#include "controller/engine/periodic_resync.h"
#include "controller/engine/store_compactor.h"
#include "controller/engine/store_watch.h"
#include "controller/engine/wake_hints.h"
#include "controller/engine/workspace_leases.h"
#include "controller/gitops/git_client.h"
#include "controller/gitops/process_runner.h"
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
#include "controller/store/postgres_store.h"
#include "controller/store/scrubbing_store.h"
#include "controller/store/sqlite_store.h"
#include "controller/webhook/webhook_receiver.h"
#include "controller/webhook/webhook_server.h"
#include "controller/webhook/webhook_verifier.h"

extern char** environ;

namespace {

using namespace sbx;
using namespace sbx::controller;
using std::chrono::milliseconds;

struct Flags {
  std::string db;
  int workers = 4;
  std::string resync = "5m";
  std::string sweep_interval = "60s";
  std::string gc_grace = "5m";
  int page_size = 100;
  std::string metrics_addr = "127.0.0.1:9090";
  std::string log_format = "text";
  std::string log_level = "info";
  std::string identity;
  std::string lease_duration = "15s";
  // How replicas sharing one store divide the work (DESIGN §7.4): "workspace" (per-workspace
  // leases: every replica reconciles its share), "leader" (one global lease: one active sbxd,
  // the others stand by), "auto" (workspace for a PostgreSQL store, leader for SQLite).
  std::string work_split = "auto";
  std::string secret_env_prefix = std::string(api::kDefaultSecretEnvPrefix);
  std::string secrets_dir;
  // Namespaces are a boundary for secret sources (DESIGN §8.4): "namespace" or "global".
  std::string secret_scope = "namespace";
  std::string secret_grants;  // a file of "NAMESPACE SOURCE" lines
  bool once = false;
  // AgentWorker: how often the environment's connection is checked (while connected) and how
  // often the executor is probed in its sandbox. Short values make tests (and demos) react fast.
  std::string executor_status_interval = "30s";
  std::string executor_probe_interval = "5m";
  // Client-side pacing of the OpenAI API per workspace. Its limits for the Agents endpoints are
  // not documented (the official SDK paces nothing and retries 429s): the pacing starts at a
  // cautious 10/s and adapts (AIMD): it rises while calls wait for it, up to the maximum, and is
  // cut on a 429 or Retry-After.
  double openai_requests_per_second = 10;
  double openai_max_requests_per_second = 100;
  // The Databricks pacing starts at the Workspace's limits.requestsPerSecond (default 15) and
  // rises no higher than this; 0: no higher than where it started (a stated limit is only cut
  // by a 429, and recovers up to it).
  double databricks_max_requests_per_second = 0;
  // Store growth (issue #12): change-log compaction and event expiry by the leader.
  std::string compaction_interval = "5m";
  std::string event_ttl = "1h";
  int events_per_object = 100;
  // The OpenAI service's signed webhooks (DESIGN §7.2); empty = off. Secret: OPENAI_WEBHOOK_SECRET.
  std::string webhook_addr;
  std::string webhook_path = "/webhooks/openai";
  // The API server (DESIGN §7.3); off unless --listen is given.
  std::string listen;
  std::string tls_cert;
  std::string tls_key;
  std::string tokens_file;
  size_t max_request_bytes = size_t{16} << 20;
  size_t max_watches = 1000;
  // GitSource (DESIGN §7.3): where the fetched repositories are kept (default: git-cache next
  // to the database), how long one git fetch may take, and whether file:// urls are allowed.
  std::string git_cache_dir;
  std::string git_timeout = "2m";
  size_t git_fetch_workers = 2;
  bool git_allow_file_urls = false;
};

// `sbxd --once` found the leader lease held by another sbxd: nothing was done.
constexpr int kExitLeaseHeld = 3;

// $XDG_STATE_HOME/sbx (else ~/.local/state/sbx): where sbxd keeps what it writes to disk.
std::filesystem::path StateDir() {
  std::filesystem::path base;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state != '\0') {
    base = state;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::filesystem::path(home) / ".local" / "state";
  } else {
    base = ".";
  }
  return base / "sbx";
}

std::string DefaultDbPath() {
  if (const char* env = std::getenv("SBX_DB"); env != nullptr && *env != '\0') {
    return env;
  }
  return (StateDir() / "sbx.db").string();
}

milliseconds ParseFlagDuration(const std::string& flag, const std::string& text) {
  api::StatusOr<std::chrono::seconds> d = api::ParseDuration(text);
  if (!d.ok()) {
    std::cerr << "sbxd: error: --" << flag << ": " << d.status().message() << "\n";
    std::exit(2);
  }
  return *d;
}

// SIGTERM/SIGINT are blocked in every thread and taken by one waiter thread, which turns them
// into a stop request: no work in a signal handler, and a second signal is not lost.
class SignalStop {
 public:
  SignalStop() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // before any thread starts: inherited by all
  }
  void Start(std::stop_source& stop) {
    waiter_ = std::jthread([this, &stop](std::stop_token own) {
      while (!own.stop_requested()) {
        timespec timeout{0, 200'000'000};
        const int sig = sigtimedwait(&set_, nullptr, &timeout);
        if (sig == SIGTERM || sig == SIGINT) {
          log::Info("signal", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
          stop.request_stop();
          return;
        }
      }
    });
  }

 private:
  sigset_t set_;
  std::jthread waiter_;
};

// Blocks until `stop` is requested.
void WaitForStop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
}

// One full pass: sweep every workspace (fills the cache, runs GC), then reconcile every object
// once — Sandboxes before the AgentWorkers that use them, Workspaces last (one being deleted goes
// in the same pass as the last object using it). Returns the number of failures; a stop
// (SIGTERM, a lost lease) ends the pass between two reconciles and counts as one.
int RunOnce(Store& store, SandboxSweeper& sweeper, std::initializer_list<Reconciler*> reconcilers,
            Enqueuer& sink, std::stop_token stop) {
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

class NullEnqueuer final : public Enqueuer {
 public:
  void Enqueue(const api::ObjectKey&) override {}
  void EnqueueDependents(const api::ObjectKey&) override {}
};

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

// The program itself; main (at the end) runs it behind a catch-all.
// `sbxd hash-token NAME ROLE`: reads a token on stdin (its first line) and prints its line for
// --tokens-file. The token itself is never printed.
int HashToken(const std::string& name, const std::string& role) {
  std::string token;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == '\n')) {
    token.pop_back();
  }
  api::StatusOr<std::string> line = apiserver::TokenLine(name, role, token);
  if (!line.ok()) {
    std::cerr << "sbxd hash-token: error: " << line.status().message() << "\n";
    return 2;
  }
  std::cout << *line << "\n";
  return 0;
}

// Checks the API server's flags before anything starts; exits 2 with the reason.
void CheckApiFlags(const Flags& flags) {
  if (flags.listen.empty()) {
    if (!flags.tls_cert.empty() || !flags.tls_key.empty() || !flags.tokens_file.empty()) {
      std::cerr << "sbxd: error: --tls-cert, --tls-key and --tokens-file need --listen\n";
      std::exit(2);
    }
    return;
  }
  api::StatusOr<apiserver::ListenAddress> addr = apiserver::ParseListenAddress(flags.listen);
  if (!addr.ok()) {
    std::cerr << "sbxd: error: --listen: " << addr.status().message() << "\n";
    std::exit(2);
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    std::cerr << "sbxd: error: --tls-cert and --tls-key go together\n";
    std::exit(2);
  }
  // Bearer tokens in clear text over a network are stolen tokens (SECURITY.md): only loopback
  // may be served without TLS (e.g. behind a TLS-terminating proxy on the same host).
  if (!addr->loopback && flags.tls_cert.empty()) {
    std::cerr << "sbxd: error: --listen " << flags.listen
              << " is not a loopback address: serving the API (and its bearer tokens) there "
                 "needs TLS (--tls-cert, --tls-key)\n";
    std::exit(2);
  }
  if (flags.tokens_file.empty()) {
    std::cerr << "sbxd: error: --listen needs --tokens-file (the API has no anonymous access; "
                 "see sbxd hash-token)\n";
    std::exit(2);
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app{
      "sbxd — the sbx controller: keeps Databricks sandboxes and agent workers "
      "converged to the manifests in the store"};
  app.add_option("--db", flags.db,
                 "SQLite file, or postgres://user@host:port/db (env SBX_DB; default "
                 "$XDG_STATE_HOME/sbx/sbx.db)");
  app.add_option("--workers", flags.workers, "concurrent reconciles")->check(CLI::Range(1, 256));
  app.add_option("--resync", flags.resync, "re-reconcile every object this often");
  app.add_option("--sweep-interval", flags.sweep_interval, "LIST each workspace this often");
  app.add_option("--gc-grace", flags.gc_grace, "age before an orphan is garbage-collected");
  app.add_option("--page-size", flags.page_size, "LIST page size")->check(CLI::Range(1, 1000));
  app.add_option("--metrics-addr", flags.metrics_addr,
                 "host:port for /healthz, /readyz, /metrics (empty: off)");
  app.add_option("--log-format", flags.log_format, "text|json");
  app.add_option("--log-level", flags.log_level, "debug|info|warn|error");
  app.add_option("--identity", flags.identity, "leader lease holder name (default <host>-<pid>)");
  app.add_option("--lease-duration", flags.lease_duration,
                 "leader and workspace lease duration (a dead replica's work moves after this)");
  app.add_option("--work-split", flags.work_split,
                 "how replicas on one store share the work: workspace (each reconciles its share "
                 "of the workspaces), leader (one active, the others stand by), auto (workspace "
                 "for postgres://, leader for SQLite)")
      ->check(CLI::IsMember({"auto", "workspace", "leader"}));
  app.add_flag("--once", flags.once,
               "run one full pass and exit (non-zero if anything failed; 3 if a running sbxd "
               "holds the leader lease)");
  app.add_option("--executor-status-interval", flags.executor_status_interval,
                 "check a connected agent worker's environment this often");
  app.add_option("--executor-probe-interval", flags.executor_probe_interval,
                 "probe an agent worker's executor process in its sandbox this often");
  app.add_option("--openai-requests-per-second", flags.openai_requests_per_second,
                 "start pacing OpenAI API calls per workspace at this rate; it adapts up to "
                 "--openai-max-requests-per-second and down on a 429 (Databricks: Workspace "
                 "limits)")
      ->check(CLI::Range(0.1, 10000.0));
  app.add_option("--openai-max-requests-per-second", flags.openai_max_requests_per_second,
                 "the most the OpenAI pacing rises to per workspace (at most the start rate: "
                 "fixed)")
      ->check(CLI::Range(0.1, 10000.0));
  app.add_option("--databricks-max-requests-per-second", flags.databricks_max_requests_per_second,
                 "the most the Databricks pacing rises to per workspace (0: the Workspace's "
                 "limits.requestsPerSecond, default 15)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--secret-env-prefix", flags.secret_env_prefix,
                 "manifests may name only environment variables with this prefix in {env: NAME}");
  app.add_option("--secrets-dir", flags.secrets_dir,
                 "manifests' {file: NAME} are read from this directory only (default "
                 "$XDG_CONFIG_HOME/sbx/secrets, else /etc/sbx/secrets)");
  app.add_option("--secret-scope", flags.secret_scope,
                 "namespace: an object of namespace NS may name only {env: <prefix>NS_…} and "
                 "{file: NAME} under --secrets-dir/NS/ (or what --secret-grants grants NS); "
                 "global: every namespace may name every allowed source (single-team installs)")
      ->check(CLI::IsMember({"namespace", "global"}));
  app.add_option("--secret-grants", flags.secret_grants,
                 "a file of \"NAMESPACE SOURCE\" lines (SOURCE: env:NAME or file:NAME) granting "
                 "a shared secret source to a namespace; read at start");
  app.add_option("--compaction-interval", flags.compaction_interval,
                 "compact the store's change log to the revision of one interval ago, and "
                 "expire events, this often (0s: never)");
  app.add_option("--event-ttl", flags.event_ttl, "delete events last seen longer ago than this");
  app.add_option("--events-per-object", flags.events_per_object,
                 "keep at most this many events per object (the most recently seen)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--webhook-addr", flags.webhook_addr,
                 "host:port to receive the OpenAI service's signed webhooks on (empty: off); "
                 "the secret is OPENAI_WEBHOOK_SECRET");
  app.add_option("--webhook-path", flags.webhook_path, "the webhook endpoint's path");
  app.add_option("--listen", flags.listen,
                 "serve the REST API on host:port (empty: off; non-loopback needs TLS)");
  app.add_option("--tls-cert", flags.tls_cert, "PEM certificate (chain) for --listen");
  app.add_option("--tls-key", flags.tls_key, "PEM private key for --listen");
  app.add_option("--tokens-file", flags.tokens_file,
                 "bearer tokens for --listen, one \"NAME ROLE sha256:HEX\" per line");
  app.add_option("--max-request-bytes", flags.max_request_bytes,
                 "refuse API request bodies larger than this (default 16 MiB)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  app.add_option("--max-watches", flags.max_watches,
                 "concurrent API watches and log follows (default 1000)")
      ->check(CLI::Range(size_t{1}, size_t{100000}));
  app.add_option("--git-cache-dir", flags.git_cache_dir,
                 "where GitSources' repositories are fetched (default: git-cache next to an "
                 "SQLite --db, else $XDG_STATE_HOME/sbx/git-cache)");
  app.add_option("--git-timeout", flags.git_timeout, "how long one git fetch may take");
  app.add_option("--git-fetch-workers", flags.git_fetch_workers,
                 "GitSource fetches run at once, on threads of their own (never a reconcile "
                 "worker's)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--git-allow-file-urls", flags.git_allow_file_urls,
               "let GitSources name file:// repositories on this host");
  std::string hash_name;
  std::string hash_role;
  CLI::App* hash = app.add_subcommand(
      "hash-token", "read a token on stdin and print its --tokens-file line: NAME ROLE sha256:HEX");
  hash->add_option("name", hash_name, "the token's name (recorded in events)")->required();
  hash->add_option("role", hash_role, "viewer, editor or admin")->required();
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand(hash)) {
    return HashToken(hash_name, hash_role);
  }
  CheckApiFlags(flags);

  const std::optional<log::Format> format = log::ParseFormat(flags.log_format);
  const std::optional<log::Level> level = log::ParseLevel(flags.log_level);
  if (!format || !level) {
    std::cerr << "sbxd: error: --log-format must be text|json and --log-level "
                 "debug|info|warn|error\n";
    return 2;
  }
  log::Init(*format, *level);
  if (flags.db.empty()) {
    flags.db = DefaultDbPath();
  }
  const milliseconds resync = ParseFlagDuration("resync", flags.resync);
  const milliseconds sweep = ParseFlagDuration("sweep-interval", flags.sweep_interval);
  const milliseconds gc_grace = ParseFlagDuration("gc-grace", flags.gc_grace);
  const milliseconds lease = ParseFlagDuration("lease-duration", flags.lease_duration);
  const milliseconds compaction_interval =
      ParseFlagDuration("compaction-interval", flags.compaction_interval);
  const milliseconds event_ttl = ParseFlagDuration("event-ttl", flags.event_ttl);
  const milliseconds git_timeout = ParseFlagDuration("git-timeout", flags.git_timeout);
  if (flags.git_cache_dir.empty()) {
    // Next to an SQLite file; a PostgreSQL URL is no directory (its parent would be
    // "postgres:/user@host"), so the state directory then.
    const std::filesystem::path dir =
        IsPostgresUrl(flags.db) ? StateDir() : std::filesystem::path(flags.db).parent_path();
    flags.git_cache_dir = (dir / "git-cache").lexically_normal().string();
  }
  if (event_ttl.count() <= 0) {
    std::cerr << "sbxd: error: --event-ttl must be positive\n";
    return 2;
  }

  SecretPolicy secrets;
  secrets.env_prefix = flags.secret_env_prefix;
  secrets.secrets_dir = flags.secrets_dir;
  secrets.scope = ParseSecretScope(flags.secret_scope).value_or(SecretScope::kNamespace);
  if (secrets.secrets_dir.empty()) {
    secrets.secrets_dir = DefaultSecretsDir(databricks::ProcessEnv());
  }
  if (secrets.env_prefix.empty()) {
    std::cerr << "sbxd: error: --secret-env-prefix must not be empty (it would allow manifests "
                 "to name every variable of sbxd's environment)\n";
    return 2;
  }
  if (!flags.secret_grants.empty()) {
    if (secrets.scope == SecretScope::kGlobal) {
      std::cerr << "sbxd: error: --secret-grants needs --secret-scope=namespace (in global scope "
                   "every namespace may name every source)\n";
      return 2;
    }
    std::ifstream in(flags.secret_grants);
    if (!in) {
      std::cerr << "sbxd: error: --secret-grants " << flags.secret_grants << ": cannot be read\n";
      return 2;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    api::StatusOr<SecretGrants> grants =
        ParseSecretGrants(flags.secret_grants, text, secrets.env_prefix);
    if (!grants.ok()) {
      std::cerr << "sbxd: error: --secret-grants " << grants.status().message() << "\n";
      return 2;
    }
    secrets.grants = *std::move(grants);
  }
  // Scrubbed from every log line, status and event from the first line on (SECURITY.md).
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    environment.emplace_back(*e);
  }
  for (std::string& value : KnownSecretValues(secrets, environment)) {
    log::RegisterSecret(std::move(value));
  }

  // The webhook secret is the operator's own variable, like OPENAI_API_KEY (SECURITY.md).
  std::optional<WebhookSecret> webhook_secret;
  if (!flags.webhook_addr.empty() && !flags.once) {
    api::StatusOr<std::string> text =
        ResolveControllerEnv("OPENAI_WEBHOOK_SECRET", databricks::ProcessEnv(), "--webhook-addr");
    api::StatusOr<WebhookSecret> parsed =
        text.ok() ? WebhookSecret::Parse(*text) : api::StatusOr<WebhookSecret>(text.status());
    if (!parsed.ok()) {
      std::cerr << "sbxd: error: " << parsed.status().message() << "\n";
      return 2;
    }
    log::RegisterSecret(*text);
    webhook_secret = *std::move(parsed);
  }

  SignalStop signals;  // first, so every thread below inherits the blocked mask

  // A postgres:// URL opens a PostgresStore; otherwise SqliteStore::Open creates the missing
  // directories of the database 0700 and the file 0600.
  SqliteStore::Options store_options;
  store_options.max_events_per_object = flags.events_per_object;
  auto opened = OpenStore(flags.db, store_options);
  if (!opened.ok()) {
    log::Error("cannot open store", {{"error", opened.status().ToString()}});
    return 1;
  }
  std::unique_ptr<Store> opened_store = *std::move(opened);
  // Everything sbxd writes where people look passes the logger's secret registry.
  ScrubbingStore scrubbing(*opened_store, [](std::string_view text) { return log::Scrub(text); });
  Store* store = &scrubbing;

  SystemClock clock;
  Metrics metrics;
  // Replicas splitting workspaces (DESIGN §7.4): this replica's workspace leases. Its fence
  // guards every mutating cloud request; the Manager and the sweeper act only on its share.
  const bool split_by_workspace =
      flags.work_split == "workspace" || (flags.work_split == "auto" && IsPostgresUrl(flags.db));
  const std::string identity =
      flags.identity.empty() ? LeaderElector::DefaultIdentity() : flags.identity;
  const auto on_lease_error = [](std::string_view operation, const api::Status& error) {
    log::Warn("lease store error",
              {{"operation", std::string(operation)}, {"error", error.ToString()}});
  };
  std::optional<WorkspaceLeases> leases;
  if (split_by_workspace && !flags.once) {
    WorkspaceLeasesOptions lease_options;
    lease_options.identity = identity;
    lease_options.lease_duration = lease;
    lease_options.renew_interval = lease / 3;
    lease_options.on_store_error = on_lease_error;
    leases.emplace(*store, clock, lease_options);
  }
  std::unique_ptr<http::HttpTransport> plain = http::MakeCppRestTransport();
  CountingTransport transport(*plain, metrics, CloudApiOf);
  std::unique_ptr<http::StreamingTransport> streaming = http::MakeCppRestStreamingTransport();
  HttpCloudClientsOptions cloud_options;
  cloud_options.openai_requests_per_second = flags.openai_requests_per_second;
  cloud_options.openai_max_requests_per_second = flags.openai_max_requests_per_second;
  cloud_options.databricks_max_requests_per_second = flags.databricks_max_requests_per_second;
  cloud_options.on_secret = [](const std::string& secret) { log::RegisterSecret(secret); };
  cloud_options.secrets = secrets;
  cloud_options.fence = leases ? &*leases : nullptr;
  HttpCloudClients clouds(*store, clock, transport, *streaming, databricks::ProcessEnv(),
                          cloud_options);
  SandboxCache cache;
  GarbageCollector gc(*store, cache, clock, GarbageCollectorOptions{gc_grace});
  // Where the time of a convergence goes (bench/converge.sh): debug lines, one per milestone.
  MilestoneFn milestone;
  if (log::Enabled(log::Level::kDebug)) {
    milestone = [](const api::ObjectKey& object, std::string_view step) {
      log::Debug("timeline", {{"object", object.ToString()}, {"step", std::string(step)}});
    };
  }
  // Power OnDemand: shared by the Sandbox and AgentTask reconcilers (a stop never crosses a
  // submission); it queues sandboxes and records dependencies through the Manager.
  OnDemandPower power(*store);
  SandboxReconcilerOptions sandbox_options;
  sandbox_options.milestone = milestone;
  sandbox_options.power = &power;
  SandboxReconciler sandboxes(*store, clouds, cache, clock, sandbox_options);
  SandboxSweeperOptions sweeper_options;
  sweeper_options.period = sweep;
  sweeper_options.page_size = flags.page_size;
  if (leases) {
    sweeper_options.owns_workspace = [&leases](const std::string& workspace) {
      api::StatusOr<bool> owned = leases->Owns(workspace);
      return owned.ok() && *owned;
    };
  }
  SandboxSweeper sweeper(*store, clouds, cache, &gc, clock, sweeper_options);

  ManagerOptions manager_options;
  manager_options.workers = flags.workers;
  Manager manager(clock, manager_options);
  WakeHints wake_hints;
  AgentWorkerReconcilerOptions worker_options;
  worker_options.wake_hints = &wake_hints;
  worker_options.milestone = milestone;
  worker_options.schedule.status_interval =
      ParseFlagDuration("executor-status-interval", flags.executor_status_interval);
  worker_options.schedule.probe_interval =
      ParseFlagDuration("executor-probe-interval", flags.executor_probe_interval);
  AgentWorkerReconciler workers(*store, clouds, clock, &manager.dependencies(), worker_options);
  WorkspaceReconciler workspaces(*store, clouds, clock, &manager.dependencies());
  // One SSE stream per worker session, shared by its tasks (live task logs, turn outcomes
  // without polling). Not in a --once pass: it polls, as nothing would read the streams.
  TaskLogWriter task_log(*store);
  std::unique_ptr<SessionEventStreams> streams;
  if (!flags.once) {
    streams = std::make_unique<SessionEventStreams>(task_log, manager, clock);
  }
  AgentTaskReconcilerOptions task_options;
  task_options.power = &power;
  task_options.enqueuer = &manager;  // input POSTs in the background (held up to 5 minutes)
  task_options.scrub_artifact = [](std::string_view text) { return log::Scrub(text); };
  AgentTaskReconciler tasks(*store, clouds, clock, &manager.dependencies(), task_options,
                            streams.get());
  // GitSource: git runs with PATH and the proxy settings of sbxd's environment only.
  gitops::PosixProcessRunner git_runner;
  gitops::GitClientOptions git_options;
  git_options.cache_dir = flags.git_cache_dir;
  git_options.fetch_timeout = git_timeout;
  git_options.allow_file_urls = flags.git_allow_file_urls;
  for (const std::string& e : environment) {
    for (const char* name : {"PATH=", "http_proxy=", "https_proxy=", "no_proxy=", "HTTP_PROXY=",
                             "HTTPS_PROXY=", "NO_PROXY=", "SSL_CERT_FILE=", "SSL_CERT_DIR="}) {
      if (e.starts_with(name)) {
        git_options.environment.push_back(e);
      }
    }
  }
  gitops::GitClient git(git_runner, git_options);
  GitSourceReconcilerOptions git_source_options;
  git_source_options.validation.secret_env_prefix = secrets.env_prefix;
  // Fetches on threads of their own, never a reconcile worker (a --once pass waits for them).
  git_source_options.enqueuer = flags.once ? nullptr : &manager;
  git_source_options.fetch_workers = flags.git_fetch_workers;
  GitSourceReconciler git_sources(*store, clouds, git, clock, git_source_options);
  power.Attach([&manager](const api::ObjectKey& key) { manager.queue().Add(key); },
               &manager.dependencies());

  // The global lease: with --work-split leader, the one active sbxd; with workspace, the
  // replica that also does what belongs to no workspace (GitSources, objects whose references
  // do not exist yet) and compacts the change log.
  LeaderElectorOptions elector_options;
  elector_options.identity = identity;
  elector_options.lease_duration = lease;
  elector_options.renew_interval = lease / 3;
  elector_options.on_store_error = on_lease_error;
  LeaderElector elector(*store, clock, elector_options);
  if (leases) {
    manager.SetOwnership([&](const api::ObjectKey& key) -> api::StatusOr<bool> {
      ASSIGN_OR_RETURN(std::optional<std::string> workspace, WorkspaceOf(*store, key));
      return workspace ? leases->Owns(*workspace) : api::StatusOr<bool>(elector.is_leader());
    });
  }

  if (flags.once) {
    // The pass acts like a leader, so it holds the leader's lease — never next to a running sbxd.
    api::StatusOr<bool> held = elector.TryAcquire();
    if (!held.ok()) {
      log::Error("cannot take the leader lease", {{"error", held.status().ToString()}});
      return 1;
    }
    if (!*held) {
      std::cerr << LeaseHeldMessage(*store, elector_options.lease_name, DisplayDatabase(flags.db),
                                    clock);
      return kExitLeaseHeld;
    }
    // Replicas splitting workspaces hold member leases; a pass must not run next to them.
    if (std::optional<std::string> replica = LiveReplica(*store, clock)) {
      elector.Release();
      std::cerr << "sbxd: error: --once: sbxd replica \"" << *replica << "\" is reconciling "
                << DisplayDatabase(flags.db) << ", so no pass was run\n";
      return kExitLeaseHeld;
    }
    log::Info("took the leader lease for one pass",
              {{"lease", elector_options.lease_name}, {"identity", elector.identity()}});
    std::stop_source stop;
    signals.Start(stop);
    std::atomic<bool> lost{false};
    std::jthread renewals([&](std::stop_token own) {
      elector.RunRenewals(own, [&] {
        lost = true;
        log::Error("lost the leader lease; stopping the pass");
        stop.request_stop();
      });
    });
    NullEnqueuer sink;
    const int failures =
        RunOnce(*store, sweeper, {&sandboxes, &workers, &tasks, &workspaces, &git_sources}, sink,
                stop.get_token());
    renewals.request_stop();
    renewals.join();
    if (!lost) {
      elector.Release();
    }
    log::Info("pass complete", {{"failures", std::to_string(failures)}});
    return failures == 0 && !lost ? 0 : 1;
  }

  manager.Register(sandboxes);
  manager.Register(workers);
  manager.Register(workspaces);
  manager.Register(tasks);
  manager.Register(git_sources);
  const SourceErrorFn on_error = [](std::string_view source, const api::Status& error) {
    log::Warn("source error", {{"source", std::string(source)}, {"error", error.ToString()}});
  };
  StoreWatchOptions watch_options;
  watch_options.on_error = on_error;
  watch_options.wake_hints = &wake_hints;  // webhooks received by another replica
  StoreWatch watch(*store, clock, watch_options);
  PeriodicResyncOptions resync_options;
  resync_options.period = resync;
  resync_options.on_error = on_error;
  PeriodicResync resyncer(*store, clock, resync_options);
  manager.AddSource(watch);
  manager.AddSource(resyncer);
  manager.AddSource(sweeper);
  // The webhook endpoint: its receiver acts (enqueues) only while the Manager runs, the listener
  // answers from start-up on (503 while standby, so the sender retries).
  std::optional<WebhookVerifier> webhook_verifier;
  std::optional<WebhookReceiver> webhook_receiver;
  std::optional<WebhookServer> webhook_server;
  if (webhook_secret) {
    webhook_verifier.emplace(*webhook_secret, clock);
    webhook_receiver.emplace(
        *webhook_verifier, *store, wake_hints,
        WebhookReceiverOptions{.path = flags.webhook_path, .share_hints = leases.has_value()});
    manager.AddSource(*webhook_receiver);
    webhook_server.emplace(
        [&receiver = *webhook_receiver](const WebhookRequest& r) { return receiver.Handle(r); });
    api::StatusOr<int> port = webhook_server->Start(flags.webhook_addr);
    if (!port.ok()) {
      log::Error("cannot serve webhooks", {{"error", port.status().ToString()}});
      return 1;
    }
    log::Info("serving webhooks", {{"addr", flags.webhook_addr},
                                   {"port", std::to_string(*port)},
                                   {"path", flags.webhook_path}});
  }
  ReconcileMetrics reconcile_metrics(metrics);
  manager.SetObserver(&reconcile_metrics);

  metrics.AddCollector([&](Metrics& m) {
    const ManagerStats s = manager.Stats();
    m.gauge("sbx_workqueue_depth", "Keys ready to be reconciled", {})
        .Set(static_cast<double>(s.queue.depth));
    m.gauge("sbx_workqueue_waiting", "Keys waiting for a delay or backoff", {})
        .Set(static_cast<double>(s.queue.waiting));
    m.gauge("sbx_workqueue_processing", "Keys being reconciled", {})
        .Set(static_cast<double>(s.queue.processing));
    // Cumulative counts kept by the queue, sweeper and collector are counters (…_total).
    m.counter("sbx_workqueue_retries_total", "Rate-limited requeues", {})
        .RaiseTo(static_cast<double>(s.queue.retries_total));
    m.ResetGauges("sbx_sandboxes");  // a state nobody is in any more reads 0
    for (const auto& [state, n] : cache.CountByState()) {
      m.gauge("sbx_sandboxes", "Live sandboxes by state, as last observed", {{"state", state}})
          .Set(static_cast<double>(n));
    }
    m.gauge("sbx_leader", "1 while this sbxd holds the leader lease", {})
        .Set(elector.is_leader() ? 1 : 0);
    if (leases) {
      m.gauge("sbx_workspace_leases_held", "Workspaces this replica reconciles now", {})
          .Set(static_cast<double>(leases->Held().size()));
      m.counter("sbx_reconciles_not_owned_total",
                "Queued keys dropped because another replica owns their workspace", {})
          .RaiseTo(static_cast<double>(s.not_owned_total));
    }
    m.counter("sbx_sweeps_total", "Completed LIST sweeps", {})
        .RaiseTo(static_cast<double>(sweeper.sweeps_total()));
    for (const auto& [workspace, failed] : sweeper.SweepErrorsByWorkspace()) {
      m.counter("sbx_sweep_errors_total",
                "Failed sweeps (LIST, or garbage collection after it) by workspace",
                {{"workspace", workspace}})
          .RaiseTo(static_cast<double>(failed));
    }
    m.counter("sbx_gc_deleted_total", "Sandboxes deleted by garbage collection", {})
        .RaiseTo(static_cast<double>(gc.deleted_total()));
    m.counter("sbx_executor_exits_total",
              "Executors sbx launched and then found exited (crashed, killed or refused)", {})
        .RaiseTo(static_cast<double>(workers.executor_exits_total()));
    m.counter("sbx_executor_relaunches_total",
              "Executor launches after the first in a worker's session (after an exit, a stop)", {})
        .RaiseTo(static_cast<double>(workers.executor_relaunches_total()));
    if (streams != nullptr) {
      m.gauge("sbx_session_streams_open", "Agent session event streams (SSE) open now", {})
          .Set(streams->open_streams());
      m.counter("sbx_session_streams_opened_total",
                "Agent session event streams accepted, reconnects included", {})
          .RaiseTo(static_cast<double>(streams->opened_total()));
    }
    if (webhook_receiver) {
      for (const auto& [outcome, n] : webhook_receiver->Counts()) {
        m.counter("sbx_webhook_deliveries_total",
                  "Webhook deliveries by result (accepted, rejected, unavailable) and reason",
                  {{"result", outcome.first}, {"reason", outcome.second}})
            .RaiseTo(static_cast<double>(n));
      }
    }
    // Both results from the start: an alert on failures needs the series before the first one.
    m.counter("sbx_gitsource_syncs_total", "GitSource syncs by result (success, failure)",
              {{"result", "success"}})
        .RaiseTo(static_cast<double>(git_sources.syncs_succeeded()));
    m.counter("sbx_gitsource_syncs_total", "GitSource syncs by result (success, failure)",
              {{"result", "failure"}})
        .RaiseTo(static_cast<double>(git_sources.syncs_failed()));
    m.ResetGauges("sbx_gitsource_last_success_timestamp_seconds");  // a GitSource gone
    for (const auto& [key, seconds] : git_sources.LastSuccess()) {
      m.gauge("sbx_gitsource_last_success_timestamp_seconds",
              "When each GitSource last applied its commit (seconds since the epoch)",
              {{"namespace", key.first}, {"name", key.second}})
          .Set(seconds);
    }
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
  });
  HealthServer health(metrics, [&]() -> std::pair<bool, std::string> {
    if (!leases && !elector.is_leader()) {
      return {false, "standby: another sbxd holds the lease"};
    }
    if (watch.last_revision() < 0) {
      return {false, "initial sync in progress"};
    }
    return {true, "ok"};
  });
  if (!flags.metrics_addr.empty()) {
    api::StatusOr<int> port = health.Start(flags.metrics_addr);
    if (!port.ok()) {
      log::Error("cannot serve metrics", {{"error", port.status().ToString()}});
      return 1;
    }
    log::Info("serving health and metrics",
              {{"addr", flags.metrics_addr}, {"port", std::to_string(*port)}});
  }

  // The API server: its own connections to the store (one for requests, one for the watch
  // hub), so that reads neither wait for the controller's writes nor disturb its watch.
  std::unique_ptr<Store> api_store;
  std::unique_ptr<Store> api_watch_store;
  std::optional<apiserver::TokenTable> tokens;
  CloudSandboxCommands sandbox_commands(clouds);
  std::unique_ptr<apiserver::ApiServer> api_server;
  std::unique_ptr<apiserver::HttpServer> api_http;
  if (!flags.listen.empty()) {
    api::StatusOr<apiserver::TokenTable> loaded = apiserver::TokenTable::Load(flags.tokens_file);
    if (!loaded.ok()) {
      log::Error("cannot read the tokens file", {{"error", loaded.status().ToString()}});
      return 2;
    }
    tokens = *std::move(loaded);
    if (tokens->size() == 0) {
      log::Warn("the tokens file has no tokens: every API request will be refused",
                {{"file", flags.tokens_file}});
    }
    auto a = OpenStore(flags.db, store_options);
    auto w = a.ok() ? OpenStore(flags.db, store_options) : a.status();
    if (!a.ok() || !w.ok()) {
      log::Error("cannot open store for the API",
                 {{"error", (!a.ok() ? a.status() : w.status()).ToString()}});
      return 1;
    }
    api_store = *std::move(a);
    api_watch_store = *std::move(w);
    apiserver::ApiServerOptions api_options;
    api_options.validation.secret_env_prefix = secrets.env_prefix;
    api_options.max_watches = flags.max_watches;
    api_options.scrub_log = [](std::string_view text) { return log::Scrub(text); };
    api_server = std::make_unique<apiserver::ApiServer>(*api_store, *api_watch_store, *tokens,
                                                        &sandbox_commands, clock, api_options);
    if (api::Status started = api_server->Start(); !started.ok()) {
      log::Error("cannot start the API server", {{"error", started.ToString()}});
      return 1;
    }
    apiserver::HttpServerOptions http_options;
    http_options.tls_cert_file = flags.tls_cert;
    http_options.tls_key_file = flags.tls_key;
    http_options.max_body_bytes = flags.max_request_bytes;
    // Every watch holds a connection: leave room for ordinary requests beside them.
    http_options.max_connections = flags.max_watches + 256;
    // The token is checked from the head; no anonymous body is read (#24).
    http_options.check_head = [&server = *api_server](const apiserver::HttpRequest& head) {
      return server.CheckHead(head);
    };
    api_http = std::make_unique<apiserver::HttpServer>(
        [&server = *api_server](apiserver::HttpExchange& x) { server.Handle(x); }, http_options);
    const apiserver::ListenAddress addr = *apiserver::ParseListenAddress(flags.listen);
    api::StatusOr<int> port = api_http->Start(addr.host, addr.port);
    if (!port.ok()) {
      log::Error("cannot serve the API", {{"error", port.status().ToString()}});
      return 1;
    }
    log::Info("serving the API", {{"addr", flags.listen},
                                  {"port", std::to_string(*port)},
                                  {"tls", flags.tls_cert.empty() ? "off" : "on"},
                                  {"tokens", std::to_string(tokens->size())}});
  }
  const auto stop_api = [&] {
    if (api_server) {
      api_server->Stop();  // ends watches and follows first, so the HTTP threads can be joined
    }
    if (api_http) {
      api_http->Stop();
    }
  };

  std::stop_source stop;
  signals.Start(stop);
  log::Info("starting", {{"db", DisplayDatabase(flags.db)},
                         {"identity", elector.identity()},
                         {"work_split", leases ? "workspace" : "leader"},
                         {"workers", std::to_string(flags.workers)}});
  // What a replica that just took work over must look at: everything (the gate drops the rest).
  const auto enqueue_all = [&] {
    api::StatusOr<std::vector<api::Object>> all = store->List(ListOptions{});
    if (!all.ok()) {
      log::Warn("cannot list objects to enqueue", {{"error", all.status().ToString()}});
      return;
    }
    for (const api::Object& o : *all) {
      manager.queue().Add(api::KeyOf(o));
    }
  };
  std::atomic<bool> lost{false};
  std::jthread renewals;
  std::jthread workspace_rounds;
  if (leases) {
    // Every replica works from the start on its share; the global lease moves between them.
    manager.Start();
    renewals = std::jthread([&](std::stop_token own) {
      while (elector.WaitUntilLeader(own)) {
        log::Info("took the global lease", {{"lease", elector_options.lease_name}});
        enqueue_all();
        elector.RunRenewals(own, [] { log::Warn("lost the global lease"); });
      }
    });
    workspace_rounds = std::jthread([&](std::stop_token own) {
      leases->Run(own, [&](const WorkspaceLeases::Round& round) {
        for (const std::string& w : round.lost) {
          log::Warn("lost a workspace lease", {{"workspace", w}});
        }
        for (const std::string& w : round.released) {
          log::Info("gave a workspace up",
                    {{"workspace", w}, {"replicas", std::to_string(round.members)}});
        }
        for (const std::string& w : round.acquired) {
          log::Info("took a workspace", {{"workspace", w},
                                         {"token", std::to_string(leases->Token(w).value_or(0))},
                                         {"replicas", std::to_string(round.members)}});
        }
        if (!round.acquired.empty()) {
          enqueue_all();
        }
      });
    });
  } else {
    if (!elector.WaitUntilLeader(stop.get_token())) {
      if (webhook_server) {
        webhook_server->Stop();
      }
      stop_api();
      health.Stop();
      log::Info("stopped while standby");
      return 0;
    }
    log::Info("became leader", {{"lease", elector_options.lease_name}});
    manager.Start();
    renewals = std::jthread([&](std::stop_token own) {
      elector.RunRenewals(own, [&] {
        lost = true;
        log::Error("lost the leader lease; stopping");
        stop.request_stop();
      });
    });
  }
  // Only the leader compacts; never past its own watch, so it never has to re-list for it.
  StoreCompactorOptions compactor_options;
  compactor_options.interval = compaction_interval;
  compactor_options.event_ttl = event_ttl;
  // Split by workspace: only the global lease's holder compacts (the others expire events).
  compactor_options.watermark = [&] {
    return !leases || elector.is_leader() ? watch.last_revision() : -1;
  };
  std::jthread compaction;
  if (compaction_interval.count() > 0) {
    compaction = std::jthread([&](std::stop_token own) {
      StoreCompactor compactor(*store, clock, compactor_options);
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
  if (streams != nullptr) {
    streams->Stop();  // closes every session stream; a pass still running falls back to polling
  }
  stop_api();
  manager.Stop();
  compaction = {};  // stops and joins
  workspace_rounds = {};
  renewals = {};
  if (leases) {
    leases->ReleaseAll();  // the others take over at their next round, not after an expiry
  }
  if (!lost) {
    elector.Release();
  }
  if (webhook_server) {
    webhook_server->Stop();
  }
  health.Stop();
  log::Info("stopped");
  return lost ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return sbx::cli::RunGuarded("sbxd", [&] { return Main(argc, argv); });
}
