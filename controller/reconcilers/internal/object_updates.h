// The store writes every reconciler makes the same way: the controller finalizer on and off,
// conditions stamped with the clock, and status written only when it changed (a no-op reconcile
// writes nothing, so it wakes no watcher). Stateless functions; thread-safe as the Store is.
#pragma once

#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller::reconcilers_internal {

// `finalizer` is the controller finalizer unless a reconciler holds one of its own (the
// Workspace's kWorkspaceInUseFinalizer).
bool HasFinalizer(const api::Object& object,
                  std::string_view finalizer = api::kControllerFinalizer);

// Adds the finalizer if missing (compare-and-swap on resourceVersion). `object` takes the stored
// metadata and keeps the status built so far.
api::Status EnsureFinalizer(Store& store, api::Object& object,
                            std::string_view finalizer = api::kControllerFinalizer);

// Removes the finalizer; the store removes the row if the object is being deleted and no
// finalizer is left. An object already gone is fine.
api::Status RemoveFinalizer(Store& store, const api::Object& object,
                            std::string_view finalizer = api::kControllerFinalizer);

// Sets condition `type` on `object`'s status for its current generation, stamped with `clock`.
// `type` and `reason` come from the vocabulary in api/conditions.h.
void SetCondition(api::Object& object, std::string_view type, api::ConditionStatus status,
                  std::string_view reason, std::string message, const Clock& clock);

// Writes `object`'s status iff it differs from `original` (compare-and-swap). An object deleted
// meanwhile is fine; a lost CAS is kAborted (retried by the Manager).
api::Status WriteStatusIfChanged(Store& store, const api::Object& object,
                                 const api::ResourceStatus& original);

// An object a reconciler creates for another (an inline template's Sandbox, a pool's replica)
// carries the creator's uid in this annotation from the create on, so that it is recognisably
// the creator's before the owner reference (a second write, which can lose a race) is in place.
inline constexpr std::string_view kCreatedByAnnotation = "sbx.dev/created-by-uid";

// Whether `object` belongs to the object with `owner_uid`: an owner reference to it, or, while
// there is no owner reference yet, kCreatedByAnnotation.
bool OwnedBy(const api::Object& object, const std::string& owner_uid);

// Creates `desired` (Apply; nothing is written when it exists unchanged) with `owner` as its
// controller owner reference, retried over a concurrent finalizer write. The stored object.
api::StatusOr<api::Object> CreateOwned(Store& store, api::Object desired,
                                       const api::OwnerReference& owner);

}  // namespace sbx::controller::reconcilers_internal
