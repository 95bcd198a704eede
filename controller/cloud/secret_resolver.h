// Secret references (`*From` fields: {env: NAME} or {file: /path}) resolved at the moment of use
// (DESIGN §2). The value lives only in memory; error messages name the reference (field path,
// variable name or file path), never a value. Thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::controller {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The secret's value with surrounding whitespace (a trailing newline in a file) trimmed.
// kFailedPrecondition when the variable is unset or empty, or the file cannot be read or is
// empty; `field` (e.g. "spec.databricks.tokenFrom") prefixes the message. An empty ref is
// kInvalidArgument (the caller decides whether the field is optional).
api::StatusOr<std::string> ResolveSecret(const api::SecretRef& ref, const EnvLookup& env,
                                         std::string_view field);

}  // namespace sbx::controller
