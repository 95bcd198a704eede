// The notification outbox's SQL (DESIGN §8.3), written once for SqliteStore and PostgresStore as
// usage_ledger.h is: the tables are the same on both (SQLite's migration 9, PostgreSQL's 7).
//
// A status write (ObjectWrites::UpdateStatus) whose change tells something (api::NoticesOf)
// calls Record in its own transaction: one row per Notifier of the object's namespace that wants
// the notice (api::NotifierWants: its events, selector, suspend), so a notification exists iff
// the status change that caused it was committed, and a crash after the commit loses none. Each
// Notifier keeps at most kMaxPendingNotifications rows; the oldest beyond are dropped and counted
// (notification_drops). The deliverer (controller/notify) reads what is due, and finishes or
// reschedules each row; the row's webhook_id stays the same across its attempts.
//
// Ids are MAX(id) + 1 under the write lock every status write holds; they order rows only (the
// webhook id is a fresh uuid, never reused). A template over the store, which befriends it and
// calls it with its mutex held inside a transaction where one is needed. Module-private to
// controller/store.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/notices.h"
#include "api/rfc3339.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// The tables, the same DDL on both databases. A migration that has shipped is never edited.
inline constexpr std::string_view kNotificationTables = R"sql(
-- The notification outbox (DESIGN §8.3): one row per (notice, Notifier) until it is delivered.
CREATE TABLE notifications (
  id BIGINT NOT NULL PRIMARY KEY,
  webhook_id TEXT NOT NULL,
  notifier_namespace TEXT NOT NULL,
  notifier_name TEXT NOT NULL,
  notifier_uid TEXT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  object_uid TEXT NOT NULL,
  reason TEXT NOT NULL,
  type TEXT NOT NULL,
  message TEXT NOT NULL,
  task TEXT NOT NULL,
  time_ms BIGINT NOT NULL,
  due_ms BIGINT NOT NULL,
  attempts BIGINT NOT NULL,
  last_error TEXT NOT NULL
);
CREATE INDEX notifications_by_due ON notifications (due_ms);
CREATE INDEX notifications_by_notifier ON notifications (notifier_uid, id);
CREATE INDEX notifications_by_object ON notifications (object_uid, reason);
CREATE TABLE notification_drops (
  notifier_uid TEXT NOT NULL PRIMARY KEY,
  dropped BIGINT NOT NULL
);
)sql";

inline constexpr std::string_view kNotificationColumns =
    "id, webhook_id, notifier_namespace, notifier_name, notifier_uid, kind, namespace, name, "
    "object_uid, reason, type, message, task, time_ms, due_ms, attempts, last_error";

template <typename Db>
class NotificationOutbox {
 public:
  using Row = typename Db::CopyRow;

  // The outbox part of a status write of `object` (as written): withdraws, then adds, per
  // Notifier. Requires the write transaction.
  static Status Record(Db& db, const std::string& database, const Object& object,
                       const api::NoticeChange& change) {
    const int64_t now = api::UnixMillis(db.clock_.Now());
    for (const std::string& reason : change.withdraw) {
      RETURN_IF_ERROR(db.Query("DELETE FROM notifications WHERE object_uid = " + P(1) +
                                   " AND reason = " + P(2) +
                                   " AND attempts = 0 AND due_ms > CAST(" + P(3) + " AS BIGINT)",
                               {object.metadata.uid, reason, std::to_string(now)}, nullptr));
    }
    if (change.add.empty()) {
      return api::OkStatus();
    }
    ASSIGN_OR_RETURN(std::vector<Object> notifiers,
                     NotifiersOf(db, database, object.metadata.namespace_));
    for (const api::Notice& notice : change.add) {
      for (const Object& notifier : notifiers) {
        if (!api::NotifierWants(notifier, object, notice.reason)) {
          continue;
        }
        Store::Notification n;
        n.webhook_id = "msg_" + db.NewUid();
        n.notifier = api::KeyOf(notifier);
        n.notifier_uid = notifier.metadata.uid;
        n.object = api::KeyOf(object);
        n.object_uid = object.metadata.uid;
        n.reason = notice.reason;
        n.type = notice.type;
        n.message = notice.message;
        n.task_json = notice.task_json;
        n.time_ms = now;
        n.due_ms = now + notice.delay.count();
        RETURN_IF_ERROR(Insert(db, n));
        RETURN_IF_ERROR(Bound(db, n.notifier_uid));
      }
    }
    return api::OkStatus();
  }

  static StatusOr<std::vector<Store::Notification>> ListDue(Db& db, const std::string& database,
                                                            int64_t now_ms, int limit) {
    std::vector<Store::Notification> out;
    RETURN_IF_ERROR(
        db.Query("SELECT " + std::string(kNotificationColumns) +
                     " FROM notifications WHERE due_ms <= CAST(" + P(1) +
                     " AS BIGINT) ORDER BY due_ms, id LIMIT CAST(" + P(2) + " AS BIGINT)",
                 {std::to_string(now_ms), std::to_string(limit > 0 ? limit : INT32_MAX)},
                 [&](const Row& r) -> Status {
                   ASSIGN_OR_RETURN(Store::Notification n, Read(database, r));
                   out.push_back(std::move(n));
                   return api::OkStatus();
                 }));
    return out;
  }

  // Every pending notification, oldest first, for the export (store_copier.h).
  static Status ForEach(Db& db, const std::string& database,
                        const std::function<Status(const Store::Notification&)>& each) {
    return db.Query(
        "SELECT " + std::string(kNotificationColumns) + " FROM notifications ORDER BY id", {},
        [&](const Row& r) -> Status {
          ASSIGN_OR_RETURN(Store::Notification n, Read(database, r));
          return each(n);
        });
  }

  // A copied notification (store_copier.h): a new id, in the order of the import; its webhook
  // id, time, due time, attempts and last error as they were.
  static Status Import(Db& db, const Store::Notification& n) { return Insert(db, n); }
  static Status ImportDrops(Db& db, const std::string& notifier_uid, int64_t dropped) {
    return AddDrops(db, notifier_uid, dropped);
  }

  static Status Finish(Db& db, int64_t id) {
    return db.Query("DELETE FROM notifications WHERE id = CAST(" + P(1) + " AS BIGINT)",
                    {std::to_string(id)}, nullptr);
  }

  static Status Retry(Db& db, int64_t id, int64_t attempts, int64_t due_ms,
                      const std::string& error) {
    return db.Query(
        "UPDATE notifications SET attempts = CAST(" + P(2) + " AS BIGINT), due_ms = CAST(" + P(3) +
            " AS BIGINT), last_error = " + P(4) + " WHERE id = CAST(" + P(1) + " AS BIGINT)",
        {std::to_string(id), std::to_string(attempts), std::to_string(due_ms), error}, nullptr);
  }

  static StatusOr<std::vector<Store::NotificationCount>> Counts(Db& db) {
    std::map<std::string, Store::NotificationCount> by_uid;
    RETURN_IF_ERROR(db.Query(
        "SELECT notifier_uid, CAST(COUNT(*) AS BIGINT) FROM notifications GROUP BY notifier_uid",
        {}, [&](const Row& r) -> Status {
          Store::NotificationCount& c = by_uid[r.Text(0)];
          c.notifier_uid = r.Text(0);
          c.pending = r.Int(1);
          return api::OkStatus();
        }));
    RETURN_IF_ERROR(db.Query("SELECT notifier_uid, dropped FROM notification_drops", {},
                             [&](const Row& r) -> Status {
                               Store::NotificationCount& c = by_uid[r.Text(0)];
                               c.notifier_uid = r.Text(0);
                               c.dropped = r.Int(1);
                               return api::OkStatus();
                             }));
    std::vector<Store::NotificationCount> out;
    out.reserve(by_uid.size());
    for (auto& [uid, c] : by_uid) {
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  static std::string P(int n) { return Db::kParam + std::to_string(n); }

  static StatusOr<Store::Notification> Read(const std::string& database, const Row& r) {
    auto kind = api::ParseKind(r.Text(5));
    if (!kind.ok()) {
      return DataLossError("database " + database + ": notification about unknown kind '" +
                           r.Text(5) + "'");
    }
    Store::Notification n;
    n.id = r.Int(0);
    n.webhook_id = r.Text(1);
    n.notifier = {api::Kind::kNotifier, r.Text(2), r.Text(3)};
    n.notifier_uid = r.Text(4);
    n.object = {*kind, r.Text(6), r.Text(7)};
    n.object_uid = r.Text(8);
    n.reason = r.Text(9);
    n.type = r.Text(10);
    n.message = r.Text(11);
    n.task_json = r.Text(12);
    n.time_ms = r.Int(13);
    n.due_ms = r.Int(14);
    n.attempts = r.Int(15);
    n.last_error = r.Text(16);
    return n;
  }

  static StatusOr<std::vector<Object>> NotifiersOf(Db& db, const std::string& database,
                                                   const std::string& ns) {
    std::vector<ObjectKey> keys;
    RETURN_IF_ERROR(db.Query("SELECT name FROM objects WHERE kind = " + P(1) +
                                 " AND namespace = " + P(2) + " ORDER BY name",
                             {std::string(api::KindName(api::Kind::kNotifier)), ns},
                             [&](const Row& r) -> Status {
                               keys.push_back({api::Kind::kNotifier, ns, r.Text(0)});
                               return api::OkStatus();
                             }));
    std::vector<Object> out;
    for (const ObjectKey& key : keys) {
      ASSIGN_OR_RETURN(std::optional<ObjectRow> row, db.ReadRow(key));
      if (row && row->deletion_timestamp.empty()) {
        ASSIGN_OR_RETURN(Object notifier, RowToObject(database, *row));
        out.push_back(std::move(notifier));
      }
    }
    return out;
  }

  static Status Insert(Db& db, const Store::Notification& n) {
    std::string values = "(SELECT COALESCE(MAX(id), 0) + 1 FROM notifications)";
    for (int i = 1; i <= 16; ++i) {
      const bool integer = i >= 13 && i <= 15;
      values += ", " + (integer ? "CAST(" + P(i) + " AS BIGINT)" : P(i));
    }
    return db.Query(
        "INSERT INTO notifications (" + std::string(kNotificationColumns) + ") VALUES (" + values +
            ")",
        {n.webhook_id, n.notifier.namespace_, n.notifier.name, n.notifier_uid,
         std::string(api::KindName(n.object.kind)), n.object.namespace_, n.object.name,
         n.object_uid, n.reason, n.type, n.message, n.task_json, std::to_string(n.time_ms),
         std::to_string(n.due_ms), std::to_string(n.attempts), n.last_error},
        nullptr);
  }

  // Keeps the Notifier's newest kMaxPendingNotifications rows; counts what it drops.
  static Status Bound(Db& db, const std::string& notifier_uid) {
    int64_t dropped = 0;
    RETURN_IF_ERROR(db.Query(
        "DELETE FROM notifications WHERE notifier_uid = " + P(1) +
            " AND id NOT IN (SELECT id FROM notifications WHERE notifier_uid = " + P(1) +
            " ORDER BY id DESC LIMIT CAST(" + P(2) + " AS BIGINT)) RETURNING id",
        {notifier_uid, std::to_string(Store::kMaxPendingNotifications)}, [&](const Row&) -> Status {
          ++dropped;
          return api::OkStatus();
        }));
    if (dropped == 0) {
      return api::OkStatus();
    }
    return AddDrops(db, notifier_uid, dropped);
  }

  static Status AddDrops(Db& db, const std::string& notifier_uid, int64_t dropped) {
    return db.Query("INSERT INTO notification_drops (notifier_uid, dropped) VALUES (" + P(1) +
                        ", CAST(" + P(2) +
                        " AS BIGINT)) ON CONFLICT (notifier_uid) DO UPDATE SET dropped = "
                        "notification_drops.dropped + excluded.dropped",
                    {notifier_uid, std::to_string(dropped)}, nullptr);
  }
};

}  // namespace sbx::controller::store_internal
