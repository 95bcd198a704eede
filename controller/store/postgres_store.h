// PostgresStore: the Store on a PostgreSQL 15 database (DESIGN §7.4, issue #17), for
// installations that outgrow one machine; SqliteStore stays the embedded default. Same contract
// as SqliteStore (store.h), checked by the same conformance tests.
//
// Opened with a libpq connection string, normally `postgres://user@host:port/db`. The password
// comes from PGPASSFILE (libpq's ~/.pgpass rules) or the URL; every message that names the
// database shows it through RedactDatabaseUrl, so no password reaches a log, status or error.
//
// Schema: versioned migrations (internal/postgres_schema.cc), each applied in a transaction of
// its own and recorded in schema_migrations; Open migrates under a transaction-level advisory
// lock, so replicas starting at once migrate once.
//
// Revisions: every object write (Apply, UpdateStatus, UpdateControllerMetadata, Delete,
// PostWakeHint) is one
// transaction that first locks the single row of the `revision` table (SELECT … FOR UPDATE), so
// object writes from every process serialise, revisions are gap-free and committed in order, and
// the change log holds exactly the revisions (compacted, current] as in SqliteStore. Events,
// inventory, leases, task logs and artifacts bump no revision and do not take that lock (task
// log appends and artifact puts of one task serialise on an advisory lock of the task's uid).
//
// Watch: WatchSince reads the change log (the same kOutOfRange after compaction). Every write
// transaction also sends NOTIFY sbx_store; WaitForChange LISTENs on a second connection (opened
// on first use) and wakes on any commit of any process, falling back to the poll interval.
//
// Thread-safety: one query connection guarded by mu_ and one listening connection guarded by
// listen_mu_; every method may be called from any thread, and any number of PostgresStore
// instances (in any number of processes or machines) may share a database. Connections broken
// between transactions are re-established on the next call. Ownership: the store owns its
// connections; the optional Clock must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

namespace store_internal {
class PgConnection;
class PgRow;
struct ObjectRow;
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

struct PostgresStoreOptions {
  // Longest single sleep of WaitForChange between checks of the listening connection.
  std::chrono::milliseconds poll_interval{100};
  // Source of timestamps and lease expiry; SystemClock when null. Not owned.
  Clock* clock = nullptr;
  // As SqliteStoreOptions: RecordEvent keeps at most this many events per involved object
  // (0 = unbounded), AppendTaskLog at most this much text per AgentTask.
  int max_events_per_object = 100;
  int64_t task_log_max_bytes = int64_t{1} << 20;
};

// True for the connection strings PostgresStore takes: postgres:// and postgresql:// URLs.
bool IsPostgresUrl(std::string_view db);
// `url` with its password replaced by "***" (URL userinfo, `password=` parameters); safe to log.
std::string RedactDatabaseUrl(std::string_view url);

class PostgresStore final : public Store {
 public:
  using Options = PostgresStoreOptions;

  // Connects to `url` and migrates the schema. kUnavailable if the server cannot be reached,
  // kUnauthenticated if it refuses the login, kFailedPrecondition if the database has a schema
  // newer than this build or tables but no sbx schema. Messages name the redacted URL only.
  static StatusOr<std::unique_ptr<PostgresStore>> Open(const std::string& url,
                                                       Options options = {});

  ~PostgresStore() override;
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  static int LatestSchemaVersion();
  // The URL with its password redacted.
  const std::string& redacted_url() const { return redacted_url_; }

  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                           const ApplyOptions& options) override;
  StatusOr<Object> Get(const ObjectKey& key) override;
  StatusOr<std::vector<Object>> List(const ListOptions& options) override;
  StatusOr<Object> UpdateStatus(const Object& object) override;
  StatusOr<Object> UpdateControllerMetadata(const Object& object) override;
  StatusOr<Object> PostWakeHint(const ObjectKey& key) override;
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) override;

  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) override;
  StatusOr<int64_t> CurrentRevision() override;
  bool WaitForChange(std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> CompactChanges(int64_t revision) override;

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

  // postgres_store_copy.cc. ExportTo reads in one REPEATABLE READ, READ ONLY transaction (one
  // snapshot); ImportFrom writes in one transaction holding the revision row's lock.
  Status ExportTo(StoreSink& sink) override;
  Status ImportFrom(const std::function<Status(StoreSink&)>& fill) override;

  // As SqliteStore::Stats.
  struct Stats {
    int64_t revision = 0;
    int64_t compacted_revision = 0;
    int64_t changes = 0;
    int64_t events = 0;
  };
  StatusOr<Stats> ReadStats();

 private:
  using Row = store_internal::ObjectRow;
  // What store_internal::StoreCopier uses: the rows of Query, its placeholders ($1, $2, …).
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
  using CopyRow = store_internal::PgRow;
  static constexpr char kParam = '$';

  PostgresStore(std::string redacted_url, std::string url, Options options,
                std::unique_ptr<store_internal::PgConnection> conn);

  // UpdateStatus's, UpdateControllerMetadata's and Delete's transaction (the .cc has the
  // definition); takes mu_.
  template <typename Write>
  auto ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&>;
  // Apply without its audit of a failure (Apply adds that after the rollback); takes mu_.
  StatusOr<std::vector<ApplyResult>> ApplyInTransaction(const std::vector<Object>& objects,
                                                        const ApplyOptions& options);

  // All below require mu_ held.
  Status Migrate();
  // Locks the revision row for this transaction and returns its value.
  StatusOr<int64_t> LockRevision();
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
  StatusOr<int64_t> ReadCompactedRevision();
  // Runs `sql` with `params` as $1, $2, … and calls `each_row` (when not null) on each row,
  // stopping at its first error.
  Status Query(std::string_view sql, const std::vector<std::string>& params,
               const std::function<Status(const store_internal::PgRow&)>& each_row);
  // NOTIFY the listeners of WaitForChange (delivered at commit).
  Status Notify();
  std::string Now() const;
  std::string NewUid();

  // Requires listen_mu_ held: opens the listening connection if needed, then drains it.
  StatusOr<int> DrainListenerLocked();

  const std::string redacted_url_;
  const std::string url_;  // with the password, if any: only ever passed to libpq
  const Options options_;
  SystemClock system_clock_;
  Clock& clock_;

  std::mutex mu_;
  std::unique_ptr<store_internal::PgConnection> conn_;  // Guarded by mu_.
  std::mt19937_64 uid_random_;                          // Guarded by mu_.

  std::mutex listen_mu_;
  std::unique_ptr<store_internal::PgConnection> listener_;  // Guarded by listen_mu_.
};

}  // namespace sbx::controller
