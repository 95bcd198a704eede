// SqlStore<Db>: the Store operations written once for SqliteStore and PostgresStore (issue #26,
// "one SQL store"): the objects (rows, change log, revision; Apply, Get, List, the controller's
// writes, Delete) in SqlStore itself, and in its base SqlRecords the records beside them — events,
// the inventory of external resources, leases, the AgentTask log and artifacts, the usage ledger,
// task slots, the audit log and the notification outbox. Each backend derives from
// SqlStore<itself> (CRTP) and supplies what differs, the way kine keeps one set of statements
// over a small dialect:
//
//   mu_, options_, clock_, Now()    the store's mutex, its options and clock
//   Query(sql, params, each_row, changed)   one statement with SqlParams; rows; rows changed
//   Txn(Db&): Begin(), BeginRead(), Commit()   a write transaction (SQLite: BEGIN IMMEDIATE) or a
//                                    read snapshot (SQLite: BEGIN; PostgreSQL: REPEATABLE READ)
//   LockKey(key)                     serialize writers of one key until the commit (PostgreSQL:
//                                    pg_advisory_xact_lock; SQLite: nothing, BEGIN IMMEDIATE
//                                    already admits one writer)
//   LockWrites()                     order this write after the object writes in flight
//                                    (PostgreSQL: the revision row's lock; SQLite: nothing)
//   LockRevision()                   the revision, for an object write (PostgreSQL: the row
//                                    locked FOR UPDATE; SQLite: read, BEGIN IMMEDIATE holds it)
//   Notify()                         wake WaitForChange in other processes at the commit
//                                    (PostgreSQL: NOTIFY; SQLite: nothing, data_version does)
//   Committed()                      after an object write's commit (SQLite: wakes this
//                                    process's WaitForChange; PostgreSQL: nothing)
//   database()                       the database's name for messages (path or redacted URL)
//   kParam, kByteOrder, kEventKey, StartsWith(column, param)   the dialect's spellings
//
// The records bump no revision. The definitions are in sql_store_records.cc and
// sql_store_objects.cc, each instantiated there for the two backends. Module-private to
// controller/store.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "controller/store/internal/sql_param.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// The SQL written once over a backend that befriends it (each backend's header names them).
struct ObjectRow;  // one row of the objects table; object_row.h
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

template <typename Db>
class SqlRecords : public Store {
 public:
  // Also drops the involved object's least recently seen events beyond
  // Options::max_events_per_object, in the same transaction.
  Status RecordEvent(const Event& event) final;
  StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>& involved) final;
  StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point cutoff) final;

  Status PutInventory(const InventoryRecord& record) final;
  StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string& workspace,
                                                        const std::string& resource_type,
                                                        const std::string& external_id) final;
  StatusOr<std::vector<InventoryRecord>> ListInventory(
      const std::optional<std::string>& workspace) final;
  Status DeleteInventory(const std::string& workspace, const std::string& resource_type,
                         const std::string& external_id) final;

  using Store::TryAcquireLease;
  StatusOr<std::optional<int64_t>> AcquireLease(const std::string& name, const std::string& holder,
                                                std::chrono::milliseconds ttl) final;
  Status ReleaseLease(const std::string& name, const std::string& holder) final;
  StatusOr<std::optional<Lease>> GetLease(const std::string& name) final;
  StatusOr<std::vector<Lease>> ListLeases(const std::string& prefix) final;

  StatusOr<int64_t> AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                  const std::vector<TaskLogEntry>& entries) final;
  StatusOr<TaskLogPage> ReadTaskLog(const std::string& task_uid, int64_t after_seq = 0,
                                    int limit = 0) final;
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Artifact& artifact) final;
  StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& task_uid) final;
  StatusOr<Artifact> GetArtifact(const std::string& task_uid, const std::string& path) final;

  Status RecordUsage(const UsageRecord& record) final;
  StatusOr<api::UsageSum> SumUsage(const std::string& workspace, int64_t from_ms,
                                   int64_t to_ms) final;
  StatusOr<std::vector<UsageTotal>> UsageTotals() final;
  StatusOr<SlotGrant> AcquireTaskSlot(const std::string& workspace, const ObjectKey& task,
                                      const std::string& task_uid, int limit) final;
  Status ReleaseTaskSlot(const std::string& task_uid) final;

  Status AppendAudit(const AuditRecord& record) final;
  StatusOr<std::vector<AuditRecord>> ListAudit(const AuditQuery& query) final;
  StatusOr<int64_t> ExpireAudit(std::chrono::system_clock::time_point cutoff) final;

  StatusOr<std::vector<Notification>> ListDueNotifications(int64_t now_ms, int limit) final;
  Status FinishNotification(int64_t id) final;
  Status RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                           const std::string& error) final;
  StatusOr<std::vector<NotificationCount>> NotificationCounts() final;

 protected:
  // The one INSERT of each table (InsertRow is the objects'), shared by the operations above,
  // which pass their upsert as `on_conflict` (" ON CONFLICT …"), and ImportFrom (StoreCopier),
  // which writes records as they are and fails on a duplicate. Require mu_ held.
  Status InsertEvent(const Event& event, std::string_view on_conflict = "");
  Status InsertInventory(const InventoryRecord& record, std::string_view on_conflict = "");
  Status InsertTaskLogHead(const ObjectKey& task, const std::string& task_uid, int64_t last_seq,
                           int64_t dropped, std::string_view on_conflict = "");
  // bytes is entry.text's size.
  Status InsertTaskLogEntry(const std::string& task_uid, const TaskLogEntry& entry);
  Status InsertArtifact(const ObjectKey& task, const std::string& task_uid,
                        const Artifact& artifact, std::string_view on_conflict = "");

  // For SqlStore too (a using-declaration there: the base is dependent).
  Db& db() { return static_cast<Db&>(*this); }
  const Db& db() const { return static_cast<const Db&>(*this); }
  // The n-th statement parameter in the dialect ("?1", "$1"); the first n, comma-separated.
  static std::string Param(int n) { return Db::kParam + std::to_string(n); }
  static std::string ParamList(int n) {
    std::string list;
    for (int i = 1; i <= n; ++i) {
      list += (i == 1 ? "" : ", ") + Param(i);
    }
    return list;
  }

 private:
  friend class StoreCopier<Db>;
  // The one integer a statement such as "SELECT coalesce(sum(…), 0) …" reads; 0 without a row.
  StatusOr<int64_t> QueryInt(const std::string& sql, const std::vector<SqlParam>& params);
};

template <typename Db>
class SqlStore : public SqlRecords<Db> {
 public:
  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                           const ApplyOptions& options) final;
  StatusOr<Object> Get(const ObjectKey& key) final;
  StatusOr<std::vector<Object>> List(const ListOptions& options) final;
  // Writes nothing (and keeps resourceVersion) when the status is unchanged.
  StatusOr<Object> UpdateStatus(const Object& object) final;
  // Writes nothing (and keeps resourceVersion) when finalizers and owners are unchanged.
  StatusOr<Object> UpdateControllerMetadata(const Object& object) final;
  StatusOr<Object> PostWakeHint(const ObjectKey& key) final;
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) final;

 protected:
  // What object_writes.h, the watch and StoreCopier build on. Require mu_ held.
  StatusOr<int64_t> ReadRevision();
  Status WriteRevision(int64_t revision);
  StatusOr<std::optional<ObjectRow>> ReadRow(const ObjectKey& key);
  StatusOr<Object> RowToObject(const ObjectRow& row) const;
  Status InsertRow(const ObjectRow& row);
  Status UpdateRow(const ObjectRow& row);
  // Also deletes what is kept beside the object (an AgentTask's log and artifacts).
  Status DeleteRow(const ObjectKey& key);
  Status AppendChange(int64_t revision, Store::ChangeType type, const ObjectKey& key,
                      const ObjectRow* row, bool wake_hint = false);

 private:
  friend class StoreCopier<Db>;
  using SqlRecords<Db>::db;
  using SqlRecords<Db>::Param;
  using SqlRecords<Db>::ParamList;
  // Apply without its audit of a failure (Apply adds that after the rollback); takes mu_.
  StatusOr<std::vector<ApplyResult>> ApplyInTransaction(const std::vector<Object>& objects,
                                                        const ApplyOptions& options);
  // UpdateStatus's, UpdateControllerMetadata's and Delete's transaction; takes mu_.
  template <typename Write>
  auto ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&>;
};

}  // namespace sbx::controller::store_internal
