// GarbageCollector: deletes external resources that sbx created and nobody wants any more
// (DESIGN §3 Garbage collection).
//
// Safety rules, each of which a test pins down:
//  * only resources recorded in the inventory are candidates — never anything sbx did not create;
//  * a record is an orphan when its owner object is gone, or now points at another sandbox id
//    or workspace; and only after `grace` since the record last changed;
//  * it runs only with a complete, successful LIST of the workspace (never on a failed or
//    partial one), passed in by the sweeper;
//  * at most max(1, ⌊fraction·N⌋) deletions per pass for a workspace of N listed sandboxes;
//  * every deletion is an event on the former owner.
// Records of orphans that the LIST does not show any more are simply dropped. Orphaned agent
// sessions are collected the same way (CollectSessions).
// Thread-safe as long as one workspace is collected by one thread at a time (the sweeper).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <vector>

#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/event_recorder.h"
#include "controller/reconcilers/internal/session_deletion.h"
#include "controller/reconcilers/sandbox_cache.h"
#include "controller/reconcilers/session_lifecycle.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct GarbageCollectorOptions {
  std::chrono::milliseconds grace{std::chrono::minutes(5)};
  double max_fraction = 0.1;
  // Sessions the service refuses to delete: retried on later passes, abandoned once
  // `give_up_after` has passed since the first refusal (retry_after is not used here).
  reconcilers_internal::SessionDeletePolicy session_delete{};
};

class GarbageCollector {
 public:
  GarbageCollector(Store& store, SandboxCache& cache, Clock& clock,
                   GarbageCollectorOptions options = {});

  // `listed` must be the complete LIST of `workspace` just taken with `api`. Returns the number
  // of sandboxes deleted in this pass; the first failing delete ends the pass with its error.
  api::StatusOr<int> CollectSandboxes(const std::string& workspace, databricks::SandboxApi& api,
                                      const std::vector<databricks::Sandbox>& listed,
                                      std::stop_token stop);

  // Sessions recorded in the inventory of `workspace` whose AgentWorker is gone (after `grace`):
  // an active turn is cancelled, then the session deleted through `agents` (404 counts as
  // done), at most max(1, ⌊fraction·N⌋) attempts per pass for the N recorded sessions. An intent
  // left by a crashed create is resolved by the uid in the sessions' metadata. A session the
  // service refuses to delete (409) is tried again on later passes and abandoned (inventory
  // kAbandoned, Warning SessionNotDeletable) once `session_delete.give_up_after` has passed since
  // its first refusal; abandoned rows are never tried again. Returns the number deleted.
  api::StatusOr<int> CollectSessions(const std::string& workspace, openai::AgentsApi& agents,
                                     std::stop_token stop);
  // Whether `workspace` has session records other than abandoned ones (so the sweeper only asks
  // for an Agents client where one is needed).
  bool HasSessions(const std::string& workspace);

  int64_t deleted_total() const { return deleted_total_.load(); }

 private:
  bool IsOrphan(const Store::InventoryRecord& record);

  Store& store_;
  SandboxCache& cache_;
  Clock& clock_;
  EventRecorder events_;
  SessionLifecycle sessions_;
  const GarbageCollectorOptions options_;
  std::atomic<int64_t> deleted_total_{0};
};

}  // namespace sbx::controller
