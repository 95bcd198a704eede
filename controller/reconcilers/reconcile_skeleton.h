// The reconcile skeleton every reconciler of an sbx object runs (Sandbox, AgentWorker,
// Workspace, and the reconcilers to come), so that none of them repeats it:
//   1. load the object; gone (NotFound) → forget what is kept about it, done;
//   2. being deleted → while the reconciler's finalizer is on, finalize: clean up what the object
//      made; once that is done, remove the finalizer (the store removes the row), forget, done;
//   3. otherwise → add the finalizer if missing, converge;
//   4. record the outcome in conditions (an error → Synced=False with ClassifyError's reason,
//      RecordSyncedError, or the reconciler's own rule) — except for a call whose retry was
//      handed back to the work queue (IsRetryScheduled): that is no outcome yet, and the
//      conditions stay as the last pass left them;
//   5. stamp status.observedGeneration and write the status only if it changed (a no-op
//      reconcile writes nothing, so it wakes no watcher).
// A reconciler supplies the steps that differ as a ReconcileSteps over its own Target, a struct
// that derives from ReconcileTarget and holds what one pass works on.
// Thread-safety: RunReconcile holds no state; the steps decide what is shared.
#pragma once

#include <functional>
#include <optional>
#include <stop_token>
#include <string_view>
#include <variant>

#include "api/conditions.h"
#include "api/resources.h"
#include "api/status.h"
#include "controller/base/classify_error.h"
#include "controller/base/clock.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/reconcile_result.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/store/store.h"

namespace sbx::controller {

// What every pass works on.
struct ReconcileTarget {
  api::Object object;                   // the store's copy, with the status being built
  api::ResourceStatus original_status;  // the status as the pass found it
  std::stop_token stop;

  api::ObjectKey key() const { return api::KeyOf(object); }
};

template <typename Target>
struct ReconcileSteps {
  // The controller finalizer, unless the reconciler holds one of its own.
  std::string_view finalizer = api::kControllerFinalizer;
  // Optional: fills the Target's own fields from `object` before converging or finalizing.
  std::function<void(Target&)> prepare;
  // The object matches its spec after this (or the error says why not).
  std::function<api::StatusOr<ReconcileResult>(Target&)> converge;
  // Cleans up for a deleted object: nullopt once everything is cleaned up (the skeleton then
  // removes the finalizer), else what to do until then.
  std::function<api::StatusOr<std::optional<ReconcileResult>>(Target&)> finalize;
  // Optional: sets conditions from the pass's outcome (OK or the error).
  std::function<void(Target&, const api::Status&)> record_outcome;
  // Optional: the object is gone; drop what is kept about `key` (caches).
  std::function<void(const api::ObjectKey&)> forget;
  // Optional: the index the reconciler records the object's dependencies in; the object is
  // untracked there when it is gone.
  DependencyIndex* dependencies = nullptr;
};

// The object is gone: untrack it and let the reconciler drop what it keeps.
template <typename Target>
void Forget(const ReconcileSteps<Target>& steps, const api::ObjectKey& key) {
  if (steps.dependencies != nullptr) {
    steps.dependencies->Untrack(key);
  }
  if (steps.forget) {
    steps.forget(key);
  }
}

// Synced=False with ClassifyError's reason and the error's message; nothing when `status` is OK.
inline void RecordSyncedError(api::Object& object, const api::Status& status, const Clock& clock) {
  if (!status.ok()) {
    reconcilers_internal::SetCondition(object, api::condition::kSynced,
                                       api::ConditionStatus::kFalse, ClassifyError(status).reason,
                                       ConditionMessage(status), clock);
  }
}

// The usual outcome: Synced=False with the error (RecordSyncedError), Synced=True on success.
inline void RecordSynced(api::Object& object, const api::Status& status, const Clock& clock) {
  if (status.ok()) {
    reconcilers_internal::SetCondition(object, api::condition::kSynced, api::ConditionStatus::kTrue,
                                       api::reason::kSynced, "", clock);
  } else {
    RecordSyncedError(object, status, clock);
  }
}

template <typename Target>
api::StatusOr<ReconcileResult> RunReconcile(Store& store, const api::ObjectKey& key,
                                            std::stop_token stop,
                                            const ReconcileSteps<Target>& steps) {
  api::StatusOr<api::Object> object = store.Get(key);
  if (object.status().code() == api::StatusCode::kNotFound) {
    Forget(steps, key);
    return ReconcileResult::Done();  // deleted and finalized already
  }
  RETURN_IF_ERROR(object.status());

  Target t;
  t.object = *std::move(object);
  t.original_status = t.object.status;
  t.stop = stop;
  if (steps.prepare) {
    steps.prepare(t);
  }
  api::StatusOr<ReconcileResult> result = ReconcileResult::Done();
  if (t.object.metadata.deletion_timestamp.empty()) {
    api::Status added = reconcilers_internal::EnsureFinalizer(store, t.object, steps.finalizer);
    result = added.ok() ? steps.converge(t) : added;
  } else if (reconcilers_internal::HasFinalizer(t.object, steps.finalizer)) {
    api::StatusOr<std::optional<ReconcileResult>> finalized = steps.finalize(t);
    if (finalized.ok() && !finalized->has_value()) {
      RETURN_IF_ERROR(reconcilers_internal::RemoveFinalizer(store, t.object, steps.finalizer));
      Forget(steps, key);
      return ReconcileResult::Done();  // the row is gone (or goes with the last finalizer)
    }
    result = finalized.ok() ? api::StatusOr<ReconcileResult>(**finalized) : finalized.status();
  }
  if (steps.record_outcome && !IsRetryScheduled(result.status())) {
    steps.record_outcome(t, result.status());
  }
  std::visit([&](auto& status) { status.observed_generation = t.object.metadata.generation; },
             t.object.status);
  RETURN_IF_ERROR(reconcilers_internal::WriteStatusIfChanged(store, t.object, t.original_status));
  return result;
}

}  // namespace sbx::controller
