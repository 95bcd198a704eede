// SqlRecords<Db> (sql_store.h): the records beside the objects, written once over the two
// backends' Query and dialect, and instantiated for SqliteStore and PostgresStore at the end.
#include <algorithm>
#include <mutex>
#include <utility>

#include "api/rfc3339.h"
#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/internal/sql_store.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/internal/task_slots.h"
#include "controller/store/internal/usage_ledger.h"
#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller::store_internal {

using api::KindName;
using api::OkStatus;

// Reads the one integer of a statement like "SELECT coalesce(sum(…), 0) …" (0 without a row).
template <typename Db>
StatusOr<int64_t> SqlRecords<Db>::QueryInt(const std::string& sql,
                                           const std::vector<SqlParam>& params) {
  int64_t value = 0;
  RETURN_IF_ERROR(db().Query(sql, params, [&](const typename Db::CopyRow& row) {
    value = row.Int(0);
    return OkStatus();
  }));
  return value;
}

// ---- events -----------------------------------------------------------------------------------

template <typename Db>
Status SqlRecords<Db>::RecordEvent(const Event& event) {
  std::lock_guard lock(db().mu_);
  const std::string now = db().Now();
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(InsertEvent(RecordedEvent(event, now),
                              " ON CONFLICT " + std::string(Db::kEventKey) +
                                  " DO UPDATE SET count = events.count + excluded.count, "
                                  "last_seen = excluded.last_seen"));
  if (db().options_.max_events_per_object > 0) {
    // Both lookups use the unique index, whose prefix is the involved object.
    RETURN_IF_ERROR(db().Query(
        "DELETE FROM events WHERE kind = " + Param(1) + " AND namespace = " + Param(2) +
            " AND name = " + Param(3) + " AND id NOT IN (SELECT id FROM events WHERE kind = " +
            Param(1) + " AND namespace = " + Param(2) + " AND name = " + Param(3) +
            " ORDER BY last_seen DESC, id DESC LIMIT " + Param(4) + ")",
        {KindName(event.involved.kind), event.involved.namespace_, event.involved.name,
         SqlParam::Int(db().options_.max_events_per_object)},
        nullptr));
  }
  RETURN_IF_ERROR(db().Notify());
  return txn.Commit();
}

template <typename Db>
Status SqlRecords<Db>::InsertEvent(const Event& event, std::string_view on_conflict) {
  return db().Query("INSERT INTO events (" + std::string(kEventColumns) + ") VALUES (" +
                        ParamList(9) + ")" + std::string(on_conflict),
                    {KindName(event.involved.kind), event.involved.namespace_, event.involved.name,
                     event.type, event.reason, SqlParam::Bytes(event.message),
                     SqlParam::Int(event.count), event.first_seen, event.last_seen},
                    nullptr);
}

template <typename Db>
StatusOr<int64_t> SqlRecords<Db>::ExpireEvents(std::chrono::system_clock::time_point cutoff) {
  // last_seen is RFC 3339 UTC with second precision (FormatRfc3339), so text order is time order
  // (a comparison of ASCII digits, the same in every collation).
  const std::string before = FormatRfc3339(cutoff);
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  int64_t deleted = 0;
  RETURN_IF_ERROR(
      db().Query("DELETE FROM events WHERE last_seen < " + Param(1), {before}, nullptr, &deleted));
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

template <typename Db>
StatusOr<std::vector<Store::Event>> SqlRecords<Db>::ListEvents(
    const std::optional<ObjectKey>& involved) {
  std::string sql = "SELECT " + std::string(kEventColumns) + " FROM events";
  std::vector<SqlParam> params;
  if (involved) {
    sql += " WHERE kind = " + Param(1) + " AND namespace = " + Param(2) + " AND name = " + Param(3);
    params = {KindName(involved->kind), involved->namespace_, involved->name};
  }
  sql += " ORDER BY last_seen, id";
  std::lock_guard lock(db().mu_);
  std::vector<Event> out;
  RETURN_IF_ERROR(db().Query(sql, params, [&](const typename Db::CopyRow& row) -> Status {
    ASSIGN_OR_RETURN(Event event, ReadEventColumns(db().database(), row));
    out.push_back(std::move(event));
    return OkStatus();
  }));
  return out;
}

// ---- inventory --------------------------------------------------------------------------------

template <typename Db>
Status SqlRecords<Db>::PutInventory(const InventoryRecord& record) {
  std::lock_guard lock(db().mu_);
  const std::string now = db().Now();
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(
      InsertInventory(PutInventoryRecord(record, now),
                      " ON CONFLICT (workspace, resource_type, external_id) DO UPDATE SET "
                      "state = excluded.state, owner_kind = excluded.owner_kind, "
                      "owner_namespace = excluded.owner_namespace, owner_name = "
                      "excluded.owner_name, owner_uid = excluded.owner_uid, updated_at = "
                      "excluded.updated_at"));
  return txn.Commit();
}

template <typename Db>
Status SqlRecords<Db>::InsertInventory(const InventoryRecord& record,
                                       std::string_view on_conflict) {
  return db().Query(
      "INSERT INTO inventory (" + std::string(kInventoryColumns) + ") VALUES (" + ParamList(10) +
          ")" + std::string(on_conflict),
      {record.workspace, record.resource_type, record.external_id, InventoryStateName(record.state),
       KindName(record.owner.kind), record.owner.namespace_, record.owner.name, record.owner_uid,
       record.created_at, record.updated_at},
      nullptr);
}

template <typename Db>
StatusOr<std::optional<Store::InventoryRecord>> SqlRecords<Db>::GetInventory(
    const std::string& workspace, const std::string& resource_type,
    const std::string& external_id) {
  std::lock_guard lock(db().mu_);
  std::optional<InventoryRecord> found;
  RETURN_IF_ERROR(db().Query(
      "SELECT " + std::string(kInventoryColumns) + " FROM inventory WHERE workspace = " + Param(1) +
          " AND resource_type = " + Param(2) + " AND external_id = " + Param(3),
      {workspace, resource_type, external_id}, [&](const typename Db::CopyRow& row) -> Status {
        ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(db().database(), row));
        found = std::move(record);
        return OkStatus();
      }));
  return found;
}

template <typename Db>
StatusOr<std::vector<Store::InventoryRecord>> SqlRecords<Db>::ListInventory(
    const std::optional<std::string>& workspace) {
  std::string sql = "SELECT " + std::string(kInventoryColumns) + " FROM inventory";
  std::vector<SqlParam> params;
  if (workspace) {
    sql += " WHERE workspace = " + Param(1);
    params.emplace_back(*workspace);
  }
  const std::string bytes(Db::kByteOrder);
  sql += " ORDER BY workspace" + bytes + ", resource_type" + bytes + ", external_id" + bytes;
  std::lock_guard lock(db().mu_);
  std::vector<InventoryRecord> out;
  RETURN_IF_ERROR(db().Query(sql, params, [&](const typename Db::CopyRow& row) -> Status {
    ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(db().database(), row));
    out.push_back(std::move(record));
    return OkStatus();
  }));
  return out;
}

template <typename Db>
Status SqlRecords<Db>::DeleteInventory(const std::string& workspace,
                                       const std::string& resource_type,
                                       const std::string& external_id) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(db().Query("DELETE FROM inventory WHERE workspace = " + Param(1) +
                                 " AND resource_type = " + Param(2) +
                                 " AND external_id = " + Param(3),
                             {workspace, resource_type, external_id}, nullptr));
  return txn.Commit();
}

// ---- leases -----------------------------------------------------------------------------------

template <typename Db>
StatusOr<std::optional<int64_t>> SqlRecords<Db>::AcquireLease(const std::string& name,
                                                              const std::string& holder,
                                                              std::chrono::milliseconds ttl) {
  if (holder.empty()) {
    return api::InvalidArgumentError("lease " + name + ": empty holder");
  }
  const auto now = db().clock_.Now();
  const int64_t now_ms = api::UnixMillis(now);
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  // One statement: take the row if it is free, expired or ours. Concurrent callers serialise on
  // the row (PostgreSQL) or the database (SQLite), and the WHERE of the update is evaluated
  // against the latest committed holder. A renewal keeps the tenure's token; a lease taken anew
  // (released, expired) gets the next one.
  std::optional<int64_t> token;
  RETURN_IF_ERROR(db().Query(
      "INSERT INTO leases (name, holder, expires_at_ms, renewed_at, token) VALUES (" +
          ParamList(4) +
          ", 1) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at_ms = "
          "excluded.expires_at_ms, renewed_at = excluded.renewed_at, token = CASE WHEN "
          "leases.expires_at_ms > " +
          Param(5) + " THEN leases.token ELSE leases.token + 1 END WHERE leases.holder = " +
          "excluded.holder OR leases.expires_at_ms <= " + Param(5) + " RETURNING token",
      {name, holder, SqlParam::Int(now_ms + ttl.count()), FormatRfc3339(now),
       SqlParam::Int(now_ms)},
      [&](const typename Db::CopyRow& row) {
        token = row.Int(0);
        return OkStatus();
      }));
  RETURN_IF_ERROR(txn.Commit());
  return token;
}

template <typename Db>
Status SqlRecords<Db>::ReleaseLease(const std::string& name, const std::string& holder) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(db().Query("UPDATE leases SET holder = '', expires_at_ms = 0 WHERE name = " +
                                 Param(1) + " AND holder = " + Param(2),
                             {name, holder}, nullptr));
  return txn.Commit();
}

template <typename Db>
StatusOr<std::optional<Store::Lease>> SqlRecords<Db>::GetLease(const std::string& name) {
  std::lock_guard lock(db().mu_);
  std::optional<Lease> lease;
  RETURN_IF_ERROR(db().Query("SELECT " + std::string(kLeaseColumns) +
                                 " FROM leases WHERE name = " + Param(1) + " AND holder <> ''",
                             {name}, [&](const typename Db::CopyRow& row) {
                               lease = ReadLeaseColumns(row);
                               return OkStatus();
                             }));
  return lease;
}

template <typename Db>
StatusOr<std::vector<Store::Lease>> SqlRecords<Db>::ListLeases(const std::string& prefix) {
  std::lock_guard lock(db().mu_);
  // Bytes compared, not LIKE: a prefix may hold '%' or '_'.
  std::vector<Lease> leases;
  RETURN_IF_ERROR(db().Query("SELECT " + std::string(kLeaseColumns) + " FROM leases WHERE " +
                                 Db::StartsWith("name", Param(1)) +
                                 " AND holder <> '' ORDER BY name" + std::string(Db::kByteOrder),
                             {prefix}, [&](const typename Db::CopyRow& row) {
                               leases.push_back(ReadLeaseColumns(row));
                               return OkStatus();
                             }));
  return leases;
}

// ---- AgentTask log and artifacts --------------------------------------------------------------

template <typename Db>
StatusOr<int64_t> SqlRecords<Db>::AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                                const std::vector<TaskLogEntry>& entries) {
  std::lock_guard lock(db().mu_);
  const std::string now = db().Now();
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  // Appenders of one task (in any process) take turns: seq is read, then written.
  RETURN_IF_ERROR(db().LockKey(task_uid));
  ASSIGN_OR_RETURN(
      int64_t seq,
      QueryInt("SELECT last_seq FROM task_log_heads WHERE task_uid = " + Param(1), {task_uid}));
  const int64_t bound = std::max<int64_t>(db().options_.task_log_max_bytes, 1);
  for (const TaskLogEntry& e : entries) {
    ++seq;
    RETURN_IF_ERROR(InsertTaskLogEntry(task_uid, StoredTaskLogEntry(e, seq, bound, now)));
  }
  RETURN_IF_ERROR(InsertTaskLogHead(task, task_uid, seq, 0,
                                    " ON CONFLICT (task_uid) DO UPDATE SET last_seq = "
                                    "excluded.last_seq"));
  // The bound: drop the oldest deltas first (their text is also in the item results that
  // follow them), then the oldest entries of any kind, until the text fits.
  for (std::string_view kinds : {"kind IN ('assistant.delta', 'output.delta')", "1 = 1"}) {
    for (;;) {
      ASSIGN_OR_RETURN(
          const int64_t total,
          QueryInt("SELECT coalesce(sum(bytes), 0) FROM task_log WHERE task_uid = " + Param(1),
                   {task_uid}));
      if (total <= bound) {
        break;
      }
      // The oldest rows of this class whose sizes cover the excess (at least one).
      std::vector<int64_t> doomed;
      int64_t freed = 0;
      RETURN_IF_ERROR(db().Query("SELECT seq, bytes FROM task_log WHERE task_uid = " + Param(1) +
                                     " AND " + std::string(kinds) + " ORDER BY seq LIMIT 256",
                                 {task_uid}, [&](const typename Db::CopyRow& row) {
                                   if (freed < total - bound) {
                                     doomed.push_back(row.Int(0));
                                     freed += row.Int(1);
                                   }
                                   return OkStatus();
                                 }));
      if (doomed.empty()) {
        break;  // nothing of this class left
      }
      // The doomed rows are the first of their class in seq order: one range of that class.
      RETURN_IF_ERROR(db().Query(
          "DELETE FROM task_log WHERE task_uid = " + Param(1) + " AND seq >= " + Param(2) +
              " AND seq <= " + Param(3) + " AND " + std::string(kinds),
          {task_uid, SqlParam::Int(doomed.front()), SqlParam::Int(doomed.back())}, nullptr));
      RETURN_IF_ERROR(db().Query("UPDATE task_log_heads SET dropped = dropped + " + Param(1) +
                                     " WHERE task_uid = " + Param(2),
                                 {SqlParam::Int(static_cast<int64_t>(doomed.size())), task_uid},
                                 nullptr));
    }
  }
  RETURN_IF_ERROR(db().Notify());
  RETURN_IF_ERROR(txn.Commit());
  return seq;
}

template <typename Db>
Status SqlRecords<Db>::InsertTaskLogHead(const ObjectKey& task, const std::string& task_uid,
                                         int64_t last_seq, int64_t dropped,
                                         std::string_view on_conflict) {
  return db().Query(
      "INSERT INTO task_log_heads (task_uid, kind, namespace, name, last_seq, dropped) VALUES (" +
          ParamList(6) + ")" + std::string(on_conflict),
      {task_uid, KindName(task.kind), task.namespace_, task.name, SqlParam::Int(last_seq),
       SqlParam::Int(dropped)},
      nullptr);
}

template <typename Db>
Status SqlRecords<Db>::InsertTaskLogEntry(const std::string& task_uid, const TaskLogEntry& entry) {
  return db().Query(
      "INSERT INTO task_log (task_uid, " + std::string(kTaskLogEntryColumns) + ", bytes) VALUES (" +
          ParamList(8) + ")",
      {task_uid, SqlParam::Int(entry.seq), TaskLogKindName(entry.kind), entry.item_id,
       SqlParam::Bytes(entry.text),
       entry.exit_code.has_value() ? SqlParam::Int(*entry.exit_code) : SqlParam::Null(), entry.at,
       SqlParam::Int(static_cast<int64_t>(entry.text.size()))},
      nullptr);
}

template <typename Db>
StatusOr<Store::TaskLogPage> SqlRecords<Db>::ReadTaskLog(const std::string& task_uid,
                                                         int64_t after_seq, int limit) {
  std::lock_guard lock(db().mu_);
  // One snapshot: the head and the entries belong together.
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.BeginRead());
  TaskLogPage page;
  RETURN_IF_ERROR(
      db().Query("SELECT last_seq, dropped FROM task_log_heads WHERE task_uid = " + Param(1),
                 {task_uid}, [&](const typename Db::CopyRow& row) {
                   page.last_seq = row.Int(0);
                   page.dropped = row.Int(1);
                   return OkStatus();
                 }));
  std::string sql = "SELECT " + std::string(kTaskLogEntryColumns) +
                    " FROM task_log WHERE task_uid = " + Param(1) + " AND seq > " + Param(2) +
                    " ORDER BY seq";
  std::vector<SqlParam> params = {task_uid, SqlParam::Int(after_seq)};
  if (limit > 0) {
    sql += " LIMIT " + Param(3);
    params.push_back(SqlParam::Int(limit));
  }
  RETURN_IF_ERROR(db().Query(sql, params, [&](const typename Db::CopyRow& row) {
    page.entries.push_back(ReadTaskLogEntryColumns(row));
    return OkStatus();
  }));
  RETURN_IF_ERROR(txn.Commit());
  return page;
}

template <typename Db>
Status SqlRecords<Db>::PutArtifact(const ObjectKey& task, const std::string& task_uid,
                                   const Artifact& artifact) {
  RETURN_IF_ERROR(CheckArtifactSize(artifact));
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  // The 16 MiB check and the write must not interleave with another put of the same task.
  RETURN_IF_ERROR(db().LockKey(task_uid));
  ASSIGN_OR_RETURN(const int64_t others,
                   QueryInt("SELECT coalesce(sum(bytes), 0) FROM artifacts WHERE task_uid = " +
                                Param(1) + " AND path <> " + Param(2),
                            {task_uid, artifact.path}));
  RETURN_IF_ERROR(CheckArtifactBudget(task, artifact, others));
  RETURN_IF_ERROR(InsertArtifact(task, task_uid, artifact,
                                 " ON CONFLICT (task_uid, path) DO UPDATE SET bytes = "
                                 "excluded.bytes, sha256 = excluded.sha256, content = "
                                 "excluded.content"));
  RETURN_IF_ERROR(db().Notify());
  return txn.Commit();
}

template <typename Db>
Status SqlRecords<Db>::InsertArtifact(const ObjectKey& task, const std::string& task_uid,
                                      const Artifact& artifact, std::string_view on_conflict) {
  return db().Query(
      "INSERT INTO artifacts (task_uid, kind, namespace, name, path, bytes, sha256, content) "
      "VALUES (" +
          ParamList(8) + ")" + std::string(on_conflict),
      {task_uid, KindName(task.kind), task.namespace_, task.name, artifact.path,
       SqlParam::Int(artifact.bytes), artifact.sha256, SqlParam::Blob(artifact.content)},
      nullptr);
}

template <typename Db>
StatusOr<std::vector<Store::Artifact>> SqlRecords<Db>::ListArtifacts(const std::string& task_uid) {
  std::lock_guard lock(db().mu_);
  std::vector<Artifact> out;
  RETURN_IF_ERROR(db().Query("SELECT path, bytes, sha256 FROM artifacts WHERE task_uid = " +
                                 Param(1) + " ORDER BY path" + std::string(Db::kByteOrder),
                             {task_uid}, [&](const typename Db::CopyRow& row) {
                               out.push_back(Artifact{row.Text(0), row.Int(1), row.Text(2), ""});
                               return OkStatus();
                             }));
  return out;
}

template <typename Db>
StatusOr<Store::Artifact> SqlRecords<Db>::GetArtifact(const std::string& task_uid,
                                                      const std::string& path) {
  std::lock_guard lock(db().mu_);
  std::optional<Artifact> found;
  RETURN_IF_ERROR(
      db().Query("SELECT path, bytes, sha256, content FROM artifacts WHERE "
                 "task_uid = " +
                     Param(1) + " AND path = " + Param(2),
                 {task_uid, path}, [&](const typename Db::CopyRow& row) {
                   found = Artifact{row.Text(0), row.Int(1), row.Text(2), row.Bytes(3)};
                   return OkStatus();
                 }));
  if (!found) {
    return api::NotFoundError("no artifact " + path + " for task uid " + task_uid);
  }
  return *std::move(found);
}

// ---- usage ledger -----------------------------------------------------------------------------

template <typename Db>
Status SqlRecords<Db>::RecordUsage(const UsageRecord& record) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(
      UsageLedger<Db>::Insert(db(), record, " ON CONFLICT (task_uid, attempt) DO NOTHING"));
  return txn.Commit();
}

template <typename Db>
StatusOr<api::UsageSum> SqlRecords<Db>::SumUsage(const std::string& workspace, int64_t from_ms,
                                                 int64_t to_ms) {
  std::lock_guard lock(db().mu_);
  return UsageLedger<Db>::Sum(db(), workspace, from_ms, to_ms);
}

template <typename Db>
StatusOr<std::vector<Store::UsageTotal>> SqlRecords<Db>::UsageTotals() {
  std::lock_guard lock(db().mu_);
  return UsageLedger<Db>::Totals(db());
}

// ---- task slots ---------------------------------------------------------------------------------

template <typename Db>
StatusOr<Store::SlotGrant> SqlRecords<Db>::AcquireTaskSlot(const std::string& workspace,
                                                           const ObjectKey& task,
                                                           const std::string& task_uid, int limit) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  // One slot taker per workspace at a time, across processes, until the commit: the count and
  // the insert cannot interleave with another's (READ COMMITTED alone would let two see room).
  RETURN_IF_ERROR(db().LockKey("sbx-task-slots/" + workspace));
  ASSIGN_OR_RETURN(Store::SlotGrant grant,
                   TaskSlots<Db>::Acquire(db(), workspace, task, task_uid, limit,
                                          api::UnixMillis(db().clock_.Now())));
  RETURN_IF_ERROR(txn.Commit());
  return grant;
}

template <typename Db>
Status SqlRecords<Db>::ReleaseTaskSlot(const std::string& task_uid) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(TaskSlots<Db>::Release(db(), task_uid));
  return txn.Commit();
}

// ---- audit log --------------------------------------------------------------------------------

template <typename Db>
Status SqlRecords<Db>::AppendAudit(const AuditRecord& record) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  // Ids ascend in commit order: the audit record waits for the object writes in flight.
  RETURN_IF_ERROR(db().LockWrites());
  RETURN_IF_ERROR(AuditLog<Db>::Insert(db(), record));
  return txn.Commit();
}

template <typename Db>
StatusOr<std::vector<Store::AuditRecord>> SqlRecords<Db>::ListAudit(const AuditQuery& query) {
  std::lock_guard lock(db().mu_);
  return AuditLog<Db>::List(db(), db().database(), query);
}

template <typename Db>
StatusOr<int64_t> SqlRecords<Db>::ExpireAudit(std::chrono::system_clock::time_point cutoff) {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(db().LockWrites());
  ASSIGN_OR_RETURN(int64_t deleted, AuditLog<Db>::Expire(db(), api::UnixMillis(cutoff)));
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

// ---- notification outbox ------------------------------------------------------------------------

template <typename Db>
StatusOr<std::vector<Store::Notification>> SqlRecords<Db>::ListDueNotifications(int64_t now_ms,
                                                                                int limit) {
  std::lock_guard lock(db().mu_);
  return NotificationOutbox<Db>::ListDue(db(), db().database(), now_ms, limit);
}

template <typename Db>
Status SqlRecords<Db>::FinishNotification(int64_t id) {
  std::lock_guard lock(db().mu_);
  return NotificationOutbox<Db>::Finish(db(), id);
}

template <typename Db>
Status SqlRecords<Db>::RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                                         const std::string& error) {
  std::lock_guard lock(db().mu_);
  return NotificationOutbox<Db>::Retry(db(), id, attempts, due_ms, error);
}

template <typename Db>
StatusOr<std::vector<Store::NotificationCount>> SqlRecords<Db>::NotificationCounts() {
  std::lock_guard lock(db().mu_);
  return NotificationOutbox<Db>::Counts(db());
}

template class SqlRecords<SqliteStore>;
template class SqlRecords<PostgresStore>;

}  // namespace sbx::controller::store_internal
