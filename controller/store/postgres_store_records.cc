// PostgresStore's records beside the objects: events (deduplicated, bounded per object),
// the inventory of external resources, leases, and the AgentTask log and artifacts. None bumps
// the revision; each write is one transaction and sends NOTIFY, so that WaitForChange wakes the
// followers of a task log as SqliteStore's data_version does.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "api/rfc3339.h"
#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/internal/task_slots.h"
#include "controller/store/internal/usage_ledger.h"
#include "controller/store/postgres_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using store_internal::DataLossError;
using store_internal::kEventColumns;
using store_internal::kInventoryColumns;
using store_internal::kLeaseColumns;
using store_internal::kTaskLogEntryColumns;
using store_internal::P;
using store_internal::PgResult;
using store_internal::PgRow;
using store_internal::PgTxn;
using store_internal::ReadEventColumns;
using store_internal::ReadInventoryColumns;
using store_internal::ReadLeaseColumns;
using store_internal::ReadTaskLogEntryColumns;

// ---- events -----------------------------------------------------------------------------------

Status PostgresStore::RecordEvent(const Event& event) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(InsertEvent(store_internal::RecordedEvent(event, now),
                              " ON CONFLICT (kind, namespace, name, type, reason, md5(message)) "
                              "DO UPDATE SET count = events.count + excluded.count, last_seen = "
                              "excluded.last_seen"));
  if (options_.max_events_per_object > 0) {
    RETURN_IF_ERROR(conn_
                        ->Exec("DELETE FROM events WHERE kind = $1 AND namespace = $2 AND "
                               "name = $3 AND id NOT IN (SELECT id FROM events WHERE kind = $1 "
                               "AND namespace = $2 AND name = $3 ORDER BY last_seen DESC, id DESC "
                               "LIMIT $4)",
                               {P(KindName(event.involved.kind)), P(event.involved.namespace_),
                                P(event.involved.name),
                                P(static_cast<int64_t>(options_.max_events_per_object))})
                        .status());
  }
  RETURN_IF_ERROR(Notify());
  return txn.Commit();
}

Status PostgresStore::InsertEvent(const Event& event, std::string_view on_conflict) {
  return conn_
      ->Exec(
          "INSERT INTO events (" + std::string(kEventColumns) +
              ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)" + std::string(on_conflict),
          {P(KindName(event.involved.kind)), P(event.involved.namespace_), P(event.involved.name),
           P(event.type), P(event.reason), store_internal::Bytes(event.message), P(event.count),
           P(event.first_seen), P(event.last_seen)})
      .status();
}

StatusOr<int64_t> PostgresStore::ExpireEvents(std::chrono::system_clock::time_point cutoff) {
  // last_seen is RFC 3339 UTC with second precision, so text order is time order ("C"-like
  // comparison of ASCII digits holds in every collation).
  const std::string before = FormatRfc3339(cutoff);
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("DELETE FROM events WHERE last_seen < $1", {P(before)}));
  return r.Affected();
}

StatusOr<std::vector<Store::Event>> PostgresStore::ListEvents(
    const std::optional<ObjectKey>& involved) {
  std::string sql = "SELECT " + std::string(kEventColumns) + " FROM events";
  std::vector<store_internal::PgParam> params;
  if (involved) {
    sql += " WHERE kind = $1 AND namespace = $2 AND name = $3";
    params = {P(KindName(involved->kind)), P(involved->namespace_), P(involved->name)};
  }
  sql += " ORDER BY last_seen, id";
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec(sql, params));
  std::vector<Event> out;
  for (int i = 0; i < r.Rows(); ++i) {
    ASSIGN_OR_RETURN(Event event, ReadEventColumns(redacted_url_, PgRow(r, i)));
    out.push_back(std::move(event));
  }
  return out;
}

// ---- inventory --------------------------------------------------------------------------------

Status PostgresStore::PutInventory(const InventoryRecord& record) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  return InsertInventory(store_internal::PutInventoryRecord(record, now),
                         " ON CONFLICT (workspace, resource_type, external_id) DO UPDATE SET "
                         "state = excluded.state, owner_kind = excluded.owner_kind, "
                         "owner_namespace = excluded.owner_namespace, owner_name = "
                         "excluded.owner_name, owner_uid = excluded.owner_uid, updated_at = "
                         "excluded.updated_at");
}

Status PostgresStore::InsertInventory(const InventoryRecord& record, std::string_view on_conflict) {
  return conn_
      ->Exec("INSERT INTO inventory (" + std::string(kInventoryColumns) +
                 ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)" + std::string(on_conflict),
             {P(record.workspace), P(record.resource_type), P(record.external_id),
              P(store_internal::InventoryStateName(record.state)), P(KindName(record.owner.kind)),
              P(record.owner.namespace_), P(record.owner.name), P(record.owner_uid),
              P(record.created_at), P(record.updated_at)})
      .status();
}

StatusOr<std::optional<Store::InventoryRecord>> PostgresStore::GetInventory(
    const std::string& workspace, const std::string& resource_type,
    const std::string& external_id) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kInventoryColumns) +
                                               " FROM inventory WHERE workspace = $1 AND "
                                               "resource_type = $2 AND external_id = $3",
                                           {P(workspace), P(resource_type), P(external_id)}));
  if (r.Rows() == 0) {
    return std::optional<InventoryRecord>();
  }
  ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(redacted_url_, PgRow(r, 0)));
  return std::optional<InventoryRecord>(std::move(record));
}

StatusOr<std::vector<Store::InventoryRecord>> PostgresStore::ListInventory(
    const std::optional<std::string>& workspace) {
  std::string sql = "SELECT " + std::string(kInventoryColumns) + " FROM inventory";
  std::vector<store_internal::PgParam> params;
  if (workspace) {
    sql += " WHERE workspace = $1";
    params.push_back(P(*workspace));
  }
  // COLLATE "C": byte order, as SQLite sorts, whatever the database's collation.
  sql +=
      " ORDER BY workspace COLLATE \"C\", resource_type COLLATE \"C\", external_id COLLATE "
      "\"C\"";
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec(sql, params));
  std::vector<InventoryRecord> out;
  for (int i = 0; i < r.Rows(); ++i) {
    ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(redacted_url_, PgRow(r, i)));
    out.push_back(std::move(record));
  }
  return out;
}

Status PostgresStore::DeleteInventory(const std::string& workspace,
                                      const std::string& resource_type,
                                      const std::string& external_id) {
  std::lock_guard lock(mu_);
  return conn_
      ->Exec(
          "DELETE FROM inventory WHERE workspace = $1 AND resource_type = $2 AND "
          "external_id = $3",
          {P(workspace), P(resource_type), P(external_id)})
      .status();
}

// ---- leases -----------------------------------------------------------------------------------

StatusOr<std::optional<int64_t>> PostgresStore::AcquireLease(const std::string& name,
                                                             const std::string& holder,
                                                             std::chrono::milliseconds ttl) {
  if (holder.empty()) {
    return api::InvalidArgumentError("lease " + name + ": empty holder");
  }
  const auto now = clock_.Now();
  const int64_t now_ms = api::UnixMillis(now);
  std::lock_guard lock(mu_);
  // One statement: take the row if it is free, expired or ours. Concurrent callers serialise on
  // the row, and the WHERE of the update is evaluated against the latest committed holder. A
  // renewal keeps the tenure's token; a lease taken anew (released, expired) gets the next one.
  ASSIGN_OR_RETURN(
      PgResult r,
      conn_->Exec("INSERT INTO leases (name, holder, expires_at_ms, renewed_at, token) VALUES "
                  "($1, $2, $3, $4, 1) ON CONFLICT (name) DO UPDATE SET holder = "
                  "excluded.holder, expires_at_ms = excluded.expires_at_ms, renewed_at = "
                  "excluded.renewed_at, token = CASE WHEN leases.expires_at_ms > $5 THEN "
                  "leases.token ELSE leases.token + 1 END "
                  "WHERE leases.holder = excluded.holder OR leases.expires_at_ms <= $5 "
                  "RETURNING token",
                  {P(name), P(holder), P(now_ms + ttl.count()), P(FormatRfc3339(now)), P(now_ms)}));
  if (r.Rows() != 1) {
    return std::optional<int64_t>();
  }
  return std::optional<int64_t>(r.Int(0, 0));
}

Status PostgresStore::ReleaseLease(const std::string& name, const std::string& holder) {
  std::lock_guard lock(mu_);
  return conn_
      ->Exec("UPDATE leases SET holder = '', expires_at_ms = 0 WHERE name = $1 AND holder = $2",
             {P(name), P(holder)})
      .status();
}

StatusOr<std::optional<Store::Lease>> PostgresStore::GetLease(const std::string& name) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kLeaseColumns) +
                                               " FROM leases WHERE name = $1 AND holder <> ''",
                                           {P(name)}));
  if (r.Rows() == 0) {
    return std::optional<Lease>();
  }
  return std::optional<Lease>(ReadLeaseColumns(PgRow(r, 0)));
}

StatusOr<std::vector<Store::Lease>> PostgresStore::ListLeases(const std::string& prefix) {
  std::lock_guard lock(mu_);
  // starts_with, not LIKE: a prefix may hold '%' or '_'. COLLATE "C": byte order, as SQLite.
  ASSIGN_OR_RETURN(PgResult r,
                   conn_->Exec("SELECT " + std::string(kLeaseColumns) +
                                   " FROM leases WHERE starts_with(name, $1) AND holder <> '' "
                                   "ORDER BY name COLLATE \"C\"",
                               {P(prefix)}));
  std::vector<Lease> leases;
  leases.reserve(static_cast<size_t>(r.Rows()));
  for (int row = 0; row < r.Rows(); ++row) {
    leases.push_back(ReadLeaseColumns(PgRow(r, row)));
  }
  return leases;
}

// ---- AgentTask log and artifacts --------------------------------------------------------------

StatusOr<int64_t> PostgresStore::AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                               const std::vector<TaskLogEntry>& entries) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // Appenders of one task (in any process) take turns: seq is read, then written.
  RETURN_IF_ERROR(
      conn_->Exec("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", {P(task_uid)}).status());
  int64_t seq = 0;
  {
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT last_seq FROM task_log_heads WHERE "
                                             "task_uid = $1",
                                             {P(task_uid)}));
    seq = r.Rows() > 0 ? r.Int(0, 0) : 0;
  }
  const int64_t bound = std::max<int64_t>(options_.task_log_max_bytes, 1);
  for (const TaskLogEntry& e : entries) {
    ++seq;
    RETURN_IF_ERROR(
        InsertTaskLogEntry(task_uid, store_internal::StoredTaskLogEntry(e, seq, bound, now)));
  }
  RETURN_IF_ERROR(InsertTaskLogHead(task, task_uid, seq, 0,
                                    " ON CONFLICT (task_uid) DO UPDATE SET last_seq = "
                                    "excluded.last_seq"));
  // The bound, as SqliteStore::AppendTaskLog: the oldest deltas first, then the oldest entries.
  for (std::string_view kinds : {"kind IN ('assistant.delta', 'output.delta')", "true"}) {
    for (;;) {
      ASSIGN_OR_RETURN(PgResult sum, conn_->Exec("SELECT coalesce(sum(bytes), 0) FROM task_log "
                                                 "WHERE task_uid = $1",
                                                 {P(task_uid)}));
      const int64_t total = sum.Int(0, 0);
      if (total <= bound) {
        break;
      }
      ASSIGN_OR_RETURN(PgResult pick,
                       conn_->Exec("SELECT seq, bytes FROM task_log WHERE "
                                   "task_uid = $1 AND " +
                                       std::string(kinds) + " ORDER BY seq LIMIT 256",
                                   {P(task_uid)}));
      std::vector<int64_t> doomed;
      int64_t freed = 0;
      for (int i = 0; i < pick.Rows() && freed < total - bound; ++i) {
        doomed.push_back(pick.Int(i, 0));
        freed += pick.Int(i, 1);
      }
      if (doomed.empty()) {
        break;
      }
      RETURN_IF_ERROR(conn_
                          ->Exec("DELETE FROM task_log WHERE task_uid = $1 AND seq >= $2 AND "
                                 "seq <= $3 AND " +
                                     std::string(kinds),
                                 {P(task_uid), P(doomed.front()), P(doomed.back())})
                          .status());
      RETURN_IF_ERROR(conn_
                          ->Exec("UPDATE task_log_heads SET dropped = dropped + $1 WHERE "
                                 "task_uid = $2",
                                 {P(static_cast<int64_t>(doomed.size())), P(task_uid)})
                          .status());
    }
  }
  RETURN_IF_ERROR(Notify());
  RETURN_IF_ERROR(txn.Commit());
  return seq;
}

Status PostgresStore::InsertTaskLogHead(const ObjectKey& task, const std::string& task_uid,
                                        int64_t last_seq, int64_t dropped,
                                        std::string_view on_conflict) {
  return conn_
      ->Exec(
          "INSERT INTO task_log_heads (task_uid, kind, namespace, name, last_seq, dropped) "
          "VALUES ($1, $2, $3, $4, $5, $6)" +
              std::string(on_conflict),
          {P(task_uid), P(KindName(task.kind)), P(task.namespace_), P(task.name), P(last_seq),
           P(dropped)})
      .status();
}

Status PostgresStore::InsertTaskLogEntry(const std::string& task_uid, const TaskLogEntry& entry) {
  return conn_
      ->Exec("INSERT INTO task_log (task_uid, " + std::string(kTaskLogEntryColumns) +
                 ", bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
             {P(task_uid), P(entry.seq), P(store_internal::TaskLogKindName(entry.kind)),
              P(entry.item_id), store_internal::Bytes(entry.text),
              entry.exit_code.has_value() ? P(*entry.exit_code) : store_internal::Null(),
              P(entry.at), P(static_cast<int64_t>(entry.text.size()))})
      .status();
}

StatusOr<Store::TaskLogPage> PostgresStore::ReadTaskLog(const std::string& task_uid,
                                                        int64_t after_seq, int limit) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // One snapshot: the head and the entries belong together.
  RETURN_IF_ERROR(conn_->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
  TaskLogPage page;
  {
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT last_seq, dropped FROM task_log_heads "
                                             "WHERE task_uid = $1",
                                             {P(task_uid)}));
    if (r.Rows() > 0) {
      page.last_seq = r.Int(0, 0);
      page.dropped = r.Int(0, 1);
    }
  }
  ASSIGN_OR_RETURN(
      PgResult r,
      conn_->Exec(
          "SELECT " + std::string(kTaskLogEntryColumns) +
              " FROM task_log WHERE task_uid = $1 AND seq > $2 ORDER BY seq LIMIT $3",
          {P(task_uid), P(after_seq), limit > 0 ? P(int64_t{limit}) : store_internal::Null()}));
  for (int i = 0; i < r.Rows(); ++i) {
    page.entries.push_back(ReadTaskLogEntryColumns(PgRow(r, i)));
  }
  RETURN_IF_ERROR(txn.Commit());
  return page;
}

Status PostgresStore::PutArtifact(const ObjectKey& task, const std::string& task_uid,
                                  const Artifact& artifact) {
  RETURN_IF_ERROR(store_internal::CheckArtifactSize(artifact));
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // The 16 MiB check and the write must not interleave with another put of the same task.
  RETURN_IF_ERROR(
      conn_->Exec("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", {P(task_uid)}).status());
  ASSIGN_OR_RETURN(PgResult others, conn_->Exec("SELECT coalesce(sum(bytes), 0) FROM artifacts "
                                                "WHERE task_uid = $1 AND path != $2",
                                                {P(task_uid), P(artifact.path)}));
  RETURN_IF_ERROR(store_internal::CheckArtifactBudget(task, artifact, others.Int(0, 0)));
  RETURN_IF_ERROR(InsertArtifact(task, task_uid, artifact,
                                 " ON CONFLICT (task_uid, path) DO UPDATE SET bytes = "
                                 "excluded.bytes, sha256 = excluded.sha256, content = "
                                 "excluded.content"));
  RETURN_IF_ERROR(Notify());
  return txn.Commit();
}

Status PostgresStore::InsertArtifact(const ObjectKey& task, const std::string& task_uid,
                                     const Artifact& artifact, std::string_view on_conflict) {
  return conn_
      ->Exec(
          "INSERT INTO artifacts (task_uid, kind, namespace, name, path, bytes, sha256, "
          "content) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)" +
              std::string(on_conflict),
          {P(task_uid), P(KindName(task.kind)), P(task.namespace_), P(task.name), P(artifact.path),
           P(artifact.bytes), P(artifact.sha256), store_internal::Bytes(artifact.content)})
      .status();
}

StatusOr<std::vector<Store::Artifact>> PostgresStore::ListArtifacts(const std::string& task_uid) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT path, bytes, sha256 FROM artifacts WHERE "
                                           "task_uid = $1 ORDER BY path COLLATE \"C\"",
                                           {P(task_uid)}));
  std::vector<Artifact> out;
  out.reserve(static_cast<size_t>(r.Rows()));
  for (int i = 0; i < r.Rows(); ++i) {
    out.push_back(Artifact{r.Text(i, 0), r.Int(i, 1), r.Text(i, 2), ""});
  }
  return out;
}

StatusOr<Store::Artifact> PostgresStore::GetArtifact(const std::string& task_uid,
                                                     const std::string& path) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT path, bytes, sha256, content FROM artifacts "
                                           "WHERE task_uid = $1 AND path = $2",
                                           {P(task_uid), P(path)}));
  if (r.Rows() == 0) {
    return api::NotFoundError("no artifact " + path + " for task uid " + task_uid);
  }
  return Artifact{r.Text(0, 0), r.Int(0, 1), r.Text(0, 2), r.Bytes(0, 3)};
}

// ---- usage ledger -----------------------------------------------------------------------------

Status PostgresStore::RecordUsage(const UsageRecord& record) {
  std::lock_guard lock(mu_);
  return store_internal::UsageLedger<PostgresStore>::Insert(
      *this, record, " ON CONFLICT (task_uid, attempt) DO NOTHING");
}

StatusOr<api::UsageSum> PostgresStore::SumUsage(const std::string& workspace, int64_t from_ms,
                                                int64_t to_ms) {
  std::lock_guard lock(mu_);
  return store_internal::UsageLedger<PostgresStore>::Sum(*this, workspace, from_ms, to_ms);
}

StatusOr<std::vector<Store::UsageTotal>> PostgresStore::UsageTotals() {
  std::lock_guard lock(mu_);
  return store_internal::UsageLedger<PostgresStore>::Totals(*this);
}

// ---- task slots ---------------------------------------------------------------------------------

StatusOr<Store::SlotGrant> PostgresStore::AcquireTaskSlot(const std::string& workspace,
                                                          const ObjectKey& task,
                                                          const std::string& task_uid, int limit) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // One slot taker per workspace at a time, across replicas, until the commit: the count and the
  // insert below cannot interleave with another's (READ COMMITTED alone would let two see room).
  RETURN_IF_ERROR(conn_
                      ->Exec("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                             {P("sbx-task-slots/" + workspace)})
                      .status());
  ASSIGN_OR_RETURN(Store::SlotGrant grant,
                   store_internal::TaskSlots<PostgresStore>::Acquire(
                       *this, workspace, task, task_uid, limit, api::UnixMillis(clock_.Now())));
  RETURN_IF_ERROR(txn.Commit());
  return grant;
}

Status PostgresStore::ReleaseTaskSlot(const std::string& task_uid) {
  std::lock_guard lock(mu_);
  return store_internal::TaskSlots<PostgresStore>::Release(*this, task_uid);
}

// ---- audit log --------------------------------------------------------------------------------

Status PostgresStore::AppendAudit(const AuditRecord& record) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // The revision row's lock, which every object write holds: ids ascend in commit order.
  RETURN_IF_ERROR(LockRevision().status());
  RETURN_IF_ERROR(store_internal::AuditLog<PostgresStore>::Insert(*this, record));
  return txn.Commit();
}

StatusOr<std::vector<Store::AuditRecord>> PostgresStore::ListAudit(const AuditQuery& query) {
  std::lock_guard lock(mu_);
  return store_internal::AuditLog<PostgresStore>::List(*this, redacted_url_, query);
}

StatusOr<int64_t> PostgresStore::ExpireAudit(std::chrono::system_clock::time_point cutoff) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(LockRevision().status());
  ASSIGN_OR_RETURN(int64_t deleted,
                   store_internal::AuditLog<PostgresStore>::Expire(*this, api::UnixMillis(cutoff)));
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

// ---- notification outbox ------------------------------------------------------------------------

StatusOr<std::vector<Store::Notification>> PostgresStore::ListDueNotifications(int64_t now_ms,
                                                                               int limit) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<PostgresStore>::ListDue(*this, redacted_url_, now_ms,
                                                                    limit);
}

Status PostgresStore::FinishNotification(int64_t id) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<PostgresStore>::Finish(*this, id);
}

Status PostgresStore::RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                                        const std::string& error) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<PostgresStore>::Retry(*this, id, attempts, due_ms,
                                                                  error);
}

StatusOr<std::vector<Store::NotificationCount>> PostgresStore::NotificationCounts() {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<PostgresStore>::Counts(*this);
}

}  // namespace sbx::controller
