// The database-neutral half of Store::ExportTo and Store::ImportFrom (store_copy.h), shared by
// SqliteStore and PostgresStore: which tables are read in which order and how their rows become
// records, what an imported record must satisfy, and where the destination's revision ends. Only
// the transactions (and the statements' placeholders) are the backend's.
//
// A template over the store (SqliteStore or PostgresStore, which befriend it), called with the
// store's mutex held, inside the transaction its ExportTo or ImportFrom opened. It uses of the
// store:
//   Db::CopyRow, Db::kParam                a row as store_rows.h reads it; '?' or '$'
//   Query(sql, text_params, each_row)      runs one statement, each_row (if any) on every row
//   ReadRevision(), WriteRevision(revision)
//   InsertRow, InsertInventory, InsertEvent, InsertTaskLogHead, InsertTaskLogEntry,
//   InsertArtifact                         the normal paths' INSERTs, without their upserts
//   UsageLedger<Db>                        the usage ledger's rows (usage_ledger.h)
//   AuditLog<Db>                           the audit log's rows (audit_log.h)
//   NotificationOutbox<Db>                 the pending notifications (notification_outbox.h)
//
// Thread-safety: as the store's methods that call it. Module-private to controller/store.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/internal/usage_ledger.h"
#include "controller/store/store_copy.h"

namespace sbx::controller::store_internal {

template <typename Db>
class StoreCopier {
 public:
  using Row = typename Db::CopyRow;

  // Every record of `db` (named `database` in messages) into `sink`, in StoreSink's order: one
  // query per table (and per task log), one artifact's content in memory at a time.
  static Status Export(Db& db, const std::string& database, StoreSink& sink) {
    ASSIGN_OR_RETURN(const int64_t revision, db.ReadRevision());
    RETURN_IF_ERROR(sink.Revision(revision));
    RETURN_IF_ERROR(db.Query(
        "SELECT " + std::string(kObjectColumns) + " FROM objects ORDER BY kind, namespace, name",
        {}, [&](const Row& r) -> Status {
          ASSIGN_OR_RETURN(ObjectRow row, ReadRowColumns(database, r));
          ASSIGN_OR_RETURN(Object object, RowToObject(database, row));
          return sink.PutObject(StoredObject{std::move(object), std::move(row.applyset),
                                             std::move(row.update_timestamp)});
        }));
    RETURN_IF_ERROR(db.Query("SELECT " + std::string(kInventoryColumns) +
                                 " FROM inventory ORDER BY workspace, resource_type, external_id",
                             {}, [&](const Row& r) -> Status {
                               ASSIGN_OR_RETURN(Store::InventoryRecord record,
                                                ReadInventoryColumns(database, r));
                               return sink.PutInventory(record);
                             }));
    RETURN_IF_ERROR(db.Query("SELECT " + std::string(kEventColumns) + " FROM events ORDER BY id",
                             {}, [&](const Row& r) -> Status {
                               ASSIGN_OR_RETURN(Store::Event event, ReadEventColumns(database, r));
                               return sink.PutEvent(event);
                             }));
    RETURN_IF_ERROR(db.Query(
        "SELECT task_uid, kind, namespace, name, last_seq, dropped FROM task_log_heads ORDER BY "
        "task_uid",
        {}, [&](const Row& head) -> Status {
          ASSIGN_OR_RETURN(ObjectKey task, TaskOf(database, head, "task log"));
          StoredTaskLog log;
          log.task_uid = head.Text(0);
          log.task = std::move(task);
          log.last_seq = head.Int(4);
          log.dropped = head.Int(5);
          // One task's log at a time (bounded by task_log_max_bytes).
          RETURN_IF_ERROR(db.Query("SELECT " + std::string(kTaskLogEntryColumns) +
                                       " FROM task_log WHERE task_uid = " + Param(1) +
                                       " ORDER BY seq",
                                   {log.task_uid}, [&](const Row& r) -> Status {
                                     log.entries.push_back(ReadTaskLogEntryColumns(r));
                                     return api::OkStatus();
                                   }));
          return sink.PutTaskLog(log);
        }));
    RETURN_IF_ERROR(UsageLedger<Db>::ForEach(
        db, database, [&](const Store::UsageRecord& r) { return sink.PutUsage(r); }));
    RETURN_IF_ERROR(AuditLog<Db>::ForEach(
        db, database, [&](const Store::AuditRecord& r) { return sink.PutAudit(r); }));
    RETURN_IF_ERROR(NotificationOutbox<Db>::ForEach(
        db, database, [&](const Store::Notification& n) { return sink.PutNotification(n); }));
    RETURN_IF_ERROR(db.Query(
        "SELECT notifier_uid, dropped FROM notification_drops ORDER BY "
        "notifier_uid",
        {},
        [&](const Row& r) -> Status { return sink.PutNotificationDrops(r.Text(0), r.Int(1)); }));
    // The keys first, then one artifact's content at a time: a task may have 16 MiB of
    // artifacts, and libpq holds a whole result in memory.
    return db.Query(
        "SELECT task_uid, kind, namespace, name, path FROM artifacts ORDER BY task_uid, path", {},
        [&](const Row& key) -> Status {
          ASSIGN_OR_RETURN(const ObjectKey task, TaskOf(database, key, "artifact"));
          const std::string task_uid = key.Text(0);
          const std::string path = key.Text(4);
          int found = 0;
          RETURN_IF_ERROR(db.Query(
              "SELECT path, bytes, sha256, content FROM artifacts WHERE task_uid = " + Param(1) +
                  " AND path = " + Param(2),
              {task_uid, path}, [&](const Row& r) -> Status {
                ++found;
                return sink.PutArtifact(
                    task, task_uid, Store::Artifact{r.Text(0), r.Int(1), r.Text(2), r.Bytes(3)});
              }));
          if (found != 1) {
            return DataLossError("database " + database + ": artifact " + path +
                                 " vanished during the export");
          }
          return api::OkStatus();
        });
  }

  // Refuses a `db` that holds any record (CheckEmptyForImport); then writes what `fill` puts
  // into its sink, and ends the revision above both `current` (the destination's) and every
  // imported one, with an empty change log: that is the compaction point, so a watcher
  // re-lists and no compare-and-swap of the old store's revisions matches a new write.
  static Status Import(Db& db, const std::string& database, int64_t current,
                       const std::function<Status(StoreSink&)>& fill) {
    CopyCounts held;
    for (const auto& counted :
         {std::pair{"objects", &CopyCounts::objects},
          std::pair{"inventory", &CopyCounts::inventory}, std::pair{"events", &CopyCounts::events},
          std::pair{"task_log_heads", &CopyCounts::task_logs},
          std::pair{"task_log", &CopyCounts::task_log_lines},
          std::pair{"artifacts", &CopyCounts::artifacts},
          std::pair{"usage_records", &CopyCounts::usage_records},
          std::pair{"audit", &CopyCounts::audit_records},
          std::pair{"notifications", &CopyCounts::notifications}}) {
      // Not a structured binding: a lambda may not capture one (C++20 as clang-tidy reads it).
      int64_t CopyCounts::*field = counted.second;
      RETURN_IF_ERROR(db.Query(std::string("SELECT count(*) FROM ") + counted.first, {},
                               [&](const Row& r) -> Status {
                                 held.*field = r.Int(0);
                                 return api::OkStatus();
                               }));
    }
    RETURN_IF_ERROR(CheckEmptyForImport(database, held));
    ImportSink sink(db, database);
    RETURN_IF_ERROR(fill(sink));
    RETURN_IF_ERROR(db.WriteRevision(std::max(current, sink.revision())));
    return db.Query("DELETE FROM changes", {}, nullptr);
  }

 private:
  // Writes each record as given through the store's INSERTs. No upsert: the store was empty,
  // so a duplicate is a broken source and fails the import.
  class ImportSink final : public StoreSink {
   public:
    ImportSink(Db& db, const std::string& database) : db_(db), database_(database) {}

    int64_t revision() const { return std::max(source_revision_, max_resource_version_); }

    Status Revision(int64_t revision) override {
      source_revision_ = revision;
      return api::OkStatus();
    }
    Status PutObject(const StoredObject& object) override {
      RETURN_IF_ERROR(CheckImportedObject(database_, object));
      max_resource_version_ =
          std::max(max_resource_version_, object.object.metadata.resource_version);
      return db_.InsertRow(ObjectToRow(object.object, object.applyset, object.update_timestamp));
    }
    Status PutInventory(const Store::InventoryRecord& record) override {
      return db_.InsertInventory(record);
    }
    Status PutEvent(const Store::Event& event) override { return db_.InsertEvent(event); }
    Status PutTaskLog(const StoredTaskLog& log) override {
      RETURN_IF_ERROR(db_.InsertTaskLogHead(log.task, log.task_uid, log.last_seq, log.dropped));
      for (const Store::TaskLogEntry& entry : log.entries) {
        RETURN_IF_ERROR(db_.InsertTaskLogEntry(log.task_uid, entry));
      }
      return api::OkStatus();
    }
    Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                       const Store::Artifact& artifact) override {
      RETURN_IF_ERROR(CheckImportedArtifact(task, artifact));
      return db_.InsertArtifact(task, task_uid, artifact);
    }
    Status PutUsage(const Store::UsageRecord& record) override {
      return UsageLedger<Db>::Insert(db_, record, "");
    }
    Status PutAudit(const Store::AuditRecord& record) override {
      return AuditLog<Db>::Import(db_, record);
    }
    Status PutNotification(const Store::Notification& n) override {
      return NotificationOutbox<Db>::Import(db_, n);
    }
    Status PutNotificationDrops(const std::string& notifier_uid, int64_t dropped) override {
      return NotificationOutbox<Db>::ImportDrops(db_, notifier_uid, dropped);
    }

   private:
    Db& db_;
    const std::string& database_;
    int64_t source_revision_ = 0;
    int64_t max_resource_version_ = 0;
  };

  // The n-th statement parameter in the store's dialect ("?1", "$1").
  static std::string Param(int n) { return Db::kParam + std::to_string(n); }

  // The task named by columns 1-3 (kind, namespace, name) of a task log head or artifact key.
  static StatusOr<ObjectKey> TaskOf(const std::string& database, const Row& r,
                                    std::string_view what) {
    auto kind = api::ParseKind(r.Text(1));
    if (!kind.ok()) {
      return DataLossError("database " + database + ": " + std::string(what) +
                           " of unknown kind '" + r.Text(1) + "'");
    }
    return ObjectKey{*kind, r.Text(2), r.Text(3)};
  }
};

}  // namespace sbx::controller::store_internal
