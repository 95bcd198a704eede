#include "cli/commands/object_update.h"

#include <cstdlib>

#include "api/defaults.h"
#include "cli/commands/immutable_fields.h"

namespace sbx::cli {
namespace {

// sbxd writes status (a new resourceVersion) while a verb reads and writes, so a conflict is
// expected now and then; several in a row mean something else is going on.
constexpr int kMaxConflictRetries = 5;

}  // namespace

api::ValidationOptions CommandValidationOptions() {
  api::ValidationOptions options;
  if (const char* prefix = std::getenv("SBX_SECRET_ENV_PREFIX");
      prefix != nullptr && *prefix != '\0') {
    options.secret_env_prefix = prefix;
  }
  return options;
}

api::Status ValidateForWrite(api::Object& desired) {
  api::ApplyDefaults(desired);
  const api::Status valid = api::Validate(desired, CommandValidationOptions());
  if (!valid.ok()) {
    return api::InvalidArgumentError(QualifiedName(api::KeyOf(desired)) + ": " + valid.message());
  }
  return api::OkStatus();
}

api::Object WithUserFields(const api::Object& original, api::Object edited) {
  api::Object out = original;
  out.metadata.labels = std::move(edited.metadata.labels);
  out.metadata.annotations = std::move(edited.metadata.annotations);
  out.spec = std::move(edited.spec);
  return out;
}

std::string ConflictMessage(const api::ObjectKey& key) {
  return "Operation cannot be fulfilled on " + ResourceName(key.kind) + " \"" + key.name +
         "\": the object has been modified; please apply your changes to the latest version and "
         "try again";
}

api::StatusOr<controller::ApplyResult> WriteObject(CommandContext& ctx, controller::Store& store,
                                                   const api::Object& desired) {
  const api::ObjectKey key = api::KeyOf(desired);
  controller::ApplyOptions options;
  options.require_resource_version = true;
  options.audit = ctx.WriteBy();
  auto results = store.Apply({desired}, options);
  if (!results.ok()) {
    if (results.status().code() == api::StatusCode::kAborted) {
      return api::AbortedError(ConflictMessage(key));
    }
    if (results.status().code() == api::StatusCode::kNotFound) {
      return api::NotFoundError(NotFoundMessage(key));
    }
    return results.status();
  }
  for (const std::string& warning : ImmutableFieldWarnings(store, *results)) {
    ctx.err() << "Warning: " << warning << "\n";
  }
  return results->front();
}

api::StatusOr<controller::ApplyResult> UpdateObject(CommandContext& ctx, const api::ObjectKey& key,
                                                    const ObjectMutation& mutate,
                                                    std::optional<int64_t> resource_version) {
  ASSIGN_OR_RETURN(controller::Store * store, ctx.store());
  for (int attempt = 0;; ++attempt) {
    auto read = store->Get(key);
    if (!read.ok()) {
      if (read.status().code() == api::StatusCode::kNotFound) {
        return api::NotFoundError(NotFoundMessage(key));
      }
      return read.status();
    }
    api::Object desired = *read;
    if (resource_version) {
      desired.metadata.resource_version = *resource_version;
    }
    RETURN_IF_ERROR(mutate(desired));
    RETURN_IF_ERROR(ValidateForWrite(desired));
    auto written = WriteObject(ctx, *store, desired);
    if (written.ok() || written.status().code() != api::StatusCode::kAborted || resource_version ||
        attempt + 1 >= kMaxConflictRetries) {
      return written;
    }
  }
}

int FailUpdate(CommandContext& ctx, const api::Status& status) {
  if (status.code() == api::StatusCode::kNotFound &&
      status.message().rfind("Error from server", 0) == 0) {
    ctx.err() << status.message() << "\n";
    return ctx.exit_code = kExitError;
  }
  return ctx.Fail(status);
}

}  // namespace sbx::cli
