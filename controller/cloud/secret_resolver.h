// Secret references (`*From` fields: {env: NAME} or {file: NAME}) resolved at the moment of use
// (DESIGN §2), only from the sources the operator allowed (SECURITY.md):
//   {env: NAME}   NAME must start with SecretPolicy::env_prefix (default SBX_SECRET_), so a
//                 manifest can never name the controller's own DATABRICKS_* / OPENAI_* variables;
//   {file: NAME}  NAME is a plain file name looked up in SecretPolicy::secrets_dir; symlinks are
//                 followed only while they stay inside that directory (Kubernetes secret volumes
//                 are symlinks into ..data/), never out of it.
// Namespaces are a boundary (DESIGN §8.4; SecretScope::kNamespace, sbxd's default): an object of
// namespace NS may name only {env: <prefix><NS>_…} (NS upper-cased, '-' → '_') and
// {file: NAME} reads <secrets_dir>/<NS>/NAME, unless the operator granted the source to NS
// (--secret-grants: then {env: NAME} as named, {file: NAME} from <secrets_dir>/NAME).
// SecretScope::kGlobal (--secret-scope=global) is the single-team mode: every namespace may name
// every allowed source.
// The reference is checked again here, whatever sbxctl checked when it stored it: a database
// may have been written by an older client, or by hand.
//
// The value lives only in memory; error messages name the reference (field path, variable name
// or file name), never a value. Stateless functions; thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "api/validation.h"

namespace sbx::controller {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

enum class SecretScope { kNamespace, kGlobal };

// "namespace" or "global"; nullopt otherwise.
std::optional<SecretScope> ParseSecretScope(std::string_view text);

// Sources granted to namespaces: namespace → {"env:NAME", "file:NAME"}.
using SecretGrants = std::map<std::string, std::set<std::string>>;

// The secret sources a manifest may name (sbxd --secret-env-prefix, --secrets-dir,
// --secret-scope, --secret-grants).
struct SecretPolicy {
  std::string env_prefix = std::string(api::kDefaultSecretEnvPrefix);
  std::string secrets_dir;  // empty: {file: …} references cannot be resolved
  SecretScope scope = SecretScope::kNamespace;
  SecretGrants grants;  // only with kNamespace
};

// The --secret-grants file: one grant a line, "NAMESPACE SOURCE", SOURCE being `env:NAME` (or a
// bare NAME) or `file:NAME`; blank lines and lines starting with '#' are skipped. A grant must
// name a DNS-label namespace and a source the policy's syntax allows (env names with
// `env_prefix`, plain file names). kInvalidArgument "PATH:LINE: problem" otherwise.
api::StatusOr<SecretGrants> ParseSecretGrants(std::string_view path, std::string_view text,
                                              std::string_view env_prefix);

// The prefix of the env names namespace `namespace_` owns: "<env_prefix><NAMESPACE>_".
std::string NamespaceEnvPrefix(std::string_view env_prefix, std::string_view namespace_);

// $XDG_CONFIG_HOME/sbx/secrets when XDG_CONFIG_HOME is set, else /etc/sbx/secrets.
std::string DefaultSecretsDir(const EnvLookup& env);

// The policy a client (sbxctl exec/logs, which resolve a Workspace's credentials in the user's
// own shell) follows: $SBX_SECRET_ENV_PREFIX and $SBX_SECRETS_DIR when set, else the defaults;
// global scope (the user's own environment is no other team's).
SecretPolicy SecretPolicyFromEnvironment(const EnvLookup& env);

// Secret files larger than this are refused (a secret is a token, not a document).
inline constexpr size_t kMaxSecretFileBytes = size_t{64} * 1024;

// The secret's value with surrounding whitespace (a trailing newline in a file) trimmed, for an
// object of namespace `namespace_`.
// kInvalidArgument with reason "SecretNotAllowed" when `policy` does not allow the reference
// (in that namespace);
// kFailedPrecondition when the variable is unset or empty, or the file is missing, unreadable,
// empty or too large; `field` (e.g. "spec.databricks.tokenFrom") prefixes the message. An empty
// ref is kInvalidArgument (the caller decides whether the field is optional).
api::StatusOr<std::string> ResolveSecret(const api::SecretRef& ref, const EnvLookup& env,
                                         std::string_view field, const SecretPolicy& policy,
                                         std::string_view namespace_);

// One of the controller's OWN variables (OPENAI_API_KEY, OPENAI_EXECUTOR_API_KEY, …), which no
// manifest can name. The caller is responsible for sending it only to the host it belongs to.
// kFailedPrecondition naming `field` when unset or empty.
api::StatusOr<std::string> ResolveControllerEnv(std::string_view name, const EnvLookup& env,
                                                std::string_view field);

// Every secret value the controller can know of at start-up, so that they are scrubbed from
// logs, status and events even before anything resolves them (after a restart, an executor
// launched by the previous sbxd may print its key before this one has resolved it):
// `environment` ("NAME=VALUE" entries) values of the variables with the policy's prefix and of
// the controller's own credentials (DATABRICKS_TOKEN, DATABRICKS_CLIENT_SECRET, OPENAI_API_KEY,
// OPENAI_EXECUTOR_API_KEY, OPENAI_WEBHOOK_SECRET), and the trimmed content of every regular file of
// the secrets directory and of its subdirectories one level down (the namespaces'), up to
// kMaxSecretFileBytes each. Unreadable entries are skipped.
std::vector<std::string> KnownSecretValues(const SecretPolicy& policy,
                                           const std::vector<std::string>& environment);

}  // namespace sbx::controller
