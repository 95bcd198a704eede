// ObjectUpdate: the read-modify-write of `label`, `annotate`, `patch` and `edit`. A verb reads an
// object through the store of its CommandContext, changes a copy, and writes it the way `apply`
// does: defaulted, validated with apply's rules (secret references included: SECURITY.md), one
// Store::Apply that bumps generation only when the spec changed — refused when the object
// changed since it was read (Store::Apply's require_resource_version). Going through the
// context's Store keeps the verbs working once the store is reached through a server.
//
// Stateless functions; not thread-safe (the context is not).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "api/resources.h"
#include "api/status.h"
#include "api/validation.h"
#include "cli/commands/command_context.h"
#include "controller/store/store.h"

namespace sbx::cli {

// The validation options of the CLI: env references must start with $SBX_SECRET_ENV_PREFIX when
// set, else SBX_SECRET_ (as apply and diff check them).
api::ValidationOptions CommandValidationOptions();

// Defaults and validates `desired` as apply does; kInvalidArgument "<QualifiedName>: <problem>".
api::Status ValidateForWrite(api::Object& desired);

// Writes `desired` (already validated; metadata.resource_version = the version it was read
// at). kAborted, in kubectl's words, when the object changed since; kNotFound when it is gone;
// kFailedPrecondition when it is being deleted. Prints apply's immutable-field warnings.
api::StatusOr<controller::ApplyResult> WriteObject(CommandContext& ctx, controller::Store& store,
                                                   const api::Object& desired);

// `original` with what a user may write taken from `edited`: metadata.labels,
// metadata.annotations and spec. Status and server-set metadata are the controller's and the
// store's (`patch` and `edit` show them, and ignore changes to them).
api::Object WithUserFields(const api::Object& original, api::Object edited);

// Changes `object` in place; an error stops the update (nothing is written).
using ObjectMutation = std::function<api::Status(api::Object& object)>;

// Get, mutate, validate, write; on a concurrent change it reads the object again and re-applies
// `mutate` (as a server applies a PATCH to the latest version), at most a few times. With
// `resource_version` (kubectl's --resource-version) it writes only if the object is still at
// that version and never retries. Returns what was written (kUnchanged when nothing changed).
api::StatusOr<controller::ApplyResult> UpdateObject(CommandContext& ctx, const api::ObjectKey& key,
                                                    const ObjectMutation& mutate,
                                                    std::optional<int64_t> resource_version = {});

// kubectl's conflict message: `Operation cannot be fulfilled on sandboxes "dev": the object has
// been modified; please apply your changes to the latest version and try again`.
std::string ConflictMessage(const api::ObjectKey& key);

// Reports an error of the functions above: `Error from server (NotFound): …` as kubectl prints
// it, anything else as `error: …`. Returns kExitError.
int FailUpdate(CommandContext& ctx, const api::Status& status);

}  // namespace sbx::cli
