// PostgresStore's side of copying a whole store (store_copy.h, `sbxctl migrate`): the export of
// every table but leases and the change log from one snapshot, and the import sink that writes
// records as they are (uids, resourceVersions, sequence numbers and timestamps kept) in one
// transaction. The SQL mirrors sqlite_store_copy.cc; text that may hold any bytes is bytea here.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/postgres_store.h"
#include "controller/store/store_copy.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using internal::DataLossError;
using internal::kEventColumns;
using internal::kInventoryColumns;
using internal::kObjectColumns;
using internal::kTaskLogEntryColumns;
using internal::P;
using internal::PgResult;
using internal::PgRow;
using internal::PgTxn;

// ---- export -----------------------------------------------------------------------------------

Status PostgresStore::ExportTo(StoreSink& sink) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // One snapshot for every table, and a promise to write nothing.
  RETURN_IF_ERROR(
      conn_->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").status());
  RETURN_IF_ERROR(ExportLocked(sink));
  return txn.Commit();
}

Status PostgresStore::ExportLocked(StoreSink& sink) {
  ASSIGN_OR_RETURN(const int64_t revision, ReadRevision());
  RETURN_IF_ERROR(sink.Revision(revision));
  {
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kObjectColumns) +
                                             " FROM objects ORDER BY kind, namespace, name"));
    for (int i = 0; i < r.Rows(); ++i) {
      ASSIGN_OR_RETURN(Row row, internal::ReadRowColumns(redacted_url_, PgRow(r, i)));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      RETURN_IF_ERROR(sink.PutObject(StoredObject{std::move(object), std::move(row.applyset),
                                                  std::move(row.update_timestamp)}));
    }
  }
  {
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kInventoryColumns) +
                                             " FROM inventory ORDER BY workspace, resource_type, "
                                             "external_id"));
    for (int i = 0; i < r.Rows(); ++i) {
      ASSIGN_OR_RETURN(InventoryRecord record,
                       internal::ReadInventoryColumns(redacted_url_, PgRow(r, i)));
      RETURN_IF_ERROR(sink.PutInventory(record));
    }
  }
  {
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kEventColumns) +
                                             " FROM events ORDER BY id"));
    for (int i = 0; i < r.Rows(); ++i) {
      ASSIGN_OR_RETURN(Event event, internal::ReadEventColumns(redacted_url_, PgRow(r, i)));
      RETURN_IF_ERROR(sink.PutEvent(event));
    }
  }
  {
    ASSIGN_OR_RETURN(PgResult heads, conn_->Exec("SELECT task_uid, kind, namespace, name, "
                                                 "last_seq, dropped FROM task_log_heads ORDER BY "
                                                 "task_uid"));
    for (int h = 0; h < heads.Rows(); ++h) {
      auto kind = api::ParseKind(heads.Text(h, 1));
      if (!kind.ok()) {
        return DataLossError("database " + redacted_url_ + ": task log of unknown kind '" +
                             heads.Text(h, 1) + "'");
      }
      StoredTaskLog log;
      log.task_uid = heads.Text(h, 0);
      log.task = ObjectKey{*kind, heads.Text(h, 2), heads.Text(h, 3)};
      log.last_seq = heads.Int(h, 4);
      log.dropped = heads.Int(h, 5);
      // One task's log at a time (bounded by task_log_max_bytes).
      ASSIGN_OR_RETURN(PgResult r,
                       conn_->Exec("SELECT " + std::string(kTaskLogEntryColumns) +
                                       " FROM task_log WHERE task_uid = $1 ORDER BY seq",
                                   {P(log.task_uid)}));
      for (int i = 0; i < r.Rows(); ++i) {
        log.entries.push_back(internal::ReadTaskLogEntryColumns(PgRow(r, i)));
      }
      RETURN_IF_ERROR(sink.PutTaskLog(log));
    }
  }
  {
    // The keys first, then one artifact's content at a time: libpq holds a whole result in
    // memory, and a task may have 16 MiB of artifacts.
    ASSIGN_OR_RETURN(PgResult keys, conn_->Exec("SELECT task_uid, kind, namespace, name, path "
                                                "FROM artifacts ORDER BY task_uid, path"));
    for (int k = 0; k < keys.Rows(); ++k) {
      auto kind = api::ParseKind(keys.Text(k, 1));
      if (!kind.ok()) {
        return DataLossError("database " + redacted_url_ + ": artifact of unknown kind '" +
                             keys.Text(k, 1) + "'");
      }
      const ObjectKey task{*kind, keys.Text(k, 2), keys.Text(k, 3)};
      const std::string task_uid = keys.Text(k, 0);
      ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT path, bytes, sha256, content FROM "
                                               "artifacts WHERE task_uid = $1 AND path = $2",
                                               {P(task_uid), P(keys.Text(k, 4))}));
      if (r.Rows() != 1) {
        return DataLossError("database " + redacted_url_ + ": artifact " + keys.Text(k, 4) +
                             " vanished during the export");
      }
      RETURN_IF_ERROR(sink.PutArtifact(
          task, task_uid, Artifact{r.Text(0, 0), r.Int(0, 1), r.Text(0, 2), r.Bytes(0, 3)}));
    }
  }
  return OkStatus();
}

// ---- import -----------------------------------------------------------------------------------

// Writes each record as given, inside ImportFrom's transaction (mu_ held by ImportFrom). No
// ON CONFLICT anywhere: the store was empty, so a duplicate is a broken source and fails the
// import.
class PostgresStore::ImportSink final : public StoreSink {
 public:
  explicit ImportSink(PostgresStore& store) : store_(store) {}

  int64_t revision() const { return std::max(source_revision_, max_resource_version_); }

  Status Revision(int64_t revision) override {
    source_revision_ = revision;
    return OkStatus();
  }
  Status PutObject(const StoredObject& object) override {
    RETURN_IF_ERROR(CheckImportedObject(store_.redacted_url_, object));
    max_resource_version_ =
        std::max(max_resource_version_, object.object.metadata.resource_version);
    return store_.InsertRow(
        internal::ObjectToRow(object.object, object.applyset, object.update_timestamp));
  }
  Status PutInventory(const InventoryRecord& record) override {
    return store_.InsertInventory(record);
  }
  Status PutEvent(const Event& event) override { return store_.InsertEvent(event); }
  Status PutTaskLog(const StoredTaskLog& log) override {
    RETURN_IF_ERROR(store_.InsertTaskLogHead(log.task, log.task_uid, log.last_seq, log.dropped));
    for (const TaskLogEntry& entry : log.entries) {
      RETURN_IF_ERROR(store_.InsertTaskLogEntry(log.task_uid, entry));
    }
    return OkStatus();
  }
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Artifact& artifact) override {
    RETURN_IF_ERROR(CheckImportedArtifact(task, artifact));
    return store_.InsertArtifact(task, task_uid, artifact);
  }

 private:
  PostgresStore& store_;
  int64_t source_revision_ = 0;
  int64_t max_resource_version_ = 0;
};

Status PostgresStore::ImportFrom(const std::function<Status(StoreSink&)>& fill) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // Object writers of every process wait for this transaction, as for any object write.
  ASSIGN_OR_RETURN(const int64_t current, LockRevision());
  ASSIGN_OR_RETURN(PgResult counts,
                   conn_->Exec("SELECT (SELECT count(*) FROM objects), (SELECT count(*) FROM "
                               "inventory), (SELECT count(*) FROM events), (SELECT count(*) FROM "
                               "task_log_heads), (SELECT count(*) FROM task_log), (SELECT "
                               "count(*) FROM artifacts)"));
  CopyCounts held;
  held.objects = counts.Int(0, 0);
  held.inventory = counts.Int(0, 1);
  held.events = counts.Int(0, 2);
  held.task_logs = counts.Int(0, 3);
  held.task_log_lines = counts.Int(0, 4);
  held.artifacts = counts.Int(0, 5);
  RETURN_IF_ERROR(CheckEmptyForImport(redacted_url_, held));

  ImportSink sink(*this);
  RETURN_IF_ERROR(fill(sink));
  // Above every imported resourceVersion; an empty change log makes that the compaction point,
  // so a watcher of this database re-lists.
  RETURN_IF_ERROR(WriteRevision(std::max(current, sink.revision())));
  RETURN_IF_ERROR(conn_->Exec("DELETE FROM changes").status());
  RETURN_IF_ERROR(Notify());
  return txn.Commit();
}

}  // namespace sbx::controller
