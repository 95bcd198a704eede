// SqlStore<Db> (sql_store.h): the objects, written once over the two backends' Query and
// dialect — the row reads and writes, the change each object write appends to the log, the
// revision row, and the transactions of the Store operations on objects (Apply with prune and dry
// run, Get, List, the controller's status and metadata updates, Delete with finalizers). What the
// writes do to the rows is object_writes.h. Instantiated for SqliteStore and PostgresStore at the
// end.
#include <algorithm>
#include <mutex>
#include <type_traits>
#include <utility>

#include "api/codec.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/object_writes.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/internal/sql_store.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller::store_internal {

using api::KindName;
using api::OkStatus;

namespace {

// Parameters 1 to 17: the row's columns in kObjectColumns order (INSERT and UPDATE).
std::vector<SqlParam> RowParams(const ObjectRow& row) {
  const auto null_if_empty = [](const std::string& text) {
    return text.empty() ? SqlParam::Null() : SqlParam(text);
  };
  return {KindName(row.key.kind),
          row.key.namespace_,
          row.key.name,
          row.uid,
          SqlParam::Int(row.generation),
          SqlParam::Int(row.resource_version),
          row.spec,
          row.status,
          row.labels,
          row.annotations,
          row.owner_references,
          row.finalizers,
          null_if_empty(row.deletion_timestamp),
          null_if_empty(row.applyset),
          row.creation_timestamp,
          row.update_timestamp,
          SqlParam::Int(row.finished ? 1 : 0)};
}

std::vector<SqlParam> KeyParams(const ObjectKey& key) {
  return {KindName(key.kind), key.namespace_, key.name};
}

}  // namespace

// ---- the revision row -------------------------------------------------------------------------

template <typename Db>
StatusOr<int64_t> SqlStore<Db>::ReadRevision() {
  std::optional<int64_t> value;
  RETURN_IF_ERROR(db().Query("SELECT value FROM revision WHERE id = 1", {},
                             [&](const typename Db::CopyRow& row) {
                               value = row.Int(0);
                               return OkStatus();
                             }));
  if (!value) {
    return DataLossError("database " + db().database() + " has no revision row");
  }
  return *value;
}

template <typename Db>
Status SqlStore<Db>::WriteRevision(int64_t revision) {
  return db().Query("UPDATE revision SET value = " + Param(1) + " WHERE id = 1",
                    {SqlParam::Int(revision)}, nullptr);
}

// ---- rows -------------------------------------------------------------------------------------

template <typename Db>
StatusOr<std::optional<ObjectRow>> SqlStore<Db>::ReadRow(const ObjectKey& key) {
  std::optional<ObjectRow> found;
  RETURN_IF_ERROR(db().Query(
      "SELECT " + std::string(kObjectColumns) + " FROM objects WHERE kind = " + Param(1) +
          " AND namespace = " + Param(2) + " AND name = " + Param(3),
      KeyParams(key), [&](const typename Db::CopyRow& row) -> Status {
        ASSIGN_OR_RETURN(ObjectRow read, ReadRowColumns(db().database(), row));
        found = std::move(read);
        return OkStatus();
      }));
  return found;
}

template <typename Db>
StatusOr<Object> SqlStore<Db>::RowToObject(const ObjectRow& row) const {
  return store_internal::RowToObject(db().database(), row);
}

template <typename Db>
Status SqlStore<Db>::InsertRow(const ObjectRow& row) {
  return db().Query(
      "INSERT INTO objects (" + std::string(kObjectColumns) + ") VALUES (" + ParamList(17) + ")",
      RowParams(row), nullptr);
}

template <typename Db>
Status SqlStore<Db>::UpdateRow(const ObjectRow& row) {
  return db().Query(
      "UPDATE objects SET uid = " + Param(4) + ", generation = " + Param(5) +
          ", resource_version = " + Param(6) + ", spec = " + Param(7) + ", status = " + Param(8) +
          ", labels = " + Param(9) + ", annotations = " + Param(10) + ", owner_references = " +
          Param(11) + ", finalizers = " + Param(12) + ", deletion_timestamp = " + Param(13) +
          ", applyset = " + Param(14) + ", creation_timestamp = " + Param(15) +
          ", update_timestamp = " + Param(16) + ", finished = " + Param(17) +
          " WHERE kind = " + Param(1) + " AND namespace = " + Param(2) + " AND name = " + Param(3),
      RowParams(row), nullptr);
}

template <typename Db>
Status SqlStore<Db>::DeleteRow(const ObjectKey& key) {
  const std::string where =
      " kind = " + Param(1) + " AND namespace = " + Param(2) + " AND name = " + Param(3);
  // What is kept beside an object goes with it (an AgentTask's log and artifacts).
  for (std::string_view table : {"task_log", "task_log_heads", "artifacts"}) {
    RETURN_IF_ERROR(db().Query("DELETE FROM " + std::string(table) +
                                   " WHERE task_uid IN (SELECT uid FROM objects WHERE" + where +
                                   ")",
                               KeyParams(key), nullptr));
  }
  return db().Query("DELETE FROM objects WHERE" + where, KeyParams(key), nullptr);
}

template <typename Db>
Status SqlStore<Db>::AppendChange(int64_t revision, Store::ChangeType type, const ObjectKey& key,
                                  const ObjectRow* row, bool wake_hint) {
  return db().Query(
      "INSERT INTO changes (revision, type, kind, namespace, name, object, wake_hint) VALUES (" +
          ParamList(7) + ")",
      {SqlParam::Int(revision), ChangeTypeName(type), KindName(key.kind), key.namespace_, key.name,
       row != nullptr ? SqlParam(EncodeChangeObject(*row)) : SqlParam::Null(),
       SqlParam::Int(wake_hint ? 1 : 0)},
      nullptr);
}

// ---- objects ----------------------------------------------------------------------------------
// Every object write is one transaction that first takes the revision (Db::LockRevision: SQLite's
// BEGIN IMMEDIATE already holds the one write lock; PostgreSQL locks the revision row), so object
// writes from every process serialise and revisions are gap-free and committed in order.

template <typename Db>
StatusOr<std::vector<ApplyResult>> SqlStore<Db>::Apply(const std::vector<Object>& objects,
                                                       const ApplyOptions& options) {
  StatusOr<std::vector<ApplyResult>> results = ApplyInTransaction(objects, options);
  AuditFailedApply(*this, objects, options, results.status());
  return results;
}

template <typename Db>
StatusOr<std::vector<ApplyResult>> SqlStore<Db>::ApplyInTransaction(
    const std::vector<Object>& objects, const ApplyOptions& options) {
  ASSIGN_OR_RETURN(ApplyPlan plan, PlanApply(objects, options));
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, db().LockRevision());
  int64_t revision = start;
  ASSIGN_OR_RETURN(std::vector<ApplyResult> results,
                   ObjectWrites<Db>::Apply(db(), db().database(), plan, options, revision));
  if (options.dry_run) {
    txn.Rollback();
    return results;
  }
  if (revision != start) {
    RETURN_IF_ERROR(WriteRevision(revision));
    RETURN_IF_ERROR(db().Notify());
  }
  RETURN_IF_ERROR(txn.Commit());
  if (revision != start) {
    db().Committed();
  }
  return results;
}

template <typename Db>
StatusOr<Object> SqlStore<Db>::Get(const ObjectKey& key) {
  std::lock_guard lock(db().mu_);
  ASSIGN_OR_RETURN(std::optional<ObjectRow> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  return RowToObject(*row);
}

template <typename Db>
StatusOr<std::vector<Object>> SqlStore<Db>::List(const ListOptions& options) {
  std::string sql = "SELECT " + std::string(kObjectColumns) + " FROM objects WHERE 1 = 1";
  std::vector<SqlParam> params;
  if (options.kind) {
    params.emplace_back(KindName(*options.kind));
    sql += " AND kind = " + Param(static_cast<int>(params.size()));
  }
  if (options.namespace_) {
    params.emplace_back(*options.namespace_);
    sql += " AND namespace = " + Param(static_cast<int>(params.size()));
  }
  if (options.unfinished_only) {
    sql += " AND finished = 0";  // the partial index objects_unfinished
  }
  std::vector<Object> out;
  {
    std::lock_guard lock(db().mu_);
    RETURN_IF_ERROR(db().Query(sql, params, [&](const typename Db::CopyRow& r) -> Status {
      ASSIGN_OR_RETURN(ObjectRow row, ReadRowColumns(db().database(), r));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      if (api::MatchesLabels(object, options.label_selector)) {
        out.push_back(std::move(object));
      }
      return OkStatus();
    }));
  }
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

// Runs `write(revision)` in one object write transaction, then stores the revisions it took,
// commits and wakes the watchers; when it took none, nothing is written (the transaction rolls
// back).
template <typename Db>
template <typename Write>
auto SqlStore<Db>::ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&> {
  std::lock_guard lock(db().mu_);
  typename Db::Txn txn(db());
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, db().LockRevision());
  int64_t revision = start;
  auto result = write(revision);
  if (!result.ok() || revision == start) {
    return result;
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(db().Notify());
  RETURN_IF_ERROR(txn.Commit());
  db().Committed();
  return result;
}

template <typename Db>
StatusOr<Object> SqlStore<Db>::UpdateStatus(const Object& object) {
  std::string status = api::EncodeStatusJson(object);
  ASSIGN_OR_RETURN(ObjectRow row, ObjectWrite([&](int64_t& revision) {
                     return ObjectWrites<Db>::UpdateStatus(db(), db().database(), object,
                                                           std::move(status), revision);
                   }));
  return RowToObject(row);
}

template <typename Db>
StatusOr<Object> SqlStore<Db>::UpdateControllerMetadata(const Object& object) {
  std::string finalizers = FinalizersToJson(object.metadata.finalizers);
  std::string owners = OwnersToJson(object.metadata.owner_references);
  ASSIGN_OR_RETURN(ObjectRow row, ObjectWrite([&](int64_t& revision) {
                     return ObjectWrites<Db>::UpdateControllerMetadata(
                         db(), object, std::move(finalizers), std::move(owners), revision);
                   }));
  return RowToObject(row);
}

template <typename Db>
StatusOr<Object> SqlStore<Db>::PostWakeHint(const ObjectKey& key) {
  ASSIGN_OR_RETURN(ObjectRow row, ObjectWrite([&](int64_t& revision) {
                     return ObjectWrites<Db>::WakeHint(db(), key, revision);
                   }));
  return RowToObject(row);
}

template <typename Db>
StatusOr<DeleteOutcome> SqlStore<Db>::Delete(const ObjectKey& key, const DeleteOptions& options) {
  StatusOr<DeleteOutcome> outcome = ObjectWrite([&](int64_t& revision) {
    return ObjectWrites<Db>::Delete(db(), key, options.audit, revision);
  });
  AuditFailedWrite(*this, options.audit, {key}, outcome.status());
  return outcome;
}

template class SqlStore<SqliteStore>;
template class SqlStore<PostgresStore>;

}  // namespace sbx::controller::store_internal
