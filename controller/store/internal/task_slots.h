// The task slots' SQL (Store::AcquireTaskSlot, Store::ReleaseTaskSlot), written once for
// SqliteStore and PostgresStore, as usage_ledger.h is: the table is the same on both (SQLite's
// migration 7, PostgreSQL's 5) and the statements differ only in their placeholders.
//
// A template over the store, which befriends it and calls it with its mutex held inside a write
// transaction that serializes the workspace's slot takers: SQLite's BEGIN IMMEDIATE (the whole
// database), PostgreSQL's pg_advisory_xact_lock on the workspace (the caller takes it; see
// kAdvisoryLock). Module-private to controller/store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// The table, the same DDL on both databases. A migration that has shipped is never edited.
inline constexpr std::string_view kTaskSlotsTable = R"sql(
-- Task slots (DESIGN §8.2, limits.maxConcurrentTasks): one row per AgentTask that holds one.
CREATE TABLE task_slots (
  task_uid TEXT NOT NULL PRIMARY KEY,
  workspace TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  acquired_at_ms BIGINT NOT NULL
);
CREATE INDEX task_slots_by_workspace ON task_slots (workspace);
)sql";

template <typename Db>
class TaskSlots {
 public:
  using Row = typename Db::CopyRow;

  // Inside the caller's write transaction (after PostgreSQL's advisory lock).
  static StatusOr<Store::SlotGrant> Acquire(Db& db, const std::string& workspace,
                                            const api::ObjectKey& task, const std::string& task_uid,
                                            int limit, int64_t now_ms) {
    Store::SlotGrant grant;
    bool held = false;
    RETURN_IF_ERROR(db.Query(
        "SELECT task_uid, namespace, name FROM task_slots WHERE workspace = " + P(1) +
            " ORDER BY acquired_at_ms, task_uid",
        {workspace}, [&](const Row& row) -> Status {
          if (row.Text(0) == task_uid) {
            held = true;
          }
          grant.holders.push_back({{api::Kind::kAgentTask, row.Text(1), row.Text(2)}, row.Text(0)});
          return api::OkStatus();
        }));
    if (held) {
      return Store::SlotGrant{true, {}};
    }
    if (static_cast<int64_t>(grant.holders.size()) >= limit) {
      return grant;
    }
    RETURN_IF_ERROR(db.Query(
        "INSERT INTO task_slots (task_uid, workspace, namespace, name, "
        "acquired_at_ms) VALUES (" +
            P(1) + ", " + P(2) + ", " + P(3) + ", " + P(4) + ", CAST(" + P(5) + " AS BIGINT))",
        {task_uid, workspace, task.namespace_, task.name, std::to_string(now_ms)}, nullptr));
    return Store::SlotGrant{true, {}};
  }

  static Status Release(Db& db, const std::string& task_uid) {
    return db.Query("DELETE FROM task_slots WHERE task_uid = " + P(1), {task_uid}, nullptr);
  }

 private:
  static std::string P(int n) { return Db::kParam + std::to_string(n); }
};

}  // namespace sbx::controller::store_internal
