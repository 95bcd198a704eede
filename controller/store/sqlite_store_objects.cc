// SqliteStore's objects: the row reads and writes, the change each object write appends to the
// log, and the Store operations on objects (Apply with prune and dry run, Get, List, the
// controller's status and metadata updates, Delete with finalizers).
#include <algorithm>
#include <set>
#include <utility>

#include "api/codec.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_rows.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using internal::BindRowColumns;
using internal::DataLossError;
using internal::kObjectColumns;
using internal::ObjectRow;
using internal::ReadRowColumns;

// ---- rows -------------------------------------------------------------------------------------

namespace {

// The compare-and-swap of the controller's writes: kAborted unless the caller read the object
// at the revision it still has.
Status CheckUnchangedSince(std::string_view what, const ObjectKey& key, int64_t read,
                           int64_t stored) {
  if (read == stored) {
    return OkStatus();
  }
  return api::AbortedError("conflict updating " + std::string(what) + " of " + key.ToString() +
                           ": it changed (resourceVersion " + std::to_string(read) + " is now " +
                           std::to_string(stored) + "); read it again");
}

}  // namespace

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
  return internal::RowToObject(path_, row);
}

Status SqliteStore::InsertRow(const Row& row) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO objects (" + std::string(kObjectColumns) +
                                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  BindRowColumns(stmt, row);
  return stmt.Run();
}

Status SqliteStore::UpdateRow(const Row& row) {
  ASSIGN_OR_RETURN(
      Stmt stmt,
      Prepare("UPDATE objects SET uid = ?4, generation = ?5, resource_version = ?6, spec = ?7, "
              "status = ?8, labels = ?9, annotations = ?10, owner_references = ?11, "
              "finalizers = ?12, deletion_timestamp = ?13, applyset = ?14, "
              "creation_timestamp = ?15, update_timestamp = ?16 "
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
                                 const Row* row) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO changes (revision, type, kind, namespace, "
                                      "name, object) VALUES (?, ?, ?, ?, ?, ?)"));
  stmt.Bind(1, revision)
      .Bind(2, internal::ChangeTypeName(type))
      .Bind(3, KindName(key.kind))
      .Bind(4, key.namespace_)
      .Bind(5, key.name);
  if (row != nullptr) {
    stmt.Bind(6, internal::EncodeChangeObject(*row));
  }
  return stmt.Run();
}

StatusOr<DeleteOutcome> SqliteStore::DeleteLocked(Row& row, int64_t& revision) {
  if (!row.deletion_timestamp.empty()) {
    return DeleteOutcome::kAlreadyDeleting;
  }
  if (row.finalizers != "[]") {
    row.deletion_timestamp = Now();
    row.update_timestamp = row.deletion_timestamp;
    row.resource_version = ++revision;
    RETURN_IF_ERROR(UpdateRow(row));
    RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kModified, row.key, &row));
    return DeleteOutcome::kMarkedForDeletion;
  }
  row.resource_version = ++revision;
  RETURN_IF_ERROR(DeleteRow(row.key));
  RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kDeleted, row.key, nullptr));
  return DeleteOutcome::kDeleted;
}

// ---- objects ----------------------------------------------------------------------------------

StatusOr<std::vector<ApplyResult>> SqliteStore::Apply(const std::vector<Object>& objects,
                                                      const ApplyOptions& options) {
  if (options.prune && options.applyset.empty()) {
    return api::InvalidArgumentError("prune needs an applyset to know which objects to delete");
  }
  // Whatever the client (sbxctl, a GitOps pull, an API server), an empty apply with prune would
  // delete the whole set, and deletionPolicy Delete then the sandboxes.
  if (options.prune && objects.empty() && !options.prune_allow_empty) {
    return api::FailedPreconditionError(
        "no objects passed to apply; refusing to prune every "
        "member of applyset \"" +
        options.applyset + "\" (prune_allow_empty not set)");
  }
  // Validate and encode before taking the lock: pure work.
  struct Wanted {
    ObjectKey key;
    int64_t resource_version;
    std::string spec;
    std::string labels;
    std::string annotations;
  };
  std::vector<Wanted> wanted;
  wanted.reserve(objects.size());
  std::set<ObjectKey> keys;
  for (const Object& object : objects) {
    ObjectKey key = api::KeyOf(object);
    if (key.name.empty()) {
      return api::InvalidArgumentError("a " + std::string(KindName(key.kind)) + " in namespace " +
                                       key.namespace_ + " has no name");
    }
    if (!keys.insert(key).second) {
      return api::InvalidArgumentError(key.ToString() + " appears more than once in one apply");
    }
    wanted.push_back({std::move(key), object.metadata.resource_version, api::EncodeSpecJson(object),
                      internal::MapToJson(object.metadata.labels),
                      internal::MapToJson(object.metadata.annotations)});
  }

  std::unique_lock lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  const std::string now = Now();
  std::vector<ApplyResult> results;
  results.reserve(wanted.size());

  for (Wanted& w : wanted) {
    ASSIGN_OR_RETURN(std::optional<Row> existing, ReadRow(w.key));
    ApplyResult result;
    result.key = w.key;
    Row row;
    if (options.require_resource_version) {
      if (!existing) {
        return api::NotFoundError(w.key.ToString() + " not found");
      }
      if (existing->resource_version != w.resource_version) {
        return api::AbortedError("conflict updating " + w.key.ToString() +
                                 ": it changed (resourceVersion " +
                                 std::to_string(w.resource_version) + " is now " +
                                 std::to_string(existing->resource_version) + "); read it again");
      }
    }
    if (!existing) {
      row.key = w.key;
      row.uid = NewUid();
      row.generation = 1;
      row.resource_version = ++revision;
      row.spec = std::move(w.spec);
      row.status = api::EncodeStatusJson(api::MakeObject(w.key.kind, w.key.name));
      row.labels = std::move(w.labels);
      row.annotations = std::move(w.annotations);
      row.applyset = options.applyset;
      row.creation_timestamp = now;
      row.update_timestamp = now;
      RETURN_IF_ERROR(InsertRow(row));
      RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kAdded, row.key, &row));
      result.action = ApplyAction::kCreated;
    } else {
      row = std::move(*existing);
      if (!row.deletion_timestamp.empty()) {
        return api::FailedPreconditionError(w.key.ToString() + " is being deleted (since " +
                                            row.deletion_timestamp +
                                            "); wait until it is gone, then apply again");
      }
      const bool spec_changed = row.spec != w.spec;
      const bool meta_changed = row.labels != w.labels || row.annotations != w.annotations;
      const bool applyset_changed = !options.applyset.empty() && row.applyset != options.applyset;
      if (spec_changed || meta_changed) {
        if (spec_changed) {
          ++row.generation;
        }
        row.spec = std::move(w.spec);
        row.labels = std::move(w.labels);
        row.annotations = std::move(w.annotations);
        if (!options.applyset.empty()) {
          row.applyset = options.applyset;
        }
        row.resource_version = ++revision;
        row.update_timestamp = now;
        RETURN_IF_ERROR(UpdateRow(row));
        RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kModified, row.key, &row));
        result.action = ApplyAction::kConfigured;
      } else {
        if (applyset_changed) {
          // Membership is bookkeeping of ours, not part of the object: no revision, no change.
          row.applyset = options.applyset;
          RETURN_IF_ERROR(UpdateRow(row));
        }
        result.action = ApplyAction::kUnchanged;
      }
    }
    ASSIGN_OR_RETURN(result.object, RowToObject(row));
    results.push_back(std::move(result));
  }

  if (options.prune) {
    std::vector<ObjectKey> members;
    {
      ASSIGN_OR_RETURN(Stmt stmt,
                       Prepare("SELECT kind, namespace, name FROM objects WHERE applyset = ?"));
      stmt.Bind(1, options.applyset);
      for (;;) {
        ASSIGN_OR_RETURN(bool more, stmt.Step());
        if (!more) {
          break;
        }
        auto kind = api::ParseKind(stmt.Text(0));
        if (!kind.ok()) {
          return DataLossError("database " + path_ + ": object with unknown kind '" + stmt.Text(0) +
                               "'");
        }
        ObjectKey key{*kind, stmt.Text(1), stmt.Text(2)};
        if (!keys.contains(key)) {
          members.push_back(std::move(key));
        }
      }
    }
    std::sort(members.begin(), members.end());
    for (const ObjectKey& key : members) {
      ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
      if (!row || !row->deletion_timestamp.empty()) {
        continue;  // already on its way out
      }
      ApplyResult result;
      result.key = key;
      result.action = ApplyAction::kPruned;
      ASSIGN_OR_RETURN(DeleteOutcome outcome, DeleteLocked(*row, revision));
      (void)outcome;
      ASSIGN_OR_RETURN(result.object, RowToObject(*row));
      results.push_back(std::move(result));
    }
  }

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
  std::string sql = "SELECT " + std::string(kObjectColumns) + " FROM objects";
  if (options.kind && options.namespace_) {
    sql += " WHERE kind = ?1 AND namespace = ?2";
  } else if (options.kind) {
    sql += " WHERE kind = ?1";
  } else if (options.namespace_) {
    sql += " WHERE namespace = ?2";
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
      bool match = true;
      for (const auto& [label, value] : options.label_selector) {
        auto it = object.metadata.labels.find(label);
        if (it == object.metadata.labels.end() || it->second != value) {
          match = false;
          break;
        }
      }
      if (match) {
        out.push_back(std::move(object));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

StatusOr<Object> SqliteStore::UpdateStatus(const Object& object) {
  const ObjectKey key = api::KeyOf(object);
  std::string status = api::EncodeStatusJson(object);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  RETURN_IF_ERROR(
      CheckUnchangedSince("status", key, object.metadata.resource_version, row->resource_version));
  if (row->status == status) {
    return RowToObject(*row);
  }
  ASSIGN_OR_RETURN(int64_t revision, ReadRevision());
  row->status = std::move(status);
  row->resource_version = ++revision;
  row->update_timestamp = Now();
  RETURN_IF_ERROR(UpdateRow(*row));
  RETURN_IF_ERROR(AppendChange(revision, ChangeType::kModified, key, &*row));
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return RowToObject(*row);
}

StatusOr<Object> SqliteStore::UpdateControllerMetadata(const Object& object) {
  const ObjectKey key = api::KeyOf(object);
  std::string finalizers = internal::FinalizersToJson(object.metadata.finalizers);
  std::string owners = internal::OwnersToJson(object.metadata.owner_references);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  RETURN_IF_ERROR(CheckUnchangedSince("metadata", key, object.metadata.resource_version,
                                      row->resource_version));
  if (row->finalizers == finalizers && row->owner_references == owners) {
    return RowToObject(*row);
  }
  ASSIGN_OR_RETURN(int64_t revision, ReadRevision());
  row->finalizers = std::move(finalizers);
  row->owner_references = std::move(owners);
  row->resource_version = ++revision;
  row->update_timestamp = Now();
  if (!row->deletion_timestamp.empty() && row->finalizers == "[]") {
    // The last finalizer is gone from an object being deleted: it goes for good.
    RETURN_IF_ERROR(DeleteRow(key));
    RETURN_IF_ERROR(AppendChange(revision, ChangeType::kDeleted, key, nullptr));
  } else {
    RETURN_IF_ERROR(UpdateRow(*row));
    RETURN_IF_ERROR(AppendChange(revision, ChangeType::kModified, key, &*row));
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return RowToObject(*row);
}

StatusOr<DeleteOutcome> SqliteStore::Delete(const ObjectKey& key) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  ASSIGN_OR_RETURN(DeleteOutcome outcome, DeleteLocked(*row, revision));
  if (revision == start) {
    return outcome;
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return outcome;
}
}  // namespace sbx::controller
