// SqliteStore's objects: the row reads and writes, the change each object write appends to the
// log, and the Store operations on objects (Apply with prune and dry run, Get, List, the
// controller's status and metadata updates, Delete with finalizers). What the writes do to the
// rows is internal/object_writes.h, shared with PostgresStore; here are their transactions.
#include <algorithm>
#include <set>
#include <type_traits>
#include <utility>

#include "api/codec.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/object_writes.h"
#include "controller/store/internal/sqlite_rows.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using store_internal::BindRowColumns;
using store_internal::DataLossError;
using store_internal::kObjectColumns;
using store_internal::ObjectRow;
using store_internal::ReadRowColumns;
using Writes = store_internal::ObjectWrites<SqliteStore>;

// ---- rows -------------------------------------------------------------------------------------

StatusOr<std::optional<SqliteStore::Row>> SqliteStore::ReadRow(const ObjectKey& key) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kObjectColumns) +
                                      " FROM objects WHERE kind = ? AND namespace = ? AND "
                                      "name = ?"));
  stmt.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<Row>();
  }
  ASSIGN_OR_RETURN(Row row, ReadRowColumns(path_, stmt));
  return std::optional<Row>(std::move(row));
}

StatusOr<Object> SqliteStore::RowToObject(const Row& row) const {
  return store_internal::RowToObject(path_, row);
}

Status SqliteStore::InsertRow(const Row& row) {
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("INSERT INTO objects (" + std::string(kObjectColumns) +
                           ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  BindRowColumns(stmt, row);
  return stmt.Run();
}

Status SqliteStore::UpdateRow(const Row& row) {
  ASSIGN_OR_RETURN(
      Stmt stmt,
      Prepare("UPDATE objects SET uid = ?4, generation = ?5, resource_version = ?6, spec = ?7, "
              "status = ?8, labels = ?9, annotations = ?10, owner_references = ?11, "
              "finalizers = ?12, deletion_timestamp = ?13, applyset = ?14, "
              "creation_timestamp = ?15, update_timestamp = ?16, finished = ?17 "
              "WHERE kind = ?1 AND namespace = ?2 AND name = ?3"));
  BindRowColumns(stmt, row);
  return stmt.Run();
}

Status SqliteStore::DeleteRow(const ObjectKey& key) {
  // What is kept beside an object goes with it (an AgentTask's log and artifacts).
  for (std::string_view table : {"task_log", "task_log_heads", "artifacts"}) {
    ASSIGN_OR_RETURN(Stmt side, Prepare("DELETE FROM " + std::string(table) +
                                        " WHERE task_uid IN (SELECT uid FROM objects WHERE kind = "
                                        "? AND namespace = ? AND name = ?)"));
    RETURN_IF_ERROR(
        side.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name).Run());
  }
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?"));
  stmt.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name);
  return stmt.Run();
}

Status SqliteStore::AppendChange(int64_t revision, ChangeType type, const ObjectKey& key,
                                 const Row* row, bool wake_hint) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO changes (revision, type, kind, namespace, "
                                      "name, object, wake_hint) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  stmt.Bind(1, revision)
      .Bind(2, store_internal::ChangeTypeName(type))
      .Bind(3, KindName(key.kind))
      .Bind(4, key.namespace_)
      .Bind(5, key.name)
      .Bind(7, static_cast<int64_t>(wake_hint ? 1 : 0));
  if (row != nullptr) {
    stmt.Bind(6, store_internal::EncodeChangeObject(*row));
  }
  return stmt.Run();
}

// ---- objects ----------------------------------------------------------------------------------

StatusOr<std::vector<ApplyResult>> SqliteStore::Apply(const std::vector<Object>& objects,
                                                      const ApplyOptions& options) {
  StatusOr<std::vector<ApplyResult>> results = ApplyInTransaction(objects, options);
  store_internal::AuditFailedApply(*this, objects, options, results.status());
  return results;
}

StatusOr<std::vector<ApplyResult>> SqliteStore::ApplyInTransaction(
    const std::vector<Object>& objects, const ApplyOptions& options) {
  ASSIGN_OR_RETURN(store_internal::ApplyPlan plan, store_internal::PlanApply(objects, options));
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  ASSIGN_OR_RETURN(std::vector<ApplyResult> results,
                   Writes::Apply(*this, path_, plan, options, revision));
  if (options.dry_run) {
    txn.Rollback();
    return results;
  }
  if (revision != start) {
    RETURN_IF_ERROR(WriteRevision(revision));
  }
  RETURN_IF_ERROR(txn.Commit());
  if (revision != start) {
    ++local_commits_;
    committed_.notify_all();
  }
  return results;
}

StatusOr<Object> SqliteStore::Get(const ObjectKey& key) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  return RowToObject(*row);
}

StatusOr<std::vector<Object>> SqliteStore::List(const ListOptions& options) {
  std::string sql = "SELECT " + std::string(kObjectColumns) + " FROM objects WHERE 1";
  if (options.kind) {
    sql += " AND kind = ?1";
  }
  if (options.namespace_) {
    sql += " AND namespace = ?2";
  }
  if (options.unfinished_only) {
    sql += " AND finished = 0";  // the partial index objects_unfinished
  }
  std::vector<Object> out;
  {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
    if (options.kind) {
      stmt.Bind(1, KindName(*options.kind));
    }
    if (options.namespace_) {
      stmt.Bind(2, *options.namespace_);
    }
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      ASSIGN_OR_RETURN(Row row, ReadRowColumns(path_, stmt));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      if (api::MatchesLabels(object, options.label_selector)) {
        out.push_back(std::move(object));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

// Runs `write(revision)` in one object write transaction, then stores the revisions it took,
// commits and wakes the watchers; when it took none, nothing is written (the transaction rolls
// back).
template <typename Write>
auto SqliteStore::ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&> {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  auto result = write(revision);
  if (!result.ok() || revision == start) {
    return result;
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return result;
}

StatusOr<Object> SqliteStore::UpdateStatus(const Object& object) {
  std::string status = api::EncodeStatusJson(object);
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::UpdateStatus(*this, path_, object, std::move(status), revision);
                   }));
  return RowToObject(row);
}

StatusOr<Object> SqliteStore::UpdateControllerMetadata(const Object& object) {
  std::string finalizers = store_internal::FinalizersToJson(object.metadata.finalizers);
  std::string owners = store_internal::OwnersToJson(object.metadata.owner_references);
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::UpdateControllerMetadata(*this, object, std::move(finalizers),
                                                             std::move(owners), revision);
                   }));
  return RowToObject(row);
}

StatusOr<Object> SqliteStore::PostWakeHint(const ObjectKey& key) {
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::WakeHint(*this, key, revision);
                   }));
  return RowToObject(row);
}

StatusOr<DeleteOutcome> SqliteStore::Delete(const ObjectKey& key, const DeleteOptions& options) {
  StatusOr<DeleteOutcome> outcome = ObjectWrite(
      [&](int64_t& revision) { return Writes::Delete(*this, key, options.audit, revision); });
  store_internal::AuditFailedWrite(*this, options.audit, {key}, outcome.status());
  return outcome;
}
}  // namespace sbx::controller
