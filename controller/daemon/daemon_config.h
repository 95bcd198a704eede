// What sbxd is told, in two forms (DESIGN §4, issue #26): DaemonFlags, the flags as the operator
// typed them (cli/sbxd_main.cc binds them with CLI11), and DaemonConfig, the same checked and
// resolved: durations parsed, defaults filled in, the secret policy and the webhook secret read.
// A Daemon (daemon.h) is built from a DaemonConfig alone, so a test builds one directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"
#include "controller/cloud/secret_resolver.h"
#include "controller/server/log.h"
#include "controller/webhook/webhook_verifier.h"

namespace sbx::controller::daemon {

// The flags of `sbxd`, as text where the text needs checking (durations), with their defaults.
struct DaemonFlags {
  std::string db;  // empty: $SBX_DB, else $XDG_STATE_HOME/sbx/sbx.db
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
  // The audit log (DESIGN §8.3): a JSON-lines copy for a SIEM (empty: none), and how long the
  // store keeps records ("90d"; "0": forever).
  std::string audit_log;
  std::string audit_retention = "90d";
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
  bool pacing_give_back = true;  // ManagerOptions::defer_pacing
};

// DaemonFlags checked and resolved. Every field is what the Daemon uses as is.
struct DaemonConfig {
  std::string db;  // a file path or a postgres:// URL, never empty
  int workers = 4;
  std::chrono::milliseconds resync{std::chrono::minutes(5)};
  std::chrono::milliseconds sweep_interval{std::chrono::seconds(60)};
  std::chrono::milliseconds gc_grace{std::chrono::minutes(5)};
  int page_size = 100;
  std::string metrics_addr = "127.0.0.1:9090";  // empty: no health/metrics server
  log::Format log_format = log::Format::kText;
  log::Level log_level = log::Level::kInfo;
  std::string identity;  // never empty: the flag, else <host>-<pid>
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  bool split_by_workspace = false;  // --work-split resolved against the store's kind
  bool pacing_give_back = true;     // ManagerOptions::defer_pacing
  bool once = false;
  SecretPolicy secrets;                  // its secrets_dir resolved, its grants read
  std::vector<std::string> environment;  // sbxd's own, "NAME=VALUE" each
  std::chrono::milliseconds executor_status_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds executor_probe_interval{std::chrono::minutes(5)};
  double openai_requests_per_second = 10;
  double openai_max_requests_per_second = 100;
  double databricks_max_requests_per_second = 0;
  std::chrono::milliseconds compaction_interval{std::chrono::minutes(5)};  // 0: never
  std::chrono::milliseconds event_ttl{std::chrono::hours(1)};              // positive
  int events_per_object = 100;
  std::string audit_log;                                                   // empty: none
  std::chrono::milliseconds audit_retention{std::chrono::hours(24 * 90)};  // 0: forever
  std::string webhook_addr;  // empty: no webhook endpoint
  std::string webhook_path = "/webhooks/openai";
  std::optional<WebhookSecret> webhook_secret;  // set iff webhook_addr is (and not once)
  std::string listen;                           // empty: no API server
  std::string tls_cert;
  std::string tls_key;
  std::string tokens_file;
  size_t max_request_bytes = size_t{16} << 20;
  size_t max_watches = 1000;
  std::string git_cache_dir;  // never empty
  std::chrono::milliseconds git_timeout{std::chrono::minutes(2)};
  size_t git_fetch_workers = 2;
  bool git_allow_file_urls = false;
};

// Checks `flags` and resolves them against `environment` (sbxd's, "NAME=VALUE" each; also read
// through the process environment for OPENAI_WEBHOOK_SECRET and XDG_CONFIG_HOME). Reads the
// --secret-grants file. kInvalidArgument "--flag: problem" for the first problem found; the
// message names no secret value.
api::StatusOr<DaemonConfig> ResolveConfig(const DaemonFlags& flags,
                                          std::vector<std::string> environment);

// $XDG_STATE_HOME/sbx (else ~/.local/state/sbx): where sbxd keeps what it writes to disk.
std::string StateDir();

}  // namespace sbx::controller::daemon
