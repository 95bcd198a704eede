// The object writes both stores share: what Apply (with prune), Delete and the finalizer rules
// do to the rows, the revisions they take and the changes they log. SqliteStore and PostgresStore
// keep only their transactions around these (how the revision is locked, committed and
// announced), so the two cannot drift apart in what a write means.
//
// A template over the store (SqliteStore or PostgresStore, which befriend it), called with the
// store's mutex held inside its object write transaction, the revision read there. It uses of
// the store: ReadRow, InsertRow, UpdateRow, DeleteRow, AppendChange, Now, NewUid, and
// Query/CopyRow/kParam as internal/store_copier.h does. An audited write (WriteAudit) appends
// its audit records (internal/audit_log.h) in the same transaction.
//
// Thread-safety: as the store's methods that call it. Module-private to controller/store.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// An apply's objects, validated and encoded before any lock is taken (pure work).
struct ApplyPlan {
  struct Wanted {
    ObjectKey key;
    int64_t resource_version;
    std::string spec;
    std::string labels;
    std::string annotations;
  };
  std::vector<Wanted> wanted;
  std::set<ObjectKey> keys;
};

// kInvalidArgument for prune without an applyset, a nameless object or one named twice;
// kFailedPrecondition for an empty apply with prune unless options.prune_allow_empty.
inline StatusOr<ApplyPlan> PlanApply(const std::vector<Object>& objects,
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
  ApplyPlan plan;
  plan.wanted.reserve(objects.size());
  for (const Object& object : objects) {
    ObjectKey key = api::KeyOf(object);
    if (key.name.empty()) {
      return api::InvalidArgumentError("a " + std::string(api::KindName(key.kind)) +
                                       " in namespace " + key.namespace_ + " has no name");
    }
    if (!plan.keys.insert(key).second) {
      return api::InvalidArgumentError(key.ToString() + " appears more than once in one apply");
    }
    plan.wanted.push_back({std::move(key), object.metadata.resource_version,
                           api::EncodeSpecJson(object), MapToJson(object.metadata.labels),
                           MapToJson(object.metadata.annotations)});
  }
  return plan;
}

// The compare-and-swap of the controller's writes: kAborted unless the caller read the object
// at the revision it still has.
inline Status CheckUnchangedSince(std::string_view what, const ObjectKey& key, int64_t read,
                                  int64_t stored) {
  if (read == stored) {
    return api::OkStatus();
  }
  return api::AbortedError("conflict updating " + std::string(what) + " of " + key.ToString() +
                           ": it changed (resourceVersion " + std::to_string(read) + " is now " +
                           std::to_string(stored) + "); read it again");
}

template <typename Db>
class ObjectWrites {
 public:
  // Apply's rows: creates, configures, or leaves each wanted object, then prunes the applyset's
  // other members; each change takes the next revision from `revision`, and with
  // options.audit its audit record. The caller commits (or, for a dry run, rolls back) and
  // stores `revision`.
  static StatusOr<std::vector<ApplyResult>> Apply(Db& db, const std::string& database,
                                                  ApplyPlan& plan, const ApplyOptions& options,
                                                  int64_t& revision) {
    const std::string now = db.Now();
    std::vector<ApplyResult> results;
    results.reserve(plan.wanted.size());
    for (ApplyPlan::Wanted& w : plan.wanted) {
      ASSIGN_OR_RETURN(std::optional<ObjectRow> existing, db.ReadRow(w.key));
      ApplyResult result;
      result.key = w.key;
      ObjectRow row;
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
        row.uid = db.NewUid();
        row.generation = 1;
        row.resource_version = ++revision;
        row.spec = std::move(w.spec);
        row.status = api::EncodeStatusJson(api::MakeObject(w.key.kind, w.key.name));
        row.labels = std::move(w.labels);
        row.annotations = std::move(w.annotations);
        row.applyset = options.applyset;
        row.creation_timestamp = now;
        row.update_timestamp = now;
        RETURN_IF_ERROR(db.InsertRow(row));
        RETURN_IF_ERROR(
            db.AppendChange(row.resource_version, Store::ChangeType::kAdded, row.key, &row));
        result.action = ApplyAction::kCreated;
        RETURN_IF_ERROR(Audit(db, options.audit, "", row.key, 0, row, "created"));
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
          const int64_t before = row.resource_version;
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
          RETURN_IF_ERROR(db.UpdateRow(row));
          RETURN_IF_ERROR(
              db.AppendChange(row.resource_version, Store::ChangeType::kModified, row.key, &row));
          result.action = ApplyAction::kConfigured;
          RETURN_IF_ERROR(Audit(db, options.audit, "", row.key, before, row, "configured"));
        } else {
          if (applyset_changed) {
            // Membership is bookkeeping of ours, not part of the object: no revision, no change.
            row.applyset = options.applyset;
            RETURN_IF_ERROR(db.UpdateRow(row));
          }
          result.action = ApplyAction::kUnchanged;
        }
      }
      ASSIGN_OR_RETURN(result.object, RowToObject(database, row));
      results.push_back(std::move(result));
    }
    if (options.prune) {
      RETURN_IF_ERROR(Prune(db, database, plan.keys, options, revision, results));
    }
    return results;
  }

  // UpdateStatus's row: kNotFound, kAborted unless `object` was read at the stored
  // resourceVersion; a new status takes the next revision from `revision` (an unchanged one
  // writes nothing), and the notifications its change causes (api/notices.h) go into the outbox
  // in the same transaction (notification_outbox.h). Returns the row as it now is.
  static StatusOr<ObjectRow> UpdateStatus(Db& db, const std::string& database, const Object& object,
                                          std::string status, int64_t& revision) {
    const ObjectKey key = api::KeyOf(object);
    ASSIGN_OR_RETURN(ObjectRow row, ReadForUpdate(db, key));
    RETURN_IF_ERROR(
        CheckUnchangedSince("status", key, object.metadata.resource_version, row.resource_version));
    if (row.status == status) {
      return row;
    }
    if (api::MayNotice(object)) {
      ASSIGN_OR_RETURN(const Object before, RowToObject(database, row));
      RETURN_IF_ERROR(
          NotificationOutbox<Db>::Record(db, database, object, api::NoticesOf(before, object)));
    }
    row.status = std::move(status);
    row.finished = api::HasFinished(object);
    row.resource_version = ++revision;
    row.update_timestamp = db.Now();
    RETURN_IF_ERROR(db.UpdateRow(row));
    RETURN_IF_ERROR(db.AppendChange(revision, Store::ChangeType::kModified, key, &row));
    return row;
  }

  // UpdateControllerMetadata's row, as UpdateStatus's for finalizers and owner references;
  // the last finalizer gone from an object being deleted deletes it.
  static StatusOr<ObjectRow> UpdateControllerMetadata(Db& db, const Object& object,
                                                      std::string finalizers, std::string owners,
                                                      int64_t& revision) {
    const ObjectKey key = api::KeyOf(object);
    ASSIGN_OR_RETURN(ObjectRow row, ReadForUpdate(db, key));
    RETURN_IF_ERROR(CheckUnchangedSince("metadata", key, object.metadata.resource_version,
                                        row.resource_version));
    if (row.finalizers == finalizers && row.owner_references == owners) {
      return row;
    }
    row.finalizers = std::move(finalizers);
    row.owner_references = std::move(owners);
    row.resource_version = ++revision;
    row.update_timestamp = db.Now();
    if (!row.deletion_timestamp.empty() && row.finalizers == "[]") {
      // The last finalizer is gone from an object being deleted: it goes for good.
      RETURN_IF_ERROR(db.DeleteRow(key));
      RETURN_IF_ERROR(db.AppendChange(revision, Store::ChangeType::kDeleted, key, nullptr));
    } else {
      RETURN_IF_ERROR(db.UpdateRow(row));
      RETURN_IF_ERROR(db.AppendChange(revision, Store::ChangeType::kModified, key, &row));
    }
    return row;
  }

  // PostWakeHint's row: kNotFound, else the same row at the next revision, logged as a wake hint.
  static StatusOr<ObjectRow> WakeHint(Db& db, const ObjectKey& key, int64_t& revision) {
    ASSIGN_OR_RETURN(ObjectRow row, ReadForUpdate(db, key));
    row.resource_version = ++revision;
    RETURN_IF_ERROR(db.UpdateRow(row));
    RETURN_IF_ERROR(
        db.AppendChange(revision, Store::ChangeType::kModified, key, &row, /*wake_hint=*/true));
    return row;
  }

  // Delete(key): kNotFound, else Delete of its row, audited with `audit` when set (an object
  // already being deleted is not written, so not audited).
  static StatusOr<DeleteOutcome> Delete(Db& db, const ObjectKey& key,
                                        const std::optional<WriteAudit>& audit, int64_t& revision) {
    ASSIGN_OR_RETURN(ObjectRow row, ReadForUpdate(db, key));
    const int64_t before = row.resource_version;
    ASSIGN_OR_RETURN(DeleteOutcome outcome, Delete(db, row, revision));
    RETURN_IF_ERROR(AuditDelete(db, audit, "", row, before, outcome));
    return outcome;
  }

  // Delete's semantics, shared by Delete, prune and finalizer removal: an object with
  // finalizers is marked (deletionTimestamp), one without goes; bumps `revision` either way
  // unless it was already being deleted.
  static StatusOr<DeleteOutcome> Delete(Db& db, ObjectRow& row, int64_t& revision) {
    if (!row.deletion_timestamp.empty()) {
      return DeleteOutcome::kAlreadyDeleting;
    }
    if (row.finalizers != "[]") {
      row.deletion_timestamp = db.Now();
      row.update_timestamp = row.deletion_timestamp;
      row.resource_version = ++revision;
      RETURN_IF_ERROR(db.UpdateRow(row));
      RETURN_IF_ERROR(
          db.AppendChange(row.resource_version, Store::ChangeType::kModified, row.key, &row));
      return DeleteOutcome::kMarkedForDeletion;
    }
    row.resource_version = ++revision;
    RETURN_IF_ERROR(db.DeleteRow(row.key));
    RETURN_IF_ERROR(
        db.AppendChange(row.resource_version, Store::ChangeType::kDeleted, row.key, nullptr));
    return DeleteOutcome::kDeleted;
  }

 private:
  using Row = typename Db::CopyRow;

  static StatusOr<ObjectRow> ReadForUpdate(Db& db, const ObjectKey& key) {
    ASSIGN_OR_RETURN(std::optional<ObjectRow> row, db.ReadRow(key));
    if (!row) {
      return api::NotFoundError(key.ToString() + " not found");
    }
    return std::move(*row);
  }

  // With `who` set, appends the audit record of a write that left `row` as it is now (`before`:
  // its resourceVersion before, 0 if it did not exist); `verb` "" is who.verb.
  static Status Audit(Db& db, const std::optional<WriteAudit>& who, std::string_view verb,
                      const ObjectKey& key, int64_t before, const ObjectRow& row,
                      std::string result) {
    if (!who) {
      return api::OkStatus();
    }
    return AuditLog<Db>::Insert(
        db, AuditOfWrite(*who, verb.empty() ? who->verb : std::string(verb), key, before,
                         row.resource_version, std::move(result), row.spec));
  }
  // Audit of a Delete's `outcome` (nothing for kAlreadyDeleting: nothing was written).
  static Status AuditDelete(Db& db, const std::optional<WriteAudit>& who, std::string_view verb,
                            const ObjectRow& row, int64_t before, DeleteOutcome outcome) {
    if (!who || outcome == DeleteOutcome::kAlreadyDeleting) {
      return api::OkStatus();
    }
    const bool gone = outcome == DeleteOutcome::kDeleted;
    return AuditLog<Db>::Insert(db, AuditOfWrite(*who, verb.empty() ? who->verb : std::string(verb),
                                                 row.key, before, gone ? 0 : row.resource_version,
                                                 gone ? "deleted" : "marked-for-deletion", ""));
  }

  // Deletes the members of the applyset not in `keep` (in key order), appending their results.
  static Status Prune(Db& db, const std::string& database, const std::set<ObjectKey>& keep,
                      const ApplyOptions& options, int64_t& revision,
                      std::vector<ApplyResult>& results) {
    const std::string& applyset = options.applyset;
    std::vector<ObjectKey> members;
    RETURN_IF_ERROR(db.Query(
        "SELECT kind, namespace, name FROM objects WHERE applyset = " + std::string(1, Db::kParam) +
            "1",
        {applyset}, [&](const Row& r) -> Status {
          auto kind = api::ParseKind(r.Text(0));
          if (!kind.ok()) {
            return DataLossError("database " + database + ": object with unknown kind '" +
                                 r.Text(0) + "'");
          }
          ObjectKey key{*kind, r.Text(1), r.Text(2)};
          if (!keep.contains(key)) {
            members.push_back(std::move(key));
          }
          return api::OkStatus();
        }));
    std::sort(members.begin(), members.end());
    for (const ObjectKey& key : members) {
      ASSIGN_OR_RETURN(std::optional<ObjectRow> row, db.ReadRow(key));
      if (!row || !row->deletion_timestamp.empty()) {
        continue;  // already on its way out
      }
      ApplyResult result;
      result.key = key;
      result.action = ApplyAction::kPruned;
      const int64_t before = row->resource_version;
      ASSIGN_OR_RETURN(DeleteOutcome outcome, Delete(db, *row, revision));
      RETURN_IF_ERROR(AuditDelete(db, options.audit, "prune", *row, before, outcome));
      ASSIGN_OR_RETURN(result.object, RowToObject(database, *row));
      results.push_back(std::move(result));
    }
    return api::OkStatus();
  }
};

}  // namespace sbx::controller::store_internal
