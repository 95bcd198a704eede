// sbxd: the controller daemon (DESIGN §4). main parses the flags into a DaemonConfig, builds a
// controller/daemon Daemon from it and runs it until SIGTERM/SIGINT: leader election on the
// store, then the Manager (workers, store watch, periodic resync, live-state sweeper with
// garbage collection) and the health/metrics server. `--once` runs one full pass instead and
// exits non-zero if anything failed; it takes the same leader lease first and exits
// kExitLeaseHeld when a running sbxd holds it.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <thread>

#include "cli/main_guard.h"
#include "controller/apiserver/tokens.h"
#include "controller/daemon/daemon.h"
#include "controller/server/log.h"

extern char** environ;

namespace {

using namespace sbx;
using namespace sbx::controller;
using daemon::DaemonFlags;

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
  std::stop_token Start() {
    waiter_ = std::jthread([this](std::stop_token own) {
      while (!own.stop_requested()) {
        timespec timeout{0, 200'000'000};
        const int sig = sigtimedwait(&set_, nullptr, &timeout);
        if (sig == SIGTERM || sig == SIGINT) {
          log::Info("signal", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
          stop_.request_stop();
          return;
        }
      }
    });
    return stop_.get_token();
  }

 private:
  sigset_t set_;
  std::stop_source stop_;
  std::jthread waiter_;
};

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

void AddFlags(CLI::App& app, DaemonFlags& flags) {
  app.add_option("--db", flags.db,
                 "SQLite file, or postgres://user@host:port/db (env SBX_DB; default "
                 "$XDG_STATE_HOME/sbx/sbx.db)");
  app.add_option("--workers", flags.workers, "concurrent reconciles")->check(CLI::Range(1, 256));
  app.add_flag("--pacing-give-back,!--no-pacing-give-back", flags.pacing_give_back,
               "a reconcile that would wait for the API's rate gives its thread back and comes "
               "back at its place in line (default on; --no-pacing-give-back waits inline)");
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
  app.add_option("--audit-log", flags.audit_log,
                 "also append every audit record to this file as a JSON line, for a SIEM "
                 "(resumes after its last line; mode 0600)");
  app.add_option("--audit-retention", flags.audit_retention,
                 "delete audit records older than this (e.g. 90d, 2160h; 0: keep forever)");
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
}

// Parses, builds, runs: every decision is the Daemon's.
int Main(int argc, char** argv) {
  DaemonFlags flags;
  CLI::App app{
      "sbxd — the sbx controller: keeps Databricks sandboxes and agent workers "
      "converged to the manifests in the store"};
  AddFlags(app, flags);
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
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    environment.emplace_back(*e);
  }
  api::StatusOr<daemon::DaemonConfig> config = daemon::ResolveConfig(flags, environment);
  if (!config.ok()) {
    std::cerr << "sbxd: error: " << config.status().message() << "\n";
    return 2;
  }
  log::Init(config->log_format, config->log_level);
  SignalStop signals;  // before the daemon starts any thread: every thread inherits the mask
  const bool once = config->once;
  api::StatusOr<std::unique_ptr<daemon::Daemon>> sbxd = daemon::Daemon::Create(*std::move(config));
  if (!sbxd.ok()) {
    log::Error("cannot start", {{"error", sbxd.status().ToString()}});
    return sbxd.status().code() == api::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (once) {
    return (*sbxd)->RunOnce(signals.Start(), std::cerr);
  }
  if (api::Status served = (*sbxd)->Serve(); !served.ok()) {
    log::Error("cannot serve", {{"error", served.ToString()}});
    return 1;
  }
  return (*sbxd)->Run(signals.Start());
}

}  // namespace

int main(int argc, char** argv) {
  return sbx::cli::RunGuarded("sbxd", [&] { return Main(argc, argv); });
}
