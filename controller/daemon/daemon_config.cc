#include "controller/daemon/daemon_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "api/duration.h"
#include "controller/apiserver/http_server.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/engine/leader_elector.h"
#include "controller/store/postgres_store.h"

namespace sbx::controller::daemon {
namespace {

api::Status FlagError(std::string_view flag, std::string_view problem) {
  return api::InvalidArgumentError("--" + std::string(flag) + ": " + std::string(problem));
}

api::StatusOr<std::chrono::milliseconds> Duration(std::string_view flag, const std::string& text) {
  api::StatusOr<std::chrono::seconds> d = api::ParseDuration(text);
  if (!d.ok()) {
    return FlagError(flag, d.status().message());
  }
  return std::chrono::milliseconds(*d);
}

std::string DefaultDbPath() {
  if (const char* env = std::getenv("SBX_DB"); env != nullptr && *env != '\0') {
    return env;
  }
  return (std::filesystem::path(StateDir()) / "sbx.db").string();
}

// The API server's flags: TLS and tokens only with --listen; clear text only on loopback.
api::Status CheckApiFlags(const DaemonFlags& flags) {
  if (flags.listen.empty()) {
    if (!flags.tls_cert.empty() || !flags.tls_key.empty() || !flags.tokens_file.empty()) {
      return FlagError("listen", "--tls-cert, --tls-key and --tokens-file need --listen");
    }
    return api::OkStatus();
  }
  api::StatusOr<apiserver::ListenAddress> addr = apiserver::ParseListenAddress(flags.listen);
  if (!addr.ok()) {
    return FlagError("listen", addr.status().message());
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return FlagError("tls-cert", "--tls-cert and --tls-key go together");
  }
  // Bearer tokens in clear text over a network are stolen tokens (SECURITY.md): only loopback
  // may be served without TLS (e.g. behind a TLS-terminating proxy on the same host).
  if (!addr->loopback && flags.tls_cert.empty()) {
    return FlagError("listen", flags.listen +
                                   " is not a loopback address: serving the API (and its bearer "
                                   "tokens) there needs TLS (--tls-cert, --tls-key)");
  }
  if (flags.tokens_file.empty()) {
    return FlagError("listen",
                     "needs --tokens-file (the API has no anonymous access; see sbxd hash-token)");
  }
  return api::OkStatus();
}

// The secret sources manifests may name: the prefix, the directory, the scope and the grants.
api::StatusOr<SecretPolicy> ResolveSecrets(const DaemonFlags& flags) {
  SecretPolicy secrets;
  secrets.env_prefix = flags.secret_env_prefix;
  secrets.secrets_dir = flags.secrets_dir;
  const std::optional<SecretScope> scope = ParseSecretScope(flags.secret_scope);
  if (!scope) {
    return FlagError("secret-scope", "must be namespace or global");
  }
  secrets.scope = *scope;
  if (secrets.secrets_dir.empty()) {
    secrets.secrets_dir = DefaultSecretsDir(databricks::ProcessEnv());
  }
  if (secrets.env_prefix.empty()) {
    return FlagError("secret-env-prefix",
                     "must not be empty (it would allow manifests to name every variable of "
                     "sbxd's environment)");
  }
  if (flags.secret_grants.empty()) {
    return secrets;
  }
  if (secrets.scope == SecretScope::kGlobal) {
    return FlagError("secret-grants",
                     "needs --secret-scope=namespace (in global scope every namespace may name "
                     "every source)");
  }
  std::ifstream in(flags.secret_grants);
  if (!in) {
    return FlagError("secret-grants", flags.secret_grants + ": cannot be read");
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  api::StatusOr<SecretGrants> grants =
      ParseSecretGrants(flags.secret_grants, text, secrets.env_prefix);
  if (!grants.ok()) {
    return grants.status().Annotate("--secret-grants");
  }
  secrets.grants = *std::move(grants);
  return secrets;
}

}  // namespace

std::string StateDir() {
  std::filesystem::path base;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state != '\0') {
    base = state;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::filesystem::path(home) / ".local" / "state";
  } else {
    base = ".";
  }
  return (base / "sbx").string();
}

api::StatusOr<DaemonConfig> ResolveConfig(const DaemonFlags& flags,
                                          std::vector<std::string> environment) {
  RETURN_IF_ERROR(CheckApiFlags(flags));
  DaemonConfig c;
  const std::optional<log::Format> format = log::ParseFormat(flags.log_format);
  if (!format) {
    return FlagError("log-format", "must be text or json");
  }
  const std::optional<log::Level> level = log::ParseLevel(flags.log_level);
  if (!level) {
    return FlagError("log-level", "must be debug, info, warn or error");
  }
  c.log_format = *format;
  c.log_level = *level;
  c.db = flags.db.empty() ? DefaultDbPath() : flags.db;
  c.workers = flags.workers;
  c.pacing_give_back = flags.pacing_give_back;
  c.page_size = flags.page_size;
  c.metrics_addr = flags.metrics_addr;
  ASSIGN_OR_RETURN(c.resync, Duration("resync", flags.resync));
  ASSIGN_OR_RETURN(c.sweep_interval, Duration("sweep-interval", flags.sweep_interval));
  ASSIGN_OR_RETURN(c.gc_grace, Duration("gc-grace", flags.gc_grace));
  ASSIGN_OR_RETURN(c.lease_duration, Duration("lease-duration", flags.lease_duration));
  ASSIGN_OR_RETURN(c.compaction_interval,
                   Duration("compaction-interval", flags.compaction_interval));
  ASSIGN_OR_RETURN(c.event_ttl, Duration("event-ttl", flags.event_ttl));
  if (api::StatusOr<std::chrono::seconds> retention =
          api::ParseDurationOrDays(flags.audit_retention);
      retention.ok()) {
    c.audit_retention = *retention;
  } else {
    return FlagError("audit-retention", retention.status().message());
  }
  c.audit_log = flags.audit_log;
  ASSIGN_OR_RETURN(c.git_timeout, Duration("git-timeout", flags.git_timeout));
  ASSIGN_OR_RETURN(c.executor_status_interval,
                   Duration("executor-status-interval", flags.executor_status_interval));
  ASSIGN_OR_RETURN(c.executor_probe_interval,
                   Duration("executor-probe-interval", flags.executor_probe_interval));
  if (c.event_ttl.count() <= 0) {
    return FlagError("event-ttl", "must be positive");
  }
  c.identity = flags.identity.empty() ? LeaderElector::DefaultIdentity() : flags.identity;
  c.split_by_workspace =
      flags.work_split == "workspace" || (flags.work_split == "auto" && IsPostgresUrl(c.db));
  c.once = flags.once;
  ASSIGN_OR_RETURN(c.secrets, ResolveSecrets(flags));
  c.environment = std::move(environment);
  c.openai_requests_per_second = flags.openai_requests_per_second;
  c.openai_max_requests_per_second = flags.openai_max_requests_per_second;
  c.databricks_max_requests_per_second = flags.databricks_max_requests_per_second;
  c.events_per_object = flags.events_per_object;
  c.webhook_addr = flags.webhook_addr;
  c.webhook_path = flags.webhook_path;
  // The webhook secret is the operator's own variable, like OPENAI_API_KEY (SECURITY.md).
  if (!flags.webhook_addr.empty() && !flags.once) {
    ASSIGN_OR_RETURN(
        std::string text,
        ResolveControllerEnv("OPENAI_WEBHOOK_SECRET", databricks::ProcessEnv(), "--webhook-addr"));
    ASSIGN_OR_RETURN(c.webhook_secret, WebhookSecret::Parse(text));
  }
  c.listen = flags.listen;
  c.tls_cert = flags.tls_cert;
  c.tls_key = flags.tls_key;
  c.tokens_file = flags.tokens_file;
  c.max_request_bytes = flags.max_request_bytes;
  c.max_watches = flags.max_watches;
  c.git_cache_dir = flags.git_cache_dir;
  if (c.git_cache_dir.empty()) {
    // Next to an SQLite file; a PostgreSQL URL is no directory (its parent would be
    // "postgres:/user@host"), so the state directory then.
    const std::filesystem::path dir = IsPostgresUrl(c.db)
                                          ? std::filesystem::path(StateDir())
                                          : std::filesystem::path(c.db).parent_path();
    c.git_cache_dir = (dir / "git-cache").lexically_normal().string();
  }
  c.git_fetch_workers = flags.git_fetch_workers;
  c.git_allow_file_urls = flags.git_allow_file_urls;
  return c;
}

}  // namespace sbx::controller::daemon
