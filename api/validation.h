// Validation of single sbx objects, after defaulting (api/defaults.h).
//
// Returns the first problem as kInvalidArgument "<field.path>: <problem>" (e.g.
// "spec.setup[1].name: duplicate step name \"deps\""); sbxctl places it in the manifest with
// LocateError (api/codec.h). Checks each object on its own: cross-object rules (references
// that resolve, immutable image) are the controller's, reported as conditions (DESIGN §3).
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::api {

// The environment variables a manifest may name in `{env: NAME}` start with this prefix unless
// the operator configured another one (sbxd --secret-env-prefix; sbxctl $SBX_SECRET_ENV_PREFIX).
inline constexpr std::string_view kDefaultSecretEnvPrefix = "SBX_SECRET_";

struct ValidationOptions {
  std::string secret_env_prefix = std::string(kDefaultSecretEnvPrefix);
};

Status Validate(const Object& object, const ValidationOptions& options = {});

// Each kind's part of Validate, after the metadata (the kind table's entry points,
// api/kinds.h).
Status ValidateWorkspaceObject(const Object& object, const ValidationOptions& options);
Status ValidateSandboxObject(const Object& object, const ValidationOptions& options);
Status ValidateAgentWorkerObject(const Object& object, const ValidationOptions& options);
Status ValidateAgentTaskObject(const Object& object, const ValidationOptions& options);
Status ValidateGitSourceObject(const Object& object, const ValidationOptions& options);
Status ValidateAgentPoolObject(const Object& object, const ValidationOptions& options);
Status ValidateNotifierObject(const Object& object, const ValidationOptions& options);

// A secret reference a manifest may hold (SECURITY.md): `{env: NAME}` with NAME starting with
// `env_prefix`, or `{file: NAME}` with NAME a plain file name (no '/', not "." or "..") that the
// controller looks up in its secrets directory. An empty reference is valid (unset). Errors are
// kInvalidArgument "<path>[.env|.file]: <problem>".
Status ValidateSecretRef(std::string_view path, const SecretRef& ref, std::string_view env_prefix);

// Whether the host of `url` ("scheme://host[:port]/…") is a loopback address: localhost,
// 127.0.0.0/8 or [::1]. Only such hosts may be reached over plain http://.
bool IsLoopbackUrl(std::string_view url);

// A Databricks host or OpenAI base URL a manifest may name: https:// (http:// only for a
// loopback host, e.g. the local emulator), no user info, no spaces or control characters.
// Returns the problem text or "" when valid.
std::string ValidateServiceUrl(std::string_view url);

// Building blocks, exposed for sbxctl flags and reconcilers. Each returns the problem text
// (without a field path) or "" when valid.
// DNS-1123 label: 1–63 of [a-z0-9-], starting and ending with [a-z0-9].
std::string ValidateDnsLabel(std::string_view value);

}  // namespace sbx::api
