#include "api/validation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "api/defaults.h"
#include "api/duration.h"
#include "api/kinds.h"

namespace sbx::api {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// One line, whatever the input: label keys and values may hold control characters.
Status Invalid(std::string_view path, std::string_view problem) {
  std::string line;
  for (char c : std::string(path) + ": " + std::string(problem)) {
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else {
      line += c;
    }
  }
  return InvalidArgumentError(std::move(line));
}

bool HasControlChars(std::string_view s, bool allow_newlines) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0x7f || (u < 0x20 && !(allow_newlines && (c == '\n' || c == '\t' || c == '\r')))) {
      return true;
    }
  }
  return false;
}

// Label name part: 1–63 of [A-Za-z0-9-_.], starting and ending alphanumeric (Kubernetes).
std::string ValidateQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63) {
    return "must be 1–63 characters";
  }
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) {
    return "must start and end with a letter or digit";
  }
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return "may contain only letters, digits, '-', '_' and '.'";
    }
  }
  return "";
}

// DNS-1123 subdomain: dot-separated labels, ≤ 253 characters.
std::string ValidateDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return "must be 1–253 characters";
  }
  size_t start = 0;
  while (start <= s.size()) {
    const size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!ValidateDnsLabel(label).empty()) {
      return "must be a DNS subdomain (lowercase labels separated by '.')";
    }
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  return "";
}

// Label/annotation key: [prefix/]name as in Kubernetes.
std::string ValidateKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    if (std::string p = ValidateDnsSubdomain(key.substr(0, slash)); !p.empty()) {
      return "invalid key prefix " + Quote(key.substr(0, slash)) + ": " + p;
    }
    key = key.substr(slash + 1);
  }
  if (std::string p = ValidateQualifiedNamePart(key); !p.empty()) {
    return "invalid key " + Quote(key) + ": " + p;
  }
  return "";
}

// Label keys and values (a value may be empty), under `prefix` ("metadata.labels").
Status ValidateLabels(std::string_view prefix, const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labels) {
    const std::string path = std::string(prefix) + "." + key;
    if (std::string p = ValidateKey(key); !p.empty()) {
      return Invalid(path, p);
    }
    if (!value.empty()) {
      if (std::string p = ValidateQualifiedNamePart(value); !p.empty()) {
        return Invalid(path, "invalid value " + Quote(value) + ": " + p);
      }
    }
  }
  return OkStatus();
}

Status ValidateMeta(const ObjectMeta& m) {
  if (m.name.empty()) {
    return Invalid("metadata.name", "is required");
  }
  if (std::string p = ValidateDnsLabel(m.name); !p.empty()) {
    return Invalid("metadata.name", "invalid name " + Quote(m.name) + ": " + p);
  }
  if (std::string p = ValidateDnsLabel(m.namespace_); !p.empty()) {
    return Invalid("metadata.namespace", "invalid namespace " + Quote(m.namespace_) + ": " + p);
  }
  RETURN_IF_ERROR(ValidateLabels("metadata.labels", m.labels));
  size_t annotation_bytes = 0;
  for (const auto& [key, value] : m.annotations) {
    if (std::string p = ValidateKey(key); !p.empty()) {
      return Invalid("metadata.annotations." + key, p);
    }
    annotation_bytes += key.size() + value.size();
  }
  constexpr size_t kMaxAnnotationBytes = size_t{256} * 1024;  // as Kubernetes
  if (annotation_bytes > kMaxAnnotationBytes) {
    return Invalid("metadata.annotations", "total size must be at most 256 KiB");
  }
  return OkStatus();
}

// "user@host:port" of "scheme://user@host:port/path?query"; nullopt without "://".
std::optional<std::string_view> Authority(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view rest = url.substr(scheme_end + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

bool IsEnvName(std::string_view s) {
  if (s.empty() || (s.front() >= '0' && s.front() <= '9')) {
    return false;
  }
  for (char c : s) {
    if (!IsAlnum(c) && c != '_') {
      return false;
    }
  }
  return true;
}

std::string ValidateEnvName(std::string_view name) {
  if (IsEnvName(name)) {
    return "";
  }
  return "invalid environment variable name " + Quote(name) +
         " (expected letters, digits and '_', not starting with a digit)";
}

Status ValidateUrl(std::string_view path, std::string_view url) {
  if (url.empty()) {
    return OkStatus();
  }
  if (std::string problem = ValidateServiceUrl(url); !problem.empty()) {
    return Invalid(path, problem);
  }
  return OkStatus();
}

Status ValidateWorkspace(const WorkspaceSpec& s, const ValidationOptions& o) {
  RETURN_IF_ERROR(ValidateUrl("spec.databricks.host", s.databricks.host));
  RETURN_IF_ERROR(
      ValidateSecretRef("spec.databricks.tokenFrom", s.databricks.token_from, o.secret_env_prefix));
  RETURN_IF_ERROR(ValidateSecretRef("spec.databricks.clientIdFrom", s.databricks.client_id_from,
                                    o.secret_env_prefix));
  RETURN_IF_ERROR(ValidateSecretRef("spec.databricks.clientSecretFrom",
                                    s.databricks.client_secret_from, o.secret_env_prefix));
  if (s.databricks.client_id_from.empty() != s.databricks.client_secret_from.empty()) {
    return Invalid(s.databricks.client_id_from.empty() ? "spec.databricks.clientIdFrom"
                                                       : "spec.databricks.clientSecretFrom",
                   "OAuth machine-to-machine needs both clientIdFrom and clientSecretFrom");
  }
  RETURN_IF_ERROR(ValidateUrl("spec.openai.baseUrl", s.openai.base_url));
  RETURN_IF_ERROR(
      ValidateSecretRef("spec.openai.apiKeyFrom", s.openai.api_key_from, o.secret_env_prefix));
  if (!std::isfinite(s.limits.requests_per_second) || s.limits.requests_per_second < 0) {
    return Invalid("spec.limits.requestsPerSecond", "must be a non-negative number (0 = default)");
  }
  if (s.limits.max_sandboxes < 0) {
    return Invalid("spec.limits.maxSandboxes", "must not be negative (0 = no limit of ours)");
  }
  if (s.limits.max_concurrent_tasks < 0) {
    return Invalid("spec.limits.maxConcurrentTasks", "must not be negative (0 = no limit)");
  }
  if (s.budget) {
    if (s.budget->tokens && *s.budget->tokens < 0) {
      return Invalid("spec.budget.tokens", "must not be negative");
    }
    if (s.budget->cost && !s.pricing) {
      return Invalid("spec.budget.cost", "a cost budget needs spec.pricing to compute the cost");
    }
  }
  return OkStatus();
}

// Setup step names name status entries and marker files in the sandbox: a path-safe set.
std::string ValidateStepName(std::string_view s) {
  if (s.empty()) {
    return "is required";
  }
  if (s.size() > 63) {
    return "must be at most 63 characters";
  }
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return "invalid step name " + Quote(s) +
             ": may contain only letters, digits, '-', '_' and '.'";
    }
  }
  return "";
}

Status ValidateSandbox(std::string_view prefix, const SandboxSpec& s) {
  const std::string p(prefix);
  if (std::string problem = ValidateDnsLabel(s.workspace_ref); !problem.empty()) {
    return Invalid(p + ".workspaceRef",
                   "invalid Workspace name " + Quote(s.workspace_ref) + ": " + problem);
  }
  // The characters the API allows in sandbox_id are undocumented (reference: "not
  // documented"); the id travels in URL paths, so we accept only the safe DNS-1123 label set.
  if (std::string problem = ValidateDnsLabel(s.sandbox_id); !problem.empty()) {
    return Invalid(p + ".sandboxId",
                   "invalid sandbox id " + Quote(s.sandbox_id) + ": " + problem +
                       (s.sandbox_id.size() > 63 ? " (the default is <namespace>-<name>; set "
                                                   "sandboxId explicitly)"
                                                 : ""));
  }
  // The docs say 256 characters, the SDKs say bytes: bytes is the safe reading.
  if (s.display_name.size() > 256) {
    return Invalid(p + ".displayName", "must be at most 256 bytes");
  }
  if (HasControlChars(s.display_name, false)) {
    return Invalid(p + ".displayName", "must not contain control characters");
  }
  // The API's minimum and maximum inactivity_timeout are not documented. We require at most
  // 24h, the maximum the lakebox CLI documents for the same auto-stop (reference: "1 min–24 h";
  // unconfirmed for this API), and let the API reject what else it does not accept
  // (Synced=False). Unbounded, 99999999999h reached our own time arithmetic.
  // 0 turns auto-stop off (the seed: "set inactivity_timeout to 0 or leave the field unset").
  if (s.inactivity_timeout.has_value() && s.inactivity_timeout->count() < 0) {
    return Invalid(p + ".inactivityTimeout", "must not be negative (0 = auto-stop off)");
  }
  constexpr std::chrono::hours kMaxInactivityTimeout{24};
  if (s.inactivity_timeout.has_value() && *s.inactivity_timeout > kMaxInactivityTimeout) {
    return Invalid(p + ".inactivityTimeout",
                   "must be at most " + FormatDuration(kMaxInactivityTimeout));
  }
  // idleStop: from 1s (tests use seconds) to a day. It is used with power OnDemand only and
  // accepted (unused) with the others, so that switching power is a one-field patch.
  if (s.idle_stop.has_value()) {
    if (*s.idle_stop < kMinIdleStop || *s.idle_stop > kMaxIdleStop) {
      return Invalid(p + ".idleStop", "must be between " + FormatDuration(kMinIdleStop) + " and " +
                                          FormatDuration(kMaxIdleStop) + ", not " +
                                          FormatDuration(*s.idle_stop));
    }
  }
  for (char c : s.image) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x20) {
      return Invalid(p + ".image", "must not contain spaces or control characters");
    }
  }
  std::set<std::string_view> names;
  for (size_t i = 0; i < s.setup.size(); ++i) {
    const SetupStep& step = s.setup[i];
    const std::string sp = p + ".setup[" + std::to_string(i) + "]";
    if (std::string problem = ValidateStepName(step.name); !problem.empty()) {
      return Invalid(sp + ".name", problem);
    }
    if (!names.insert(step.name).second) {
      return Invalid(sp + ".name", "duplicate step name " + Quote(step.name));
    }
    if (step.run.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Invalid(sp + ".run", "is required (a bash script)");
    }
    if (step.timeout.count() <= 0) {
      return Invalid(sp + ".timeout", "must be greater than 0");
    }
    // A step runs as one exec-sync call whose maximum execution_timeout is undocumented; a
    // setup step that needs more than a day is a mistake, and 24h keeps the HTTP timeout
    // derived from it (in milliseconds) far from overflow.
    constexpr std::chrono::hours kMaxSetupTimeout{24};
    if (step.timeout > kMaxSetupTimeout) {
      return Invalid(sp + ".timeout", "must be at most " + FormatDuration(kMaxSetupTimeout));
    }
  }
  return OkStatus();
}

// `prefix`: where the spec sits ("spec", or "spec.template.spec" in an AgentPool).
Status ValidateAgentWorker(std::string_view prefix, const AgentWorkerSpec& s,
                           const ValidationOptions& o) {
  const std::string p(prefix);
  const bool has_ref = !s.sandbox_ref.empty();
  if (has_ref == s.sandbox.has_value()) {
    return Invalid(p, has_ref ? "set exactly one of sandboxRef or sandbox, not both"
                              : "set exactly one of sandboxRef or sandbox");
  }
  if (has_ref) {
    if (std::string p = ValidateDnsLabel(s.sandbox_ref); !p.empty()) {
      return Invalid(p + ".sandboxRef", "invalid Sandbox name " + Quote(s.sandbox_ref) + ": " + p);
    }
  } else {
    RETURN_IF_ERROR(ValidateSandbox(p + ".sandbox", *s.sandbox));
  }
  if (s.workspace_directory.empty() || s.workspace_directory.front() != '/') {
    return Invalid(p + ".workspaceDirectory",
                   "must be an absolute path, got " + Quote(s.workspace_directory));
  }
  if (HasControlChars(s.workspace_directory, false)) {
    return Invalid(p + ".workspaceDirectory", "must not contain control characters");
  }
  if (s.executor.command.empty()) {
    return Invalid(p + ".executor.command", "is required");
  }
  if (HasControlChars(s.executor.command, false)) {
    return Invalid(p + ".executor.command", "must not contain control characters");
  }
  for (size_t i = 0; i < s.executor.args.size(); ++i) {
    if (s.executor.args[i].find('\0') != std::string::npos) {
      return Invalid(p + ".executor.args[" + std::to_string(i) + "]", "must not contain NUL");
    }
  }
  std::set<std::string_view> env_names;
  for (size_t i = 0; i < s.executor.env.size(); ++i) {
    const EnvVar& var = s.executor.env[i];
    const std::string path = p + ".executor.env[" + std::to_string(i) + "]";
    if (std::string problem = ValidateEnvName(var.name); !problem.empty()) {
      return Invalid(path + ".name", problem);
    }
    if (var.name == "CODEX_API_KEY" || var.name == "CODEX_HOME" || var.name.starts_with("SBX_")) {
      return Invalid(path + ".name", Quote(var.name) +
                                         " is set by sbx (the key comes from apiKeyFrom; "
                                         "CODEX_HOME and SBX_* are sbx's own)");
    }
    if (!env_names.insert(var.name).second) {
      return Invalid(path + ".name", "duplicate environment variable " + Quote(var.name));
    }
    if (!var.value.empty() && !var.value_from.empty()) {
      return Invalid(path, "set value or valueFrom, not both");
    }
    if (var.value.find('\0') != std::string::npos) {
      return Invalid(path + ".value", "must not contain NUL");
    }
    RETURN_IF_ERROR(ValidateSecretRef(path + ".valueFrom", var.value_from, o.secret_env_prefix));
  }
  RETURN_IF_ERROR(
      ValidateSecretRef(p + ".executor.apiKeyFrom", s.executor.api_key_from, o.secret_env_prefix));
  return OkStatus();
}

// A collect path: relative to the worker's workspaceDirectory and staying inside it.
std::string ValidateCollectPath(std::string_view path) {
  if (path.empty()) {
    return "is required";
  }
  if (path.front() == '/') {
    return "must be relative to the worker's workspaceDirectory, got " + Quote(path);
  }
  if (HasControlChars(path, false)) {
    return "must not contain control characters";
  }
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (path.substr(start, slash - start) == "..") {
      return "must not contain \"..\" (it would leave the workspace directory), got " + Quote(path);
    }
    start = slash + 1;
  }
  return "";
}

Status ValidateAgentTask(const AgentTaskSpec& s) {
  const int targets = static_cast<int>(!s.worker_ref.empty()) +
                      static_cast<int>(s.worker_selector.has_value()) +
                      static_cast<int>(!s.pool_ref.empty());
  if (targets != 1) {
    return Invalid(targets == 0          ? "spec"
                   : !s.pool_ref.empty() ? "spec.poolRef"
                                         : "spec.workerSelector",
                   targets == 0 ? "set exactly one of workerRef, workerSelector or poolRef"
                                : "set exactly one of workerRef, workerSelector or poolRef, not "
                                  "several");
  }
  if (!s.worker_ref.empty()) {
    if (std::string p = ValidateDnsLabel(s.worker_ref); !p.empty()) {
      return Invalid("spec.workerRef",
                     "invalid AgentWorker name " + Quote(s.worker_ref) + ": " + p);
    }
  } else if (!s.pool_ref.empty()) {
    if (std::string p = ValidateDnsLabel(s.pool_ref); !p.empty()) {
      return Invalid("spec.poolRef", "invalid AgentPool name " + Quote(s.pool_ref) + ": " + p);
    }
  } else {
    RETURN_IF_ERROR(
        ValidateLabels("spec.workerSelector.matchLabels", s.worker_selector->match_labels));
  }
  if (s.input.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Invalid("spec.input", "must not be empty: it is the user message of the turn");
  }
  if (s.input.find('\0') != std::string::npos) {
    return Invalid("spec.input", "must not contain NUL");
  }
  if (s.timeout < kMinTaskTimeout || s.timeout > kMaxTaskTimeout) {
    return Invalid("spec.timeout", "must be between " + FormatDuration(kMinTaskTimeout) + " and " +
                                       FormatDuration(kMaxTaskTimeout) + ", got " +
                                       FormatDuration(s.timeout));
  }
  std::set<std::string_view> paths;
  for (size_t i = 0; i < s.collect.size(); ++i) {
    const std::string path = "spec.collect[" + std::to_string(i) + "]";
    if (std::string p = ValidateCollectPath(s.collect[i].path); !p.empty()) {
      return Invalid(path + ".path", p);
    }
    if (!paths.insert(s.collect[i].path).second) {
      return Invalid(path + ".path", "duplicate collect path " + Quote(s.collect[i].path));
    }
    if (s.collect[i].max_bytes <= 0 || s.collect[i].max_bytes > kMaxCollectBytes) {
      return Invalid(path + ".maxBytes", "must be between 1 and 16Mi (16777216), got " +
                                             std::to_string(s.collect[i].max_bytes));
    }
  }
  if (s.ttl_after_finished.has_value() && s.ttl_after_finished->count() < 0) {
    return Invalid("spec.ttlAfterFinished", "must not be negative");
  }
  if (s.backoff_limit < 0 || s.backoff_limit > kMaxTaskBackoffLimit) {
    return Invalid("spec.backoffLimit",
                   "must be between 0 and " + std::to_string(kMaxTaskBackoffLimit) +
                       " (the number of retries after the first attempt), got " +
                       std::to_string(s.backoff_limit));
  }
  if (s.retry_on) {
    std::set<RetryOn> seen;
    for (size_t i = 0; i < s.retry_on->size(); ++i) {
      if (!seen.insert((*s.retry_on)[i]).second) {
        return Invalid("spec.retryOn[" + std::to_string(i) + "]", "duplicate entry");
      }
    }
  }
  return OkStatus();
}

// A git URL a manifest may name: https:// (http:// only for a loopback host), ssh://,
// scp-like "user@host:path", or file:// (sbxd refuses file:// unless its operator allowed it).
// No password in the URL (credentials come from spec.credentials), no spaces or control
// characters, nothing git could read as an option.
std::string ValidateGitUrl(std::string_view url) {
  if (url.empty()) {
    return "required field is missing";
  }
  if (url.size() > 2048) {
    return "must be at most 2048 characters";
  }
  for (char c : url) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "must not contain spaces or control characters";
    }
  }
  if (url.front() == '-') {
    return "must not start with '-'";
  }
  if (url.find("::") != std::string_view::npos) {  // git's "<helper>::<address>" (ext::, fd::)
    return "must not name a git remote helper (\"::\"), got " + Quote(url);
  }
  if (url.starts_with("file://")) {
    return url.size() > 7 ? "" : "file:// needs a path";
  }
  const bool https = url.starts_with("https://");
  const bool http = url.starts_with("http://");
  const bool ssh = url.starts_with("ssh://");
  if (https || http || ssh) {
    const std::optional<std::string_view> authority = Authority(url);
    if (!authority || authority->empty()) {
      return "has no host, got " + Quote(url);
    }
    const size_t at = authority->find('@');
    if (at != std::string_view::npos && (https || http)) {
      return "must not contain user info (put a token in spec.credentials.tokenFrom), got " +
             Quote(url);
    }
    if (at != std::string_view::npos && authority->substr(0, at).find(':') != std::string::npos) {
      return "must not contain a password (use spec.credentials.sshKeyFrom)";
    }
    if (http && !IsLoopbackUrl(url)) {
      return "must use https:// (plain http:// only for a loopback host), got " + Quote(url);
    }
    return "";
  }
  // scp-like: [user@]host:path, with no "://".
  const size_t colon = url.find(':');
  if (url.find("://") == std::string_view::npos && colon != std::string_view::npos && colon > 0 &&
      colon + 1 < url.size() && url.substr(0, colon).find('/') == std::string_view::npos) {
    return "";
  }
  return "must start with https://, ssh://, file:// or be user@host:path, got " + Quote(url);
}

// A branch or tag name git accepts as a plain ref name (git check-ref-format, simplified), and
// that cannot be read as an option.
std::string ValidateGitRefName(std::string_view name) {
  if (name.size() > 255) {
    return "must be at most 255 characters";
  }
  if (name.front() == '-' || name.front() == '/' || name.back() == '/' || name.back() == '.' ||
      name.ends_with(".lock")) {
    return "is not a valid git ref name: " + Quote(name);
  }
  if (name.find("..") != std::string_view::npos || name.find("@{") != std::string_view::npos ||
      name.find("//") != std::string_view::npos) {
    return "is not a valid git ref name: " + Quote(name);
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' ||
        c == '*' || c == '[' || c == '\\') {
      return "is not a valid git ref name: " + Quote(name);
    }
  }
  return "";
}

Status ValidateGitSource(const GitSourceSpec& s, const ValidationOptions& o) {
  if (std::string problem = ValidateGitUrl(s.url); !problem.empty()) {
    return Invalid("spec.url", problem);
  }
  const int refs = static_cast<int>(!s.ref.branch.empty()) + static_cast<int>(!s.ref.tag.empty()) +
                   static_cast<int>(!s.ref.commit.empty());
  if (refs != 1) {
    return Invalid("spec.ref", refs == 0 ? "must set one of branch, tag or commit"
                                         : "must set only one of branch, tag or commit");
  }
  if (!s.ref.branch.empty()) {
    if (std::string p = ValidateGitRefName(s.ref.branch); !p.empty()) {
      return Invalid("spec.ref.branch", p);
    }
  }
  if (!s.ref.tag.empty()) {
    if (std::string p = ValidateGitRefName(s.ref.tag); !p.empty()) {
      return Invalid("spec.ref.tag", p);
    }
  }
  if (!s.ref.commit.empty() &&
      ((s.ref.commit.size() != 40 && s.ref.commit.size() != 64) ||
       s.ref.commit.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return Invalid(
        "spec.ref.commit",
        "must be a full commit id (40 or 64 lowercase hex digits), got " + Quote(s.ref.commit));
  }
  // The path is relative to the repository root and stays inside it.
  if (s.path.empty() || s.path.size() > 1024 || s.path.front() == '/' ||
      HasControlChars(s.path, false)) {
    return Invalid("spec.path",
                   "must be a relative path inside the repository, got " + Quote(s.path));
  }
  for (size_t start = 0; start <= s.path.size();) {
    const size_t slash = s.path.find('/', start);
    const std::string_view part = std::string_view(s.path).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") {
      return Invalid("spec.path", "must not contain \"..\", got " + Quote(s.path));
    }
    if (slash == std::string::npos) {
      break;
    }
    start = slash + 1;
  }
  if (s.interval < kMinGitInterval || s.interval > kMaxGitInterval) {
    return Invalid("spec.interval", "must be between " + FormatDuration(kMinGitInterval) + " and " +
                                        FormatDuration(kMaxGitInterval) + ", got " +
                                        FormatDuration(s.interval));
  }
  if (s.prune.allow_empty && !s.prune.enabled) {
    return Invalid("spec.prune.allowEmpty", "needs prune.enabled: true");
  }
  if (!s.applyset.empty()) {
    if (std::string p = ValidateDnsSubdomain(s.applyset); !p.empty()) {
      return Invalid("spec.applyset", p);
    }
  }
  if (!s.credentials.ssh_key_from.empty() && !s.credentials.token_from.empty()) {
    return Invalid("spec.credentials", "must set only one of sshKeyFrom or tokenFrom");
  }
  RETURN_IF_ERROR(ValidateSecretRef("spec.credentials.sshKeyFrom", s.credentials.ssh_key_from,
                                    o.secret_env_prefix));
  RETURN_IF_ERROR(ValidateSecretRef("spec.credentials.tokenFrom", s.credentials.token_from,
                                    o.secret_env_prefix));
  if (!s.credentials.token_from.empty() && !s.url.starts_with("https://") &&
      !s.url.starts_with("http://")) {
    return Invalid("spec.credentials.tokenFrom", "needs an https:// url");
  }
  if (!s.credentials.ssh_key_from.empty() &&
      (s.url.starts_with("https://") || s.url.starts_with("http://") ||
       s.url.starts_with("file://"))) {
    return Invalid("spec.credentials.sshKeyFrom", "needs an ssh:// or user@host:path url");
  }
  return OkStatus();
}

// For messages: "TaskSucceeded, TaskFailed, …, PoolScalingLimited".
std::string NotifierEventList() {
  std::string out;
  for (std::string_view event : kNotifierEvents) {
    out.append(out.empty() ? "" : ", ").append(event);
  }
  return out;
}

}  // namespace

std::string ValidateDnsLabel(std::string_view s) {
  if (s.empty()) {
    return "must not be empty";
  }
  if (s.size() > 63) {
    return "must be at most 63 characters";
  }
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') {
      return "must consist of lowercase letters, digits and '-'";
    }
  }
  if (s.front() == '-' || s.back() == '-') {
    return "must start and end with a lowercase letter or digit";
  }
  return "";
}

Status ValidateSecretRef(std::string_view path, const SecretRef& ref, std::string_view env_prefix) {
  if (ref.empty()) {
    return OkStatus();  // unset: the optional reference falls back as documented
  }
  if (!ref.env.empty() && !ref.file.empty()) {
    return Invalid(path, "set exactly one of env or file, not both");
  }
  if (!ref.env.empty()) {
    const std::string where = std::string(path) + ".env";
    if (std::string problem = ValidateEnvName(ref.env); !problem.empty()) {
      return Invalid(where, problem);
    }
    if (!ref.env.starts_with(env_prefix) || ref.env.size() == env_prefix.size()) {
      return Invalid(where, "environment variable " + Quote(ref.env) +
                                " is not an allowed secret source: names must start with " +
                                Quote(env_prefix) +
                                " (the controller's own credentials cannot be named; see "
                                "SECURITY.md)");
    }
    return OkStatus();
  }
  const std::string where = std::string(path) + ".file";
  if (HasControlChars(ref.file, false)) {
    return Invalid(where, "must not contain control characters");
  }
  if (ref.file.find('/') != std::string::npos || ref.file == "." || ref.file == "..") {
    return Invalid(where,
                   "must be a plain file name inside the controller's secrets directory "
                   "(sbxd --secrets-dir), without '/' or \"..\", got " +
                       Quote(ref.file));
  }
  if (ref.file.size() > 255) {
    return Invalid(where, "must be at most 255 characters");
  }
  return OkStatus();
}

bool IsLoopbackUrl(std::string_view url) {
  const std::optional<std::string_view> authority = Authority(url);
  if (!authority || authority->find('@') != std::string_view::npos) {
    return false;
  }
  std::string_view host = *authority;
  if (host.starts_with('[')) {
    host = host.substr(0, host.find(']') + 1);
    return host == "[::1]";
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost") {
    return true;
  }
  // 127.0.0.0/8 as four decimal octets.
  int parts = 0;
  size_t start = 0;
  while (start <= host.size()) {
    const size_t dot = host.find('.', start);
    const std::string_view octet =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (octet.empty() || octet.size() > 3 ||
        octet.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(octet)) > 255 || (parts == 0 && octet != "127")) {
      return false;
    }
    ++parts;
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  return parts == 4;
}

std::string ValidateServiceUrl(std::string_view url) {
  for (char c : url) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "must not contain spaces or control characters";
    }
  }
  if (const std::optional<std::string_view> authority = Authority(url);
      authority && authority->find('@') != std::string_view::npos) {
    return "must not contain user info (user@host), got " + Quote(url);
  }
  if (url.starts_with("https://")) {
    return "";
  }
  if (url.starts_with("http://")) {
    if (IsLoopbackUrl(url)) {
      return "";
    }
    return "must use https:// (plain http:// only for a loopback host such as the local "
           "emulator), got " +
           Quote(url);
  }
  return "must start with https:// (or http:// for a loopback host), got " + Quote(url);
}

Status Validate(const Object& object, const ValidationOptions& options) {
  RETURN_IF_ERROR(ValidateMeta(object.metadata));
  return KindInfoOf(object.kind).validate(object, options);
}

// ---- Each kind's part (the kind table's entry points) ----------------------------------------

Status ValidateWorkspaceObject(const Object& object, const ValidationOptions& options) {
  return ValidateWorkspace(object.workspace_spec(), options);
}

Status ValidateSandboxObject(const Object& object, const ValidationOptions&) {
  return ValidateSandbox("spec", object.sandbox_spec());
}

Status ValidateAgentWorkerObject(const Object& object, const ValidationOptions& options) {
  return ValidateAgentWorker("spec", object.agent_worker_spec(), options);
}

Status ValidateAgentTaskObject(const Object& object, const ValidationOptions&) {
  return ValidateAgentTask(object.agent_task_spec());
}

Status ValidateGitSourceObject(const Object& object, const ValidationOptions& options) {
  return ValidateGitSource(object.git_source_spec(), options);
}

Status ValidateAgentPoolObject(const Object& object, const ValidationOptions& options) {
  const AgentPoolSpec& s = object.agent_pool_spec();
  // Replicas are <pool>-<5 characters>, and their sandboxes <namespace>-<replica>: both DNS
  // labels, and a replica's sandbox id cannot be set by hand.
  const size_t max_name = 63 - 6 - (object.metadata.namespace_.size() + 1);
  if (object.metadata.name.size() > max_name) {
    return Invalid("metadata.name",
                   "an AgentPool's name must be at most " + std::to_string(max_name) +
                       " characters in namespace " + Quote(object.metadata.namespace_) +
                       " (each replica's sandbox is <namespace>-<pool>-<5 chars>, at most 63)");
  }
  RETURN_IF_ERROR(ValidateLabels("spec.template.metadata.labels", s.template_.metadata.labels));
  if (s.template_.metadata.labels.count(std::string(kPoolLabel)) != 0) {
    return Invalid("spec.template.metadata.labels." + std::string(kPoolLabel),
                   "is set by sbx on every replica (the pool's name)");
  }
  const AgentWorkerSpec& t = s.template_.spec;
  if (!t.sandbox_ref.empty() || !t.sandbox.has_value()) {
    return Invalid("spec.template.spec.sandbox",
                   "a pool's template needs an inline sandbox (each replica owns its own), not "
                   "sandboxRef");
  }
  if (!t.sandbox->sandbox_id.empty()) {
    return Invalid("spec.template.spec.sandbox.sandboxId",
                   "must not be set: each replica's sandbox gets its own id "
                   "(<namespace>-<replica name>)");
  }
  if (t.session != SessionMode::kShared) {
    return Invalid("spec.template.spec.session",
                   "is set by the pool from its spec.session; set that instead");
  }
  // The template as a replica will have it: named, with its sandbox's name defaults and the
  // pool's session mode.
  AgentWorkerSpec replica = t;
  replica.session = s.session;
  ApplySandboxDefaults(*replica.sandbox, object.metadata.namespace_,
                       object.metadata.name + "-aaaaa");
  RETURN_IF_ERROR(ValidateAgentWorker("spec.template.spec", replica, options));
  if (s.replicas.max < 1 || s.replicas.max > kMaxPoolReplicas) {
    return Invalid("spec.replicas.max", "must be between 1 and " +
                                            std::to_string(kMaxPoolReplicas) + ", got " +
                                            std::to_string(s.replicas.max));
  }
  if (s.replicas.min < 0 || s.replicas.min > s.replicas.max) {
    return Invalid("spec.replicas.min", "must be between 0 and max (" +
                                            std::to_string(s.replicas.max) + "), got " +
                                            std::to_string(s.replicas.min));
  }
  if (s.warm < 0 || s.warm > s.replicas.max) {
    return Invalid("spec.warm", "must be between 0 and replicas.max (" +
                                    std::to_string(s.replicas.max) + "), got " +
                                    std::to_string(s.warm));
  }
  constexpr std::chrono::seconds kMaxScaleDownAfter{7 * 24 * 3600};
  if (s.scale_down_after.count() < 0 || s.scale_down_after > kMaxScaleDownAfter) {
    return Invalid("spec.scaleDownAfter",
                   "must be between 0s and 7 days, got " + FormatDuration(s.scale_down_after));
  }
  if (s.progress_deadline < std::chrono::seconds(1) ||
      s.progress_deadline > std::chrono::hours(24)) {
    return Invalid("spec.progressDeadline",
                   "must be between 1s and 24h, got " + FormatDuration(s.progress_deadline));
  }
  return OkStatus();
}

// The URL and the signing secret are references, resolved when a notification is delivered:
// whether the URL is https:// (or a loopback http://) can only be checked then.
Status ValidateNotifierObject(const Object& object, const ValidationOptions& options) {
  const NotifierSpec& s = object.notifier_spec();
  if (s.url_from.empty()) {
    return Invalid("spec.urlFrom",
                   "is required: a secret reference to the URL to POST to, {env: NAME} or "
                   "{file: NAME}");
  }
  RETURN_IF_ERROR(ValidateSecretRef("spec.urlFrom", s.url_from, options.secret_env_prefix));
  switch (s.type) {
    case NotifierType::kWebhook:
      if (s.signing_secret_from.empty()) {
        return Invalid("spec.signingSecretFrom",
                       "is required for type webhook: a secret reference to the Standard "
                       "Webhooks signing secret");
      }
      RETURN_IF_ERROR(ValidateSecretRef("spec.signingSecretFrom", s.signing_secret_from,
                                        options.secret_env_prefix));
      break;
    case NotifierType::kSlack:
      if (!s.signing_secret_from.empty()) {
        return Invalid("spec.signingSecretFrom",
                       "must not be set for type slack: Slack incoming webhooks are not signed");
      }
      break;
  }
  if (s.events.empty()) {
    return Invalid("spec.events", "must name at least one of " + NotifierEventList());
  }
  std::set<std::string_view> seen;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const std::string path = "spec.events[" + std::to_string(i) + "]";
    if (!IsNotifierEvent(s.events[i])) {
      return Invalid(path, "unknown event " + Quote(s.events[i]) + " (expected one of " +
                               NotifierEventList() + ")");
    }
    if (!seen.insert(s.events[i]).second) {
      return Invalid(path, "duplicate event " + Quote(s.events[i]));
    }
  }
  return ValidateLabels("spec.selector.matchLabels", s.selector.match_labels);
}

}  // namespace sbx::api
