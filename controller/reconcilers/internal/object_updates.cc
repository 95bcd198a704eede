#include "controller/reconcilers/internal/object_updates.h"

#include <algorithm>

namespace sbx::controller::reconcilers_internal {

bool HasFinalizer(const api::Object& object, std::string_view finalizer) {
  const auto& f = object.metadata.finalizers;
  return std::find(f.begin(), f.end(), finalizer) != f.end();
}

api::Status EnsureFinalizer(Store& store, api::Object& object, std::string_view finalizer) {
  if (HasFinalizer(object, finalizer)) {
    return api::OkStatus();
  }
  api::Object updated = object;
  updated.metadata.finalizers.emplace_back(finalizer);
  ASSIGN_OR_RETURN(api::Object stored, store.UpdateControllerMetadata(updated));
  stored.status = object.status;
  object = std::move(stored);
  return api::OkStatus();
}

api::Status RemoveFinalizer(Store& store, const api::Object& object, std::string_view finalizer) {
  api::Object updated = object;
  std::erase(updated.metadata.finalizers, std::string(finalizer));
  api::StatusOr<api::Object> stored = store.UpdateControllerMetadata(updated);
  if (!stored.ok() && stored.status().code() != api::StatusCode::kNotFound) {
    return stored.status();
  }
  return api::OkStatus();
}

void SetCondition(api::Object& object, std::string_view type, api::ConditionStatus status,
                  std::string_view reason, std::string message, const Clock& clock) {
  api::SetCondition(object.conditions(),
                    {std::string(type), status, std::string(reason), std::move(message), "",
                     object.metadata.generation},
                    FormatRfc3339(clock.Now()));
}

api::Status WriteStatusIfChanged(Store& store, const api::Object& object,
                                 const api::ResourceStatus& original) {
  if (object.status == original) {
    return api::OkStatus();
  }
  api::StatusOr<api::Object> stored = store.UpdateStatus(object);
  if (stored.status().code() == api::StatusCode::kNotFound) {
    return api::OkStatus();
  }
  return stored.status();
}

}  // namespace sbx::controller::reconcilers_internal
