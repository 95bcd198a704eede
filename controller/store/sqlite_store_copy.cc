// SqliteStore's side of copying a whole store (store_copy.h, `sbxctl migrate`): the export of
// every table but leases and the change log, read in one transaction, and the import sink that
// writes records as they are (uids, resourceVersions, sequence numbers and timestamps kept) in
// one write transaction.
#include <algorithm>
#include <string>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"
#include "controller/store/store_copy.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using internal::DataLossError;
using internal::kEventColumns;
using internal::kInventoryColumns;
using internal::kObjectColumns;
using internal::kTaskLogEntryColumns;

// ---- export -----------------------------------------------------------------------------------

Status SqliteStore::ExportTo(StoreSink& sink) {
  std::lock_guard lock(mu_);
  // A deferred transaction that only reads: one WAL snapshot, and writers are not blocked.
  RETURN_IF_ERROR(Exec("BEGIN"));
  const Status status = ExportLocked(sink);
  (void)Exec("COMMIT");
  return status;
}

Status SqliteStore::ExportLocked(StoreSink& sink) {
  ASSIGN_OR_RETURN(const int64_t revision, ReadRevision());
  RETURN_IF_ERROR(sink.Revision(revision));
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kObjectColumns) +
                                        " FROM objects ORDER BY kind, namespace, name"));
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      ASSIGN_OR_RETURN(Row row, internal::ReadRowColumns(path_, stmt));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      RETURN_IF_ERROR(sink.PutObject(StoredObject{std::move(object), std::move(row.applyset),
                                                  std::move(row.update_timestamp)}));
    }
  }
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kInventoryColumns) +
                                        " FROM inventory ORDER BY workspace, resource_type, "
                                        "external_id"));
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      ASSIGN_OR_RETURN(InventoryRecord record, internal::ReadInventoryColumns(path_, stmt));
      RETURN_IF_ERROR(sink.PutInventory(record));
    }
  }
  {
    ASSIGN_OR_RETURN(Stmt stmt,
                     Prepare("SELECT " + std::string(kEventColumns) + " FROM events ORDER BY id"));
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      ASSIGN_OR_RETURN(Event event, internal::ReadEventColumns(path_, stmt));
      RETURN_IF_ERROR(sink.PutEvent(event));
    }
  }
  {
    ASSIGN_OR_RETURN(Stmt heads, Prepare("SELECT task_uid, kind, namespace, name, last_seq, "
                                         "dropped FROM task_log_heads ORDER BY task_uid"));
    for (;;) {
      ASSIGN_OR_RETURN(bool more, heads.Step());
      if (!more) {
        break;
      }
      auto kind = api::ParseKind(heads.Text(1));
      if (!kind.ok()) {
        return DataLossError("database " + path_ + ": task log of unknown kind '" + heads.Text(1) +
                             "'");
      }
      StoredTaskLog log;
      log.task_uid = heads.Text(0);
      log.task = ObjectKey{*kind, heads.Text(2), heads.Text(3)};
      log.last_seq = heads.Int(4);
      log.dropped = heads.Int(5);
      ASSIGN_OR_RETURN(Stmt entries, Prepare("SELECT " + std::string(kTaskLogEntryColumns) +
                                             " FROM task_log WHERE task_uid = ? ORDER BY seq"));
      entries.Bind(1, log.task_uid);
      for (;;) {
        ASSIGN_OR_RETURN(bool row, entries.Step());
        if (!row) {
          break;
        }
        log.entries.push_back(internal::ReadTaskLogEntryColumns(entries));
      }
      RETURN_IF_ERROR(sink.PutTaskLog(log));
    }
  }
  {
    // One artifact in memory at a time: SQLite steps through the rows.
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT task_uid, kind, namespace, name, path, bytes, "
                                        "sha256, content FROM artifacts ORDER BY task_uid, path"));
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      auto kind = api::ParseKind(stmt.Text(1));
      if (!kind.ok()) {
        return DataLossError("database " + path_ + ": artifact of unknown kind '" + stmt.Text(1) +
                             "'");
      }
      const ObjectKey task{*kind, stmt.Text(2), stmt.Text(3)};
      RETURN_IF_ERROR(sink.PutArtifact(
          task, stmt.Text(0), Artifact{stmt.Text(4), stmt.Int(5), stmt.Text(6), stmt.Text(7)}));
    }
  }
  return OkStatus();
}

// ---- import -----------------------------------------------------------------------------------

// Writes each record as given, inside ImportFrom's transaction (mu_ held by ImportFrom). No
// ON CONFLICT anywhere: the store was empty, so a duplicate is a broken source and fails the
// import.
class SqliteStore::ImportSink final : public StoreSink {
 public:
  explicit ImportSink(SqliteStore& store) : store_(store) {}

  int64_t revision() const { return std::max(source_revision_, max_resource_version_); }

  Status Revision(int64_t revision) override {
    source_revision_ = revision;
    return OkStatus();
  }
  Status PutObject(const StoredObject& object) override {
    RETURN_IF_ERROR(CheckImportedObject(store_.path_, object));
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
  SqliteStore& store_;
  int64_t source_revision_ = 0;
  int64_t max_resource_version_ = 0;
};

Status SqliteStore::ImportFrom(const std::function<Status(StoreSink&)>& fill) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  CopyCounts held;
  for (auto [table, field] :
       {std::pair{"objects", &CopyCounts::objects}, std::pair{"inventory", &CopyCounts::inventory},
        std::pair{"events", &CopyCounts::events},
        std::pair{"task_log_heads", &CopyCounts::task_logs},
        std::pair{"task_log", &CopyCounts::task_log_lines},
        std::pair{"artifacts", &CopyCounts::artifacts}}) {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare(std::string("SELECT count(*) FROM ") + table));
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    held.*field = row ? stmt.Int(0) : 0;
  }
  RETURN_IF_ERROR(CheckEmptyForImport(path_, held));

  ImportSink sink(*this);
  RETURN_IF_ERROR(fill(sink));
  // Above every imported resourceVersion, so a compare-and-swap or watch of the old store's
  // revisions never matches a new write; an empty change log makes that the compaction point.
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  RETURN_IF_ERROR(WriteRevision(std::max(current, sink.revision())));
  RETURN_IF_ERROR(Exec("DELETE FROM changes"));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return OkStatus();
}

}  // namespace sbx::controller
