// SqliteStore: the Store on one SQLite file, shared by sbxctl and sbxd (DESIGN §3).
//
// The file is opened in WAL mode with a busy timeout, foreign keys on and synchronous=NORMAL;
// its schema is versioned (PRAGMA user_version, plus a schema_migrations table for humans) and
// migrated forward in one transaction by Open. Every write is one `BEGIN IMMEDIATE` transaction,
// so writers in several processes serialise cleanly and revisions are committed in order; a
// database that stays locked past the busy timeout gives kUnavailable naming the path.
//
// Revisions count object writes only (Apply, UpdateStatus, UpdateControllerMetadata, Delete,
// PostWakeHint):
// each changed object gets the next revision and one row in the change log that WatchSince
// reads. Events, inventory and leases do not bump the revision.
//
// Bounded growth. The change log holds exactly the revisions (compacted, current]: revisions are
// contiguous (one change row each, committed in order) and CompactChanges only ever deletes a
// prefix, so the compaction point needs no column of its own — it is the oldest row's revision
// minus one, or the current revision when the log is empty. WatchSince(since) notices a missing
// revision right after `since` and answers kOutOfRange instead of skipping it. Events are
// bounded per object (RecordEvent keeps the newest Options::max_events_per_object of the
// involved object) and by age (ExpireEvents). The file does not shrink: freed pages are reused,
// so its size follows the high-water mark of what is kept.
//
// Thread-safety: one SQLite connection guarded by one mutex; every method may be called from
// any thread. Several SqliteStore instances (in one or several processes) may share a file.
// Ownership: the store owns its connection; the optional Clock must outlive it.
//
// Layout: sqlite_store.cc opens and migrates the file and holds the SQLite plumbing;
// sqlite_store_objects.cc, _watch.cc, _events.cc, _inventory.cc (inventory and leases), _tasks.cc
// and _copy.cc (export and import) implement the Store operations; internal/ holds the schema
// (sqlite_schema), the statement and transaction handles (sqlite_statement) and the dialect-neutral
// row, change-log JSON and decoding (object_row), row readers (store_rows) and export/import
// (store_copier) that PostgresStore shares.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "controller/base/clock.h"
#include "controller/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace sbx::controller {

namespace store_internal {
struct ObjectRow;  // one row of the objects table; internal/object_row.h
template <typename Db>
class StoreCopier;  // ExportTo and ImportFrom; internal/store_copier.h
template <typename Db>
class UsageLedger;  // the usage ledger's SQL; internal/usage_ledger.h
template <typename Db>
class TaskSlots;  // the task slots' SQL; internal/task_slots.h
template <typename Db>
class ObjectWrites;  // what the object writes do to the rows; internal/object_writes.h
template <typename Db>
class AuditLog;  // the audit log's SQL; internal/audit_log.h
template <typename Db>
class NotificationOutbox;  // the notification outbox's SQL; internal/notification_outbox.h
}  // namespace store_internal

struct SqliteStoreOptions {
  // How long a write waits for another writer before giving up with kUnavailable.
  std::chrono::milliseconds busy_timeout{5000};
  // How often WaitForChange polls PRAGMA data_version.
  std::chrono::milliseconds poll_interval{10};
  // Source of timestamps and lease expiry; SystemClock when null. Not owned.
  Clock* clock = nullptr;
  // RecordEvent keeps at most this many events per involved object, dropping the least recently
  // seen ones (Kubernetes keeps events by TTL only; a crash-looping object with varying messages
  // would otherwise fill the table within one TTL). 0 = unbounded.
  int max_events_per_object = 100;
  // AppendTaskLog keeps at most this much text per AgentTask (oldest deltas dropped first).
  int64_t task_log_max_bytes = int64_t{1} << 20;
};

class SqliteStore final : public Store {
 public:
  using Options = SqliteStoreOptions;

  // Opens (creating if absent) the database at `path`, or a private in-memory one for
  // ":memory:", and migrates its schema. What Open creates is private to the owner: missing
  // parent directories mode 0700, the database file (hence its -wal and -shm) mode 0600; an
  // existing directory or file keeps its mode. Errors name the path: kFailedPrecondition if a
  // directory cannot be created, or the file cannot be opened, is not an SQLite/sbx database or
  // has a schema newer than this build knows; kDataLoss if it is corrupt; kUnavailable if it
  // stays locked past the busy timeout.
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, Options options = {});

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // The schema version this build creates and understands.
  static int LatestSchemaVersion();
  // OK if `path` is an existing sbx store file. Opened read-only, so it changes nothing: an empty
  // file, another program's SQLite file, or no SQLite file at all is kFailedPrecondition (Open
  // would turn the first two into an sbx store). For a source that must not be written.
  static Status CheckIsSbxFile(const std::string& path);
  const std::string& path() const { return path_; }

  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                           const ApplyOptions& options) override;
  StatusOr<Object> Get(const ObjectKey& key) override;
  StatusOr<std::vector<Object>> List(const ListOptions& options) override;
  // Writes nothing (and keeps resourceVersion) when the status is unchanged.
  StatusOr<Object> UpdateStatus(const Object& object) override;
  // Writes nothing (and keeps resourceVersion) when finalizers and owners are unchanged.
  StatusOr<Object> UpdateControllerMetadata(const Object& object) override;
  StatusOr<Object> PostWakeHint(const ObjectKey& key) override;
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) override;

  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) override;
  StatusOr<int64_t> CurrentRevision() override;
  bool WaitForChange(std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> CompactChanges(int64_t revision) override;

  // Also drops the involved object's least recently seen events beyond
  // Options::max_events_per_object, in the same transaction.
  Status RecordEvent(const Event& event) override;
  StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>& involved) override;
  StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point cutoff) override;

  Status PutInventory(const InventoryRecord& record) override;
  StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string& workspace,
                                                        const std::string& resource_type,
                                                        const std::string& external_id) override;
  StatusOr<std::vector<InventoryRecord>> ListInventory(
      const std::optional<std::string>& workspace) override;
  Status DeleteInventory(const std::string& workspace, const std::string& resource_type,
                         const std::string& external_id) override;

  using Store::TryAcquireLease;
  StatusOr<std::optional<int64_t>> AcquireLease(const std::string& name, const std::string& holder,
                                                std::chrono::milliseconds ttl) override;
  Status ReleaseLease(const std::string& name, const std::string& holder) override;
  StatusOr<std::optional<Lease>> GetLease(const std::string& name) override;
  StatusOr<std::vector<Lease>> ListLeases(const std::string& prefix) override;

  // What the bounds act on, for tests, benchmarks and logs.
  struct Stats {
    int64_t revision = 0;            // current revision
    int64_t compacted_revision = 0;  // WatchSince(since) needs since >= this
    int64_t changes = 0;             // rows in the change log
    int64_t events = 0;              // rows in the events table
  };
  StatusOr<Stats> ReadStats();
  // Copies the WAL into the database file and truncates the WAL to zero bytes
  // (PRAGMA wal_checkpoint(TRUNCATE)), so that the file sizes show what is stored. kUnavailable
  // if readers or writers of other connections kept it from completing.
  Status Checkpoint();

  StatusOr<int64_t> AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                  const std::vector<TaskLogEntry>& entries) override;
  StatusOr<TaskLogPage> ReadTaskLog(const std::string& task_uid, int64_t after_seq = 0,
                                    int limit = 0) override;
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Artifact& artifact) override;
  StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& task_uid) override;
  StatusOr<Artifact> GetArtifact(const std::string& task_uid, const std::string& path) override;
  Status RecordUsage(const UsageRecord& record) override;
  StatusOr<api::UsageSum> SumUsage(const std::string& workspace, int64_t from_ms,
                                   int64_t to_ms) override;
  StatusOr<std::vector<UsageTotal>> UsageTotals() override;
  StatusOr<SlotGrant> AcquireTaskSlot(const std::string& workspace, const ObjectKey& task,
                                      const std::string& task_uid, int limit) override;
  Status ReleaseTaskSlot(const std::string& task_uid) override;
  Status AppendAudit(const AuditRecord& record) override;
  StatusOr<std::vector<AuditRecord>> ListAudit(const AuditQuery& query) override;
  StatusOr<int64_t> ExpireAudit(std::chrono::system_clock::time_point cutoff) override;
  StatusOr<std::vector<Notification>> ListDueNotifications(int64_t now_ms, int limit) override;
  Status FinishNotification(int64_t id) override;
  Status RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                           const std::string& error) override;
  StatusOr<std::vector<NotificationCount>> NotificationCounts() override;

  // sqlite_store_copy.cc. ExportTo reads in one deferred read transaction (a WAL snapshot);
  // ImportFrom writes in one BEGIN IMMEDIATE transaction.
  Status ExportTo(StoreSink& sink) override;
  Status ImportFrom(const std::function<Status(StoreSink&)>& fill) override;

 private:
  class Stmt;
  class Txn;
  using Row = store_internal::ObjectRow;
  // What store_internal::StoreCopier uses: the rows of Query, its placeholders (?1, ?2, …).
  template <typename Db>
  friend class store_internal::StoreCopier;
  template <typename Db>
  friend class store_internal::UsageLedger;
  template <typename Db>
  friend class store_internal::TaskSlots;
  template <typename Db>
  friend class store_internal::ObjectWrites;
  template <typename Db>
  friend class store_internal::AuditLog;
  template <typename Db>
  friend class store_internal::NotificationOutbox;
  using CopyRow = Stmt;
  static constexpr char kParam = '?';

  SqliteStore(std::string path, Options options, sqlite3* db);

  // UpdateStatus's, UpdateControllerMetadata's and Delete's transaction (the .cc has the
  // definition); takes mu_.
  template <typename Write>
  auto ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&>;
  // Apply without its audit of a failure (Apply adds that after the rollback); takes mu_.
  StatusOr<std::vector<ApplyResult>> ApplyInTransaction(const std::vector<Object>& objects,
                                                        const ApplyOptions& options);

  // All below require mu_ held.
  Status Configure();
  Status Migrate();
  StatusOr<Stmt> Prepare(std::string_view sql);
  Status Exec(std::string_view sql);
  Status Error(int rc, std::string_view what) const;
  StatusOr<int64_t> ReadRevision();
  Status WriteRevision(int64_t revision);
  StatusOr<std::optional<Row>> ReadRow(const ObjectKey& key);
  StatusOr<Object> RowToObject(const Row& row) const;
  Status InsertRow(const Row& row);
  Status UpdateRow(const Row& row);
  Status DeleteRow(const ObjectKey& key);
  Status AppendChange(int64_t revision, ChangeType type, const ObjectKey& key, const Row* row,
                      bool wake_hint = false);
  // The one INSERT of each table beside the objects (InsertRow is the objects'), shared by the
  // Store operations, which pass their upsert as `on_conflict` (" ON CONFLICT …"), and
  // ImportFrom, which writes records as they are and fails on a duplicate.
  Status InsertEvent(const Event& event, std::string_view on_conflict = "");
  Status InsertInventory(const InventoryRecord& record, std::string_view on_conflict = "");
  Status InsertTaskLogHead(const ObjectKey& task, const std::string& task_uid, int64_t last_seq,
                           int64_t dropped, std::string_view on_conflict = "");
  // bytes is entry.text's size.
  Status InsertTaskLogEntry(const std::string& task_uid, const TaskLogEntry& entry);
  Status InsertArtifact(const ObjectKey& task, const std::string& task_uid,
                        const Artifact& artifact, std::string_view on_conflict = "");
  StatusOr<int64_t> DataVersion();
  // Revisions <= this are no longer in the change log.
  StatusOr<int64_t> ReadCompactedRevision();
  // Runs `sql` with `params` bound to ?1, ?2, … and calls `each_row` (when not null) on each
  // row, stopping at its first error.
  Status Query(std::string_view sql, const std::vector<std::string>& params,
               const std::function<Status(const Stmt&)>& each_row);
  std::string Now() const;
  std::string NewUid();

  const std::string path_;
  const Options options_;
  SystemClock system_clock_;
  Clock& clock_;

  std::mutex mu_;
  std::condition_variable committed_;
  sqlite3* db_ = nullptr;  // Guarded by mu_.
  // Prepared statements by SQL text, finalized on close. Guarded by mu_.
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
  std::mt19937_64 uid_random_;       // Guarded by mu_.
  uint64_t local_commits_ = 0;       // Guarded by mu_; object commits by this instance.
  int64_t seen_data_version_ = -1;   // Guarded by mu_; as of the last watch read.
  uint64_t seen_local_commits_ = 0;  // Guarded by mu_.
};

}  // namespace sbx::controller
