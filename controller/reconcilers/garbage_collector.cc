#include "controller/reconcilers/garbage_collector.h"

#include <algorithm>
#include <set>

#include "controller/reconcilers/internal/session_deletion.h"

namespace sbx::controller {

GarbageCollector::GarbageCollector(Store& store, SandboxCache& cache, Clock& clock,
                                   GarbageCollectorOptions options)
    : store_(store),
      cache_(cache),
      clock_(clock),
      events_(store, clock),
      sessions_(store, events_, clock),
      options_(options) {}

bool GarbageCollector::IsOrphan(const Store::InventoryRecord& record) {
  api::StatusOr<api::Object> owner = store_.Get(record.owner);
  if (owner.status().code() == api::StatusCode::kNotFound) {
    return true;
  }
  if (!owner.ok()) {
    return false;  // cannot tell: keep it
  }
  if (owner->kind != api::Kind::kSandbox) {
    return false;  // sessions and others are collected by their own collectors
  }
  // The sandbox its owner created (not its spec, which may have been edited since: the Sandbox
  // reconciler refuses that edit and keeps the sandbox, so the collector must too).
  const api::SandboxIdentity planned = api::PlannedSandbox(*owner);
  return planned.sandbox_id != record.external_id ||
         WorkspaceId(owner->metadata.namespace_, planned.workspace_ref) != record.workspace;
}

api::StatusOr<int> GarbageCollector::CollectSandboxes(
    const std::string& workspace, databricks::SandboxApi& api,
    const std::vector<databricks::Sandbox>& listed, std::stop_token stop) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(workspace));
  std::set<std::string> live_ids;
  for (const databricks::Sandbox& sb : listed) {
    live_ids.insert(sb.sandbox_id);
  }
  const auto now = clock_.Now();
  const int budget = std::max<int>(
      1, static_cast<int>(static_cast<double>(listed.size()) * options_.max_fraction));
  int deleted = 0;
  for (Store::InventoryRecord& record : records) {
    if (record.resource_type != "sandbox" || stop.stop_requested()) {
      continue;
    }
    const std::optional<Clock::WallTime> changed = ParseRfc3339(record.updated_at);
    if (changed && now - *changed < options_.grace) {
      continue;
    }
    if (!IsOrphan(record)) {
      continue;
    }
    if (live_ids.count(record.external_id) == 0) {
      RETURN_IF_ERROR(store_.DeleteInventory(workspace, "sandbox", record.external_id));
      continue;  // nothing out there to leak
    }
    if (deleted >= budget) {
      break;  // the rest waits for the next pass
    }
    record.state = Store::InventoryState::kDeleting;
    record.updated_at = FormatRfc3339(now);
    RETURN_IF_ERROR(store_.PutInventory(record));
    api::Status status = api.Delete(record.external_id, stop);
    if (!status.ok() && status.code() != api::StatusCode::kNotFound) {
      return status;
    }
    cache_.Forget(workspace, record.external_id);
    RETURN_IF_ERROR(store_.DeleteInventory(workspace, "sandbox", record.external_id));
    ++deleted;
    deleted_total_.fetch_add(1);
    events_.Warning(record.owner, "GarbageCollected",
                    "deleted orphaned sandbox " + record.external_id + " in workspace " +
                        workspace + " (its owner no longer wants it)");
  }
  return deleted;
}

bool GarbageCollector::HasSessions(const std::string& workspace) {
  api::StatusOr<std::vector<Store::InventoryRecord>> records = store_.ListInventory(workspace);
  return records.ok() &&
         std::any_of(records->begin(), records->end(), [](const Store::InventoryRecord& r) {
           return r.resource_type == kInventorySession &&
                  r.state != Store::InventoryState::kAbandoned;
         });
}

api::StatusOr<int> GarbageCollector::CollectSessions(const std::string& workspace,
                                                     openai::AgentsApi& agents,
                                                     std::stop_token stop) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(workspace));
  // Abandoned sessions were given up on: they are a record for the operator, never retried.
  std::erase_if(records, [](const Store::InventoryRecord& r) {
    return r.resource_type != kInventorySession || r.state == Store::InventoryState::kAbandoned;
  });
  const auto now = clock_.Now();
  const int budget = std::max<int>(
      1, static_cast<int>(static_cast<double>(records.size()) * options_.max_fraction));
  std::optional<std::vector<openai::Session>> all;  // listed once, only for crashed intents
  int attempts = 0;  // deletions tried this pass, refused ones included (each costs calls)
  int deleted = 0;
  for (const Store::InventoryRecord& record : records) {
    if (stop.stop_requested() || attempts >= budget) {
      break;
    }
    // A refused deletion (kDeleting) is retried on the next pass: its updated_at is the first
    // refusal, which the give-up bound counts from, not a change of ownership to wait out.
    const std::optional<Clock::WallTime> changed = ParseRfc3339(record.updated_at);
    if (record.state != Store::InventoryState::kDeleting && changed &&
        now - *changed < options_.grace) {
      continue;
    }
    if (store_.Get(record.owner).status().code() != api::StatusCode::kNotFound) {
      continue;  // its worker still exists (or we cannot tell): keep it
    }
    ASSIGN_OR_RETURN(
        SessionLifecycle::RowDeletion done,
        sessions_.DeleteRecorded(
            record, agents, all, options_.session_delete, stop,
            [&](const std::string& id, const reconcilers_internal::SessionDeleteResult& result) {
              if (!result.deleted) {
                return;
              }
              deleted_total_.fetch_add(1);
              events_.Warning(record.owner, "GarbageCollected",
                              "deleted orphaned session " + id + " (its AgentWorker is gone)");
            }));
    attempts += done.attempts;
    deleted += done.deleted;
  }
  return deleted;
}

}  // namespace sbx::controller
