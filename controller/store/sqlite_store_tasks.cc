// SqliteStore's AgentTask side tables: the task log (bounded per task by
// Options::task_log_max_bytes, oldest deltas dropped first) and the collected artifacts (at most
// kMaxTaskArtifactBytes per task), keyed by the task's uid and deleted with its object row
// (DeleteRow in sqlite_store_objects.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "api/rfc3339.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/internal/task_slots.h"
#include "controller/store/internal/usage_ledger.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;

// ---- AgentTask log and artifacts --------------------------------------------------------------

using store_internal::kTaskLogEntryColumns;
using store_internal::ReadTaskLogEntryColumns;
using store_internal::TaskLogKindName;

StatusOr<int64_t> SqliteStore::AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                             const std::vector<TaskLogEntry>& entries) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  int64_t seq = 0;
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT last_seq FROM task_log_heads WHERE task_uid = ?"));
    stmt.Bind(1, task_uid);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    seq = row ? stmt.Int(0) : 0;
  }
  const int64_t bound = std::max<int64_t>(options_.task_log_max_bytes, 1);
  for (const TaskLogEntry& e : entries) {
    ++seq;
    RETURN_IF_ERROR(
        InsertTaskLogEntry(task_uid, store_internal::StoredTaskLogEntry(e, seq, bound, now)));
  }
  RETURN_IF_ERROR(InsertTaskLogHead(task, task_uid, seq, 0,
                                    " ON CONFLICT (task_uid) DO UPDATE SET last_seq = "
                                    "excluded.last_seq"));
  // The bound: drop the oldest deltas first (their text is also in the item results that
  // follow them), then the oldest entries of any kind, until the text fits.
  for (std::string_view kinds : {"kind IN ('assistant.delta', 'output.delta')", "1"}) {
    for (;;) {
      int64_t total = 0;
      {
        ASSIGN_OR_RETURN(
            Stmt stmt, Prepare("SELECT coalesce(sum(bytes), 0) FROM task_log WHERE task_uid = ?"));
        stmt.Bind(1, task_uid);
        ASSIGN_OR_RETURN(bool row, stmt.Step());
        total = row ? stmt.Int(0) : 0;
      }
      if (total <= bound) {
        break;
      }
      // Delete the oldest rows of this class whose sizes cover the excess (at least one).
      ASSIGN_OR_RETURN(Stmt pick,
                       Prepare("SELECT seq, bytes FROM task_log WHERE task_uid = ? AND " +
                               std::string(kinds) + " ORDER BY seq LIMIT 256"));
      pick.Bind(1, task_uid);
      std::vector<int64_t> doomed;
      int64_t freed = 0;
      for (;;) {
        ASSIGN_OR_RETURN(bool row, pick.Step());
        if (!row || freed >= total - bound) {
          break;
        }
        doomed.push_back(pick.Int(0));
        freed += pick.Int(1);
      }
      if (doomed.empty()) {
        break;  // nothing of this class left
      }
      for (int64_t s : doomed) {
        ASSIGN_OR_RETURN(Stmt del, Prepare("DELETE FROM task_log WHERE task_uid = ? AND seq = ?"));
        RETURN_IF_ERROR(del.Bind(1, task_uid).Bind(2, s).Run());
      }
      ASSIGN_OR_RETURN(
          Stmt count,
          Prepare("UPDATE task_log_heads SET dropped = dropped + ? WHERE task_uid = ?"));
      RETURN_IF_ERROR(count.Bind(1, static_cast<int64_t>(doomed.size())).Bind(2, task_uid).Run());
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return seq;
}

Status SqliteStore::InsertTaskLogHead(const ObjectKey& task, const std::string& task_uid,
                                      int64_t last_seq, int64_t dropped,
                                      std::string_view on_conflict) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO task_log_heads (task_uid, kind, namespace, "
                                      "name, last_seq, dropped) VALUES (?, ?, ?, ?, ?, ?)" +
                                      std::string(on_conflict)));
  return stmt.Bind(1, task_uid)
      .Bind(2, KindName(task.kind))
      .Bind(3, task.namespace_)
      .Bind(4, task.name)
      .Bind(5, last_seq)
      .Bind(6, dropped)
      .Run();
}

Status SqliteStore::InsertTaskLogEntry(const std::string& task_uid, const TaskLogEntry& entry) {
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("INSERT INTO task_log (task_uid, " + std::string(kTaskLogEntryColumns) +
                           ", bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  stmt.Bind(1, task_uid)
      .Bind(2, entry.seq)
      .Bind(3, TaskLogKindName(entry.kind))
      .Bind(4, entry.item_id)
      .Bind(5, entry.text)
      .Bind(7, entry.at)
      .Bind(8, static_cast<int64_t>(entry.text.size()));
  if (entry.exit_code.has_value()) {
    stmt.Bind(6, *entry.exit_code);
  }
  return stmt.Run();
}

StatusOr<Store::TaskLogPage> SqliteStore::ReadTaskLog(const std::string& task_uid,
                                                      int64_t after_seq, int limit) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Exec("BEGIN"));
  auto read = [&]() -> StatusOr<TaskLogPage> {
    TaskLogPage page;
    {
      ASSIGN_OR_RETURN(Stmt stmt,
                       Prepare("SELECT last_seq, dropped FROM task_log_heads WHERE task_uid = ?"));
      stmt.Bind(1, task_uid);
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (row) {
        page.last_seq = stmt.Int(0);
        page.dropped = stmt.Int(1);
      }
    }
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kTaskLogEntryColumns) +
                                        " FROM task_log WHERE task_uid = ? AND seq > ? ORDER BY "
                                        "seq LIMIT ?"));
    stmt.Bind(1, task_uid).Bind(2, after_seq).Bind(3, limit > 0 ? int64_t{limit} : int64_t{-1});
    for (;;) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) {
        break;
      }
      page.entries.push_back(ReadTaskLogEntryColumns(stmt));
    }
    return page;
  };
  StatusOr<TaskLogPage> page = read();
  (void)Exec("COMMIT");
  return page;
}

Status SqliteStore::PutArtifact(const ObjectKey& task, const std::string& task_uid,
                                const Artifact& artifact) {
  RETURN_IF_ERROR(store_internal::CheckArtifactSize(artifact));
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT coalesce(sum(bytes), 0) FROM artifacts WHERE "
                                        "task_uid = ? AND path != ?"));
    stmt.Bind(1, task_uid).Bind(2, artifact.path);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    RETURN_IF_ERROR(store_internal::CheckArtifactBudget(task, artifact, row ? stmt.Int(0) : 0));
  }
  RETURN_IF_ERROR(InsertArtifact(task, task_uid, artifact,
                                 " ON CONFLICT (task_uid, path) DO UPDATE SET bytes = "
                                 "excluded.bytes, sha256 = excluded.sha256, content = "
                                 "excluded.content"));
  return txn.Commit();
}

Status SqliteStore::InsertArtifact(const ObjectKey& task, const std::string& task_uid,
                                   const Artifact& artifact, std::string_view on_conflict) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO artifacts (task_uid, kind, namespace, name, "
                                      "path, bytes, sha256, content) VALUES (?, ?, ?, ?, ?, ?, "
                                      "?, ?)" +
                                      std::string(on_conflict)));
  return stmt.Bind(1, task_uid)
      .Bind(2, KindName(task.kind))
      .Bind(3, task.namespace_)
      .Bind(4, task.name)
      .Bind(5, artifact.path)
      .Bind(6, artifact.bytes)
      .Bind(7, artifact.sha256)
      .BindBlob(8, artifact.content)
      .Run();
}

StatusOr<std::vector<Store::Artifact>> SqliteStore::ListArtifacts(const std::string& task_uid) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT path, bytes, sha256 FROM artifacts WHERE task_uid "
                                      "= ? ORDER BY path"));
  stmt.Bind(1, task_uid);
  std::vector<Artifact> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    out.push_back(Artifact{stmt.Text(0), stmt.Int(1), stmt.Text(2), ""});
  }
  return out;
}

StatusOr<Store::Artifact> SqliteStore::GetArtifact(const std::string& task_uid,
                                                   const std::string& path) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT path, bytes, sha256, content FROM artifacts WHERE "
                                      "task_uid = ? AND path = ?"));
  stmt.Bind(1, task_uid).Bind(2, path);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return api::NotFoundError("no artifact " + path + " for task uid " + task_uid);
  }
  return Artifact{stmt.Text(0), stmt.Int(1), stmt.Text(2), stmt.Text(3)};
}

// ---- usage ledger -----------------------------------------------------------------------------

Status SqliteStore::RecordUsage(const UsageRecord& record) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(store_internal::UsageLedger<SqliteStore>::Insert(
      *this, record, " ON CONFLICT (task_uid, attempt) DO NOTHING"));
  return txn.Commit();
}

StatusOr<api::UsageSum> SqliteStore::SumUsage(const std::string& workspace, int64_t from_ms,
                                              int64_t to_ms) {
  std::lock_guard lock(mu_);
  return store_internal::UsageLedger<SqliteStore>::Sum(*this, workspace, from_ms, to_ms);
}

StatusOr<std::vector<Store::UsageTotal>> SqliteStore::UsageTotals() {
  std::lock_guard lock(mu_);
  return store_internal::UsageLedger<SqliteStore>::Totals(*this);
}

// ---- task slots ---------------------------------------------------------------------------------

StatusOr<Store::SlotGrant> SqliteStore::AcquireTaskSlot(const std::string& workspace,
                                                        const ObjectKey& task,
                                                        const std::string& task_uid, int limit) {
  std::lock_guard lock(mu_);
  Txn txn(*this);  // BEGIN IMMEDIATE: one slot taker at a time, across processes
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Store::SlotGrant grant,
                   store_internal::TaskSlots<SqliteStore>::Acquire(
                       *this, workspace, task, task_uid, limit, api::UnixMillis(clock_.Now())));
  RETURN_IF_ERROR(txn.Commit());
  return grant;
}

Status SqliteStore::ReleaseTaskSlot(const std::string& task_uid) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(store_internal::TaskSlots<SqliteStore>::Release(*this, task_uid));
  return txn.Commit();
}

}  // namespace sbx::controller
