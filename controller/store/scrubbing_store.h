// ScrubbingStore: a Store decorator that passes everything the controller writes where people
// look — every string of an object's status (condition messages, setup output, exit reasons …)
// and every event — through one scrub function before it reaches the database (SECURITY.md).
// sbxd wraps its store in one with log::Scrub, so status, events and log lines are scrubbed of
// the same process-wide set of secrets, whichever reconciler wrote them and whatever the secret
// was last seen as. Reads and spec writes pass through unchanged.
//
// Thread-safe if the wrapped store and the scrub function are; the wrapped store must outlive it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "controller/store/store.h"

namespace sbx::controller {

class ScrubbingStore final : public Store {
 public:
  using ScrubFn = std::function<std::string(std::string_view)>;
  ScrubbingStore(Store& store, ScrubFn scrub) : store_(store), scrub_(std::move(scrub)) {}

  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                           const ApplyOptions& options) override {
    return store_.Apply(objects, options);
  }
  StatusOr<Object> Get(const ObjectKey& key) override { return store_.Get(key); }
  StatusOr<std::vector<Object>> List(const ListOptions& options) override {
    return store_.List(options);
  }
  // The status, scrubbed; kInternal if scrubbing broke its encoding (it cannot: a secret is
  // registered in its JSON-escaped form too).
  StatusOr<Object> UpdateStatus(const Object& object) override;
  StatusOr<Object> UpdateControllerMetadata(const Object& object) override {
    return store_.UpdateControllerMetadata(object);
  }
  StatusOr<Object> PostWakeHint(const ObjectKey& key) override { return store_.PostWakeHint(key); }
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) override {
    return store_.Delete(key, options);
  }
  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit) override {
    return store_.WatchSince(since, limit);
  }
  StatusOr<int64_t> CurrentRevision() override { return store_.CurrentRevision(); }
  bool WaitForChange(std::chrono::milliseconds timeout) override {
    return store_.WaitForChange(timeout);
  }
  StatusOr<int64_t> CompactChanges(int64_t revision) override {
    return store_.CompactChanges(revision);
  }
  // The event with its reason and message scrubbed.
  Status RecordEvent(const Event& event) override;
  StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>& involved) override {
    return store_.ListEvents(involved);
  }
  StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point cutoff) override {
    return store_.ExpireEvents(cutoff);
  }
  Status PutInventory(const InventoryRecord& record) override {
    return store_.PutInventory(record);
  }
  StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string& workspace,
                                                        const std::string& resource_type,
                                                        const std::string& external_id) override {
    return store_.GetInventory(workspace, resource_type, external_id);
  }
  StatusOr<std::vector<InventoryRecord>> ListInventory(
      const std::optional<std::string>& workspace) override {
    return store_.ListInventory(workspace);
  }
  Status DeleteInventory(const std::string& workspace, const std::string& resource_type,
                         const std::string& external_id) override {
    return store_.DeleteInventory(workspace, resource_type, external_id);
  }
  using Store::TryAcquireLease;
  StatusOr<std::optional<int64_t>> AcquireLease(const std::string& name, const std::string& holder,
                                                std::chrono::milliseconds ttl) override {
    return store_.AcquireLease(name, holder, ttl);
  }
  Status ReleaseLease(const std::string& name, const std::string& holder) override {
    return store_.ReleaseLease(name, holder);
  }
  StatusOr<std::optional<Lease>> GetLease(const std::string& name) override {
    return store_.GetLease(name);
  }
  StatusOr<std::vector<Lease>> ListLeases(const std::string& prefix) override {
    return store_.ListLeases(prefix);
  }

  // The entries with their text scrubbed.
  StatusOr<int64_t> AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                  const std::vector<TaskLogEntry>& entries) override;
  StatusOr<TaskLogPage> ReadTaskLog(const std::string& task_uid, int64_t after_seq = 0,
                                    int limit = 0) override {
    return store_.ReadTaskLog(task_uid, after_seq, limit);
  }
  // Artifacts pass unchanged: AgentTaskReconciler scrubs a collected file before it takes the
  // sha256 that status.artifacts shows (AgentTaskReconcilerOptions::scrub_artifact).
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Artifact& artifact) override {
    return store_.PutArtifact(task, task_uid, artifact);
  }
  StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& task_uid) override {
    return store_.ListArtifacts(task_uid);
  }
  StatusOr<Artifact> GetArtifact(const std::string& task_uid, const std::string& path) override {
    return store_.GetArtifact(task_uid, path);
  }
  Status RecordUsage(const UsageRecord& record) override { return store_.RecordUsage(record); }
  StatusOr<api::UsageSum> SumUsage(const std::string& workspace, int64_t from_ms,
                                   int64_t to_ms) override {
    return store_.SumUsage(workspace, from_ms, to_ms);
  }
  StatusOr<std::vector<UsageTotal>> UsageTotals() override { return store_.UsageTotals(); }
  StatusOr<SlotGrant> AcquireTaskSlot(const std::string& workspace, const ObjectKey& task,
                                      const std::string& task_uid, int limit) override {
    return store_.AcquireTaskSlot(workspace, task, task_uid, limit);
  }
  Status ReleaseTaskSlot(const std::string& task_uid) override {
    return store_.ReleaseTaskSlot(task_uid);
  }
  // Audit records hold names, codes and digests only (never a message), so pass unchanged.
  Status AppendAudit(const AuditRecord& record) override { return store_.AppendAudit(record); }
  StatusOr<std::vector<AuditRecord>> ListAudit(const AuditQuery& query) override {
    return store_.ListAudit(query);
  }
  StatusOr<int64_t> ExpireAudit(std::chrono::system_clock::time_point cutoff) override {
    return store_.ExpireAudit(cutoff);
  }
  // Notifications are written by UpdateStatus from the status it was given, scrubbed above.
  StatusOr<std::vector<Notification>> ListDueNotifications(int64_t now_ms, int limit) override {
    return store_.ListDueNotifications(now_ms, limit);
  }
  Status FinishNotification(int64_t id) override { return store_.FinishNotification(id); }
  Status RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                           const std::string& error) override {
    return store_.RetryNotification(id, attempts, due_ms, scrub_(error));
  }
  StatusOr<std::vector<NotificationCount>> NotificationCounts() override {
    return store_.NotificationCounts();
  }

 private:
  Store& store_;
  const ScrubFn scrub_;
};

}  // namespace sbx::controller
