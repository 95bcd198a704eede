// SqliteStore's watch: reading the change log from a revision (and noticing a compacted gap),
// compacting it, the current revision, and waiting for a commit by this or another process.
#include <algorithm>
#include <chrono>
#include <utility>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

// ---- watch ------------------------------------------------------------------------------------

StatusOr<std::vector<Store::Change>> SqliteStore::WatchSince(int64_t since, int limit) {
  std::vector<Change> out;
  since = std::max<int64_t>(since, 0);
  if (limit <= 0) {
    return out;
  }
  std::lock_guard lock(mu_);
  // Remember what this read covers before reading, so that WaitForChange sees anything
  // committed after this point.
  ASSIGN_OR_RETURN(seen_data_version_, DataVersion());
  seen_local_commits_ = local_commits_;
  // Read before the rows: every revision up to `current` was committed by then, and a committed
  // change leaves the log only by compaction. So if revision since + 1 <= current is not among
  // the rows read afterwards, it was compacted — whatever other processes did in between.
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("SELECT revision, type, kind, namespace, name, object, wake_hint FROM "
                           "changes WHERE revision > ? ORDER BY revision LIMIT ?"));
  stmt.Bind(1, since).Bind(2, static_cast<int64_t>(std::max(limit, 0)));
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    ASSIGN_OR_RETURN(Change change, store_internal::ReadChangeColumns(path_, stmt));
    out.push_back(std::move(change));
  }
  const bool gap = out.empty() ? since < current : out.front().revision != since + 1;
  if (gap) {
    ASSIGN_OR_RETURN(const int64_t compacted, ReadCompactedRevision());
    return Status(api::StatusCode::kOutOfRange,
                  "database " + path_ + ": cannot watch from revision " + std::to_string(since) +
                      ": resourceVersion too old, the change log was compacted up to revision " +
                      std::to_string(compacted) +
                      "; list again and watch from the revision read before");
  }
  return out;
}

StatusOr<int64_t> SqliteStore::ReadCompactedRevision() {
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT min(revision) FROM changes"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row || stmt.IsNull(0)) {
    return current;  // an empty log: everything is compacted (or nothing was ever written)
  }
  return stmt.Int(0) - 1;
}

StatusOr<int64_t> SqliteStore::CompactChanges(int64_t revision) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM changes WHERE revision <= ?"));
  RETURN_IF_ERROR(stmt.Bind(1, std::min(revision, current)).Run());
  const int64_t deleted = sqlite3_changes64(db_);
  RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

StatusOr<int64_t> SqliteStore::CurrentRevision() {
  std::lock_guard lock(mu_);
  return ReadRevision();
}

bool SqliteStore::WaitForChange(std::chrono::milliseconds timeout) {
  // Real time on purpose: this paces I/O polling, and a FakeClock would never let it return.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    if (local_commits_ != seen_local_commits_) {
      seen_local_commits_ = local_commits_;
      return true;
    }
    auto version = DataVersion();
    if (!version.ok()) {
      return true;  // let the caller read, and see the error there
    }
    if (seen_data_version_ < 0) {
      seen_data_version_ = *version;
    } else if (*version != seen_data_version_) {
      seen_data_version_ = *version;
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    committed_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(options_.poll_interval,
                                                                            deadline - now));
  }
}
}  // namespace sbx::controller
