// SqliteStore's events: recording one (deduplicated, with a per-object bound), expiring old ones
// and listing them; and its audit log (internal/audit_log.h), the other record of what happened.
#include <algorithm>
#include <utility>

#include "api/rfc3339.h"
#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using store_internal::kEventColumns;
using store_internal::ReadEventColumns;

// ---- events -----------------------------------------------------------------------------------

Status SqliteStore::RecordEvent(const Event& event) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(InsertEvent(store_internal::RecordedEvent(event, now),
                              " ON CONFLICT (kind, namespace, name, type, reason, message) DO "
                              "UPDATE SET count = count + excluded.count, last_seen = "
                              "excluded.last_seen"));
  if (options_.max_events_per_object > 0) {
    // Both lookups use the unique index, whose prefix is the involved object.
    ASSIGN_OR_RETURN(Stmt trim, Prepare("DELETE FROM events WHERE kind = ?1 AND namespace = ?2 AND "
                                        "name = ?3 AND id NOT IN (SELECT id FROM events WHERE "
                                        "kind = ?1 AND namespace = ?2 AND name = ?3 "
                                        "ORDER BY last_seen DESC, id DESC LIMIT ?4)"));
    RETURN_IF_ERROR(trim.Bind(1, KindName(event.involved.kind))
                        .Bind(2, event.involved.namespace_)
                        .Bind(3, event.involved.name)
                        .Bind(4, static_cast<int64_t>(options_.max_events_per_object))
                        .Run());
  }
  return txn.Commit();
}

Status SqliteStore::InsertEvent(const Event& event, std::string_view on_conflict) {
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("INSERT INTO events (" + std::string(kEventColumns) +
                           ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)" + std::string(on_conflict)));
  return stmt.Bind(1, KindName(event.involved.kind))
      .Bind(2, event.involved.namespace_)
      .Bind(3, event.involved.name)
      .Bind(4, event.type)
      .Bind(5, event.reason)
      .Bind(6, event.message)
      .Bind(7, event.count)
      .Bind(8, event.first_seen)
      .Bind(9, event.last_seen)
      .Run();
}

StatusOr<int64_t> SqliteStore::ExpireEvents(std::chrono::system_clock::time_point cutoff) {
  // last_seen is RFC 3339 UTC with second precision (FormatRfc3339), so text order is time order.
  const std::string before = FormatRfc3339(cutoff);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM events WHERE last_seen < ?"));
  RETURN_IF_ERROR(stmt.Bind(1, before).Run());
  const int64_t deleted = sqlite3_changes64(db_);
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

StatusOr<std::vector<Store::Event>> SqliteStore::ListEvents(
    const std::optional<ObjectKey>& involved) {
  std::string sql = "SELECT " + std::string(kEventColumns) + " FROM events";
  if (involved) {
    sql += " WHERE kind = ? AND namespace = ? AND name = ?";
  }
  sql += " ORDER BY last_seen, id";
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  if (involved) {
    stmt.Bind(1, KindName(involved->kind)).Bind(2, involved->namespace_).Bind(3, involved->name);
  }
  std::vector<Event> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    ASSIGN_OR_RETURN(Event event, ReadEventColumns(path_, stmt));
    out.push_back(std::move(event));
  }
  return out;
}
// ---- audit log --------------------------------------------------------------------------------

Status SqliteStore::AppendAudit(const AuditRecord& record) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(store_internal::AuditLog<SqliteStore>::Insert(*this, record));
  return txn.Commit();
}

StatusOr<std::vector<Store::AuditRecord>> SqliteStore::ListAudit(const AuditQuery& query) {
  std::lock_guard lock(mu_);
  return store_internal::AuditLog<SqliteStore>::List(*this, path_, query);
}

StatusOr<int64_t> SqliteStore::ExpireAudit(std::chrono::system_clock::time_point cutoff) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(int64_t deleted,
                   store_internal::AuditLog<SqliteStore>::Expire(*this, api::UnixMillis(cutoff)));
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

// ---- notification outbox ------------------------------------------------------------------------

StatusOr<std::vector<Store::Notification>> SqliteStore::ListDueNotifications(int64_t now_ms,
                                                                             int limit) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<SqliteStore>::ListDue(*this, path_, now_ms, limit);
}

Status SqliteStore::FinishNotification(int64_t id) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<SqliteStore>::Finish(*this, id);
}

Status SqliteStore::RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                                      const std::string& error) {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<SqliteStore>::Retry(*this, id, attempts, due_ms, error);
}

StatusOr<std::vector<Store::NotificationCount>> SqliteStore::NotificationCounts() {
  std::lock_guard lock(mu_);
  return store_internal::NotificationOutbox<SqliteStore>::Counts(*this);
}

}  // namespace sbx::controller
