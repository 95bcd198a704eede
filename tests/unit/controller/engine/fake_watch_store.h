// FakeWatchStore: an in-memory Store with just enough behaviour for the engine's sources —
// List, CurrentRevision, WatchSince, WaitForChange, CompactChanges and PostWakeHint (with
// SqliteStore's rule: watching from before the compacted revision is kOutOfRange) — plus switchable
// failures. Everything else answers kUnimplemented. Thread-safe (one mutex).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "controller/store/store.h"

namespace sbx::controller::testing_internal {

class FakeWatchStore final : public Store {
 public:
  // Writes (or deletes, with object unset) and records a change at the next revision.
  void Put(const api::Object& object) {
    std::lock_guard lock(mu_);
    const ObjectKey key = api::KeyOf(object);
    const bool existed = objects_.contains(key);
    objects_[key] = object;
    changes_.push_back(
        {++revision_, existed ? ChangeType::kModified : ChangeType::kAdded, key, object});
    cv_.notify_all();
  }
  void Remove(const ObjectKey& key) {
    std::lock_guard lock(mu_);
    objects_.erase(key);
    changes_.push_back({++revision_, ChangeType::kDeleted, key, std::nullopt});
    cv_.notify_all();
  }
  // While set, List/WatchSince/CurrentRevision fail with it.
  void FailWith(Status status) {
    std::lock_guard lock(mu_);
    failure_ = std::move(status);
  }
  int list_calls() const {
    std::lock_guard lock(mu_);
    return list_calls_;
  }
  int watch_calls() const {
    std::lock_guard lock(mu_);
    return watch_calls_;
  }

  StatusOr<std::vector<Object>> List(const ListOptions&) override {
    std::lock_guard lock(mu_);
    ++list_calls_;
    if (!failure_.ok()) {
      return failure_;
    }
    std::vector<Object> out;
    for (const auto& [key, object] : objects_) {
      out.push_back(object);
    }
    return out;
  }
  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit) override {
    std::lock_guard lock(mu_);
    ++watch_calls_;
    if (!failure_.ok()) {
      return failure_;
    }
    if (since < compacted_) {
      return Status(api::StatusCode::kOutOfRange,
                    "resourceVersion too old: compacted up to " + std::to_string(compacted_));
    }
    std::vector<Change> out;
    for (const Change& c : changes_) {
      if (c.revision > since && static_cast<int>(out.size()) < limit) {
        out.push_back(c);
      }
    }
    return out;
  }
  StatusOr<int64_t> CurrentRevision() override {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) {
      return failure_;
    }
    return revision_;
  }
  bool WaitForChange(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    const int64_t seen = revision_;
    return cv_.wait_for(lock, timeout, [&] { return revision_ != seen; });
  }
  StatusOr<int64_t> CompactChanges(int64_t revision) override {
    std::lock_guard lock(mu_);
    revision = std::min(revision, revision_);
    const auto end = std::find_if(changes_.begin(), changes_.end(),
                                  [&](const Change& c) { return c.revision > revision; });
    const int64_t deleted = end - changes_.begin();
    changes_.erase(changes_.begin(), end);
    compacted_ = std::max(compacted_, revision);
    return deleted;
  }

  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>&,
                                           const ApplyOptions&) override {
    return Unimplemented();
  }
  StatusOr<Object> Get(const ObjectKey&) override { return Unimplemented(); }
  StatusOr<Object> UpdateStatus(const Object&) override { return Unimplemented(); }
  StatusOr<Object> UpdateControllerMetadata(const Object&) override { return Unimplemented(); }
  // As the real stores: the same object at the next revision, logged as a wake hint.
  StatusOr<Object> PostWakeHint(const ObjectKey& key) override {
    std::lock_guard lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      return api::NotFoundError(key.ToString() + " not found");
    }
    it->second.metadata.resource_version = ++revision_;
    changes_.push_back({revision_, ChangeType::kModified, key, it->second, /*wake_hint=*/true});
    cv_.notify_all();
    return it->second;
  }
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey&, const DeleteOptions&) override {
    return Unimplemented();
  }
  Status RecordEvent(const Event&) override { return Unimplemented(); }
  StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>&) override {
    return Unimplemented();
  }
  StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point) override {
    return Unimplemented();
  }
  Status PutInventory(const InventoryRecord&) override { return Unimplemented(); }
  StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string&, const std::string&,
                                                        const std::string&) override {
    return Unimplemented();
  }
  StatusOr<std::vector<InventoryRecord>> ListInventory(const std::optional<std::string>&) override {
    return Unimplemented();
  }
  Status DeleteInventory(const std::string&, const std::string&, const std::string&) override {
    return Unimplemented();
  }
  StatusOr<std::optional<int64_t>> AcquireLease(const std::string&, const std::string&,
                                                std::chrono::milliseconds) override {
    return Unimplemented();
  }
  Status ReleaseLease(const std::string&, const std::string&) override { return Unimplemented(); }
  StatusOr<std::optional<Lease>> GetLease(const std::string&) override { return Unimplemented(); }
  StatusOr<std::vector<Lease>> ListLeases(const std::string&) override { return Unimplemented(); }
  StatusOr<int64_t> AppendTaskLog(const ObjectKey&, const std::string&,
                                  const std::vector<TaskLogEntry>&) override {
    return Unimplemented();
  }
  StatusOr<TaskLogPage> ReadTaskLog(const std::string&, int64_t, int) override {
    return Unimplemented();
  }
  Status PutArtifact(const ObjectKey&, const std::string&, const Artifact&) override {
    return Unimplemented();
  }
  StatusOr<std::vector<Artifact>> ListArtifacts(const std::string&) override {
    return Unimplemented();
  }
  StatusOr<Artifact> GetArtifact(const std::string&, const std::string&) override {
    return Unimplemented();
  }

 private:
  static Status Unimplemented() { return api::UnimplementedError("not in FakeWatchStore"); }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<ObjectKey, Object> objects_;  // Guarded by mu_.
  std::vector<Change> changes_;          // Guarded by mu_.
  int64_t revision_ = 0;                 // Guarded by mu_.
  int64_t compacted_ = 0;                // Guarded by mu_.
  Status failure_;                       // Guarded by mu_.
  int list_calls_ = 0;                   // Guarded by mu_.
  int watch_calls_ = 0;                  // Guarded by mu_.
};

// An Enqueuer that records what it was given. Thread-safe.
class RecordingEnqueuer final : public Enqueuer {
 public:
  void Enqueue(const ObjectKey& key) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
  }
  void EnqueueDependents(const ObjectKey& key) override {
    std::lock_guard lock(mu_);
    dependents_of_.push_back(key);
  }
  std::vector<ObjectKey> keys() const {
    std::lock_guard lock(mu_);
    return keys_;
  }
  // The keys whose dependents (only) were enqueued.
  std::vector<ObjectKey> dependents_of() const {
    std::lock_guard lock(mu_);
    return dependents_of_;
  }
  size_t count(const ObjectKey& key) const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::count(keys_.begin(), keys_.end(), key));
  }

 private:
  mutable std::mutex mu_;
  std::vector<ObjectKey> keys_;           // Guarded by mu_.
  std::vector<ObjectKey> dependents_of_;  // Guarded by mu_.
};

}  // namespace sbx::controller::testing_internal
