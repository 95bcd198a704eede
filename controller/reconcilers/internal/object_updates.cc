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

bool OwnedBy(const api::Object& object, const std::string& owner_uid) {
  const auto& refs = object.metadata.owner_references;
  if (refs.empty()) {
    auto it = object.metadata.annotations.find(std::string(kCreatedByAnnotation));
    return it != object.metadata.annotations.end() && it->second == owner_uid;
  }
  return std::any_of(refs.begin(), refs.end(),
                     [&](const api::OwnerReference& r) { return r.uid == owner_uid; });
}

api::StatusOr<api::Object> CreateOwned(Store& store, api::Object desired,
                                       const api::OwnerReference& owner) {
  desired.metadata.annotations[std::string(kCreatedByAnnotation)] = owner.uid;
  ASSIGN_OR_RETURN(std::vector<ApplyResult> applied, store.Apply({desired}, ApplyOptions{}));
  api::Object stored = applied.at(0).object;
  // The object's own reconciler adds its finalizer concurrently: read again on a conflict.
  for (int attempt = 0; stored.metadata.owner_references.empty(); ++attempt) {
    stored.metadata.owner_references.push_back(owner);
    api::StatusOr<api::Object> updated = store.UpdateControllerMetadata(stored);
    if (updated.ok()) {
      return updated;
    }
    if (updated.status().code() != api::StatusCode::kAborted || attempt == 2) {
      return updated.status();
    }
    ASSIGN_OR_RETURN(stored, store.Get(api::KeyOf(desired)));
  }
  return stored;
}

}  // namespace sbx::controller::reconcilers_internal
