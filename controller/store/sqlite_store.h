// SqliteStore: the Store on one SQLite file, shared by sbxctl and sbxd (DESIGN §3).
//
// The file is opened in WAL mode with a busy timeout, foreign keys on and synchronous=NORMAL;
// its schema is versioned (PRAGMA user_version, plus a schema_migrations table for humans) and
// migrated forward in one transaction by Open. Every write is one `BEGIN IMMEDIATE` transaction,
// so writers in several processes serialise cleanly and revisions are committed in order; a
// database that stays locked past the busy timeout gives kUnavailable naming the path.
//
// Revisions count object writes only (Apply, UpdateStatus, UpdateControllerMetadata, Delete,
// PostWakeHint):
// each changed object gets the next revision and one row in the change log that WatchSince
// reads. Events, inventory and leases do not bump the revision.
//
// Bounded growth. The change log holds exactly the revisions (compacted, current]: revisions are
// contiguous (one change row each, committed in order) and CompactChanges only ever deletes a
// prefix, so the compaction point needs no column of its own — it is the oldest row's revision
// minus one, or the current revision when the log is empty. WatchSince(since) notices a missing
// revision right after `since` and answers kOutOfRange instead of skipping it. Events are
// bounded per object (RecordEvent keeps the newest Options::max_events_per_object of the
// involved object) and by age (ExpireEvents). The file does not shrink: freed pages are reused,
// so its size follows the high-water mark of what is kept.
//
// Thread-safety: one SQLite connection guarded by one mutex; every method may be called from
// any thread. Several SqliteStore instances (in one or several processes) may share a file.
// Ownership: the store owns its connection; the optional Clock must outlive it.
//
// Layout: sqlite_store.cc opens and migrates the file and holds the SQLite plumbing and the
// dialect below; sqlite_store_watch.cc and _copy.cc (export and import) implement what is
// SQLite's own. The Store operations themselves — objects and the records beside them (events,
// inventory, leases, task logs, artifacts, usage, task slots, audit, notifications) — are
// internal/sql_store, written once for both backends over Query and that dialect. internal/ also
// holds the schema (sqlite_schema), the statement and transaction handles (sqlite_statement) and
// the dialect-neutral row, change-log JSON and decoding (object_row), row readers (store_rows)
// and export/import (store_copier) that PostgresStore shares.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "controller/base/clock.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/internal/sql_store.h"
#include "controller/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace sbx::controller {

struct SqliteStoreOptions {
  // How long a write waits for another writer before giving up with kUnavailable.
  std::chrono::milliseconds busy_timeout{5000};
  // How often WaitForChange polls PRAGMA data_version.
  std::chrono::milliseconds poll_interval{10};
  // Source of timestamps and lease expiry; SystemClock when null. Not owned.
  Clock* clock = nullptr;
  // RecordEvent keeps at most this many events per involved object, dropping the least recently
  // seen ones (Kubernetes keeps events by TTL only; a crash-looping object with varying messages
  // would otherwise fill the table within one TTL). 0 = unbounded.
  int max_events_per_object = 100;
  // AppendTaskLog keeps at most this much text per AgentTask (oldest deltas dropped first).
  int64_t task_log_max_bytes = int64_t{1} << 20;
};

class SqliteStore final : public store_internal::SqlStore<SqliteStore> {
 public:
  using Options = SqliteStoreOptions;

  // Opens (creating if absent) the database at `path`, or a private in-memory one for
  // ":memory:", and migrates its schema. What Open creates is private to the owner: missing
  // parent directories mode 0700, the database file (hence its -wal and -shm) mode 0600; an
  // existing directory or file keeps its mode. Errors name the path: kFailedPrecondition if a
  // directory cannot be created, or the file cannot be opened, is not an SQLite/sbx database or
  // has a schema newer than this build knows; kDataLoss if it is corrupt; kUnavailable if it
  // stays locked past the busy timeout.
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, Options options = {});

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // The schema version this build creates and understands.
  static int LatestSchemaVersion();
  // OK if `path` is an existing sbx store file. Opened read-only, so it changes nothing: an empty
  // file, another program's SQLite file, or no SQLite file at all is kFailedPrecondition (Open
  // would turn the first two into an sbx store). For a source that must not be written.
  static Status CheckIsSbxFile(const std::string& path);
  const std::string& path() const { return path_; }

  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) override;
  StatusOr<int64_t> CurrentRevision() override;
  bool WaitForChange(std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> CompactChanges(int64_t revision) override;

  // What the bounds act on, for tests, benchmarks and logs.
  struct Stats {
    int64_t revision = 0;            // current revision
    int64_t compacted_revision = 0;  // WatchSince(since) needs since >= this
    int64_t changes = 0;             // rows in the change log
    int64_t events = 0;              // rows in the events table
  };
  StatusOr<Stats> ReadStats();
  // Copies the WAL into the database file and truncates the WAL to zero bytes
  // (PRAGMA wal_checkpoint(TRUNCATE)), so that the file sizes show what is stored. kUnavailable
  // if readers or writers of other connections kept it from completing.
  Status Checkpoint();

  // sqlite_store_copy.cc. ExportTo reads in one deferred read transaction (a WAL snapshot);
  // ImportFrom writes in one BEGIN IMMEDIATE transaction.
  Status ExportTo(StoreSink& sink) override;
  Status ImportFrom(const std::function<Status(StoreSink&)>& fill) override;

 private:
  class Stmt;
  class Txn;
  // The SQL written once for both stores (internal/): it reaches the mutex, Query and its rows,
  // and the dialect below (placeholders ?1, ?2, …).
  friend class store_internal::StoreCopier<SqliteStore>;
  friend class store_internal::UsageLedger<SqliteStore>;
  friend class store_internal::TaskSlots<SqliteStore>;
  friend class store_internal::ObjectWrites<SqliteStore>;
  friend class store_internal::AuditLog<SqliteStore>;
  friend class store_internal::NotificationOutbox<SqliteStore>;
  friend class store_internal::SqlRecords<SqliteStore>;
  friend class store_internal::SqlStore<SqliteStore>;
  using CopyRow = Stmt;
  // The dialect (internal/sql_store.h).
  static constexpr char kParam = '?';
  static constexpr std::string_view kByteOrder = "";  // BINARY, the default collation
  static constexpr std::string_view kEventKey = "(kind, namespace, name, type, reason, message)";
  static std::string StartsWith(std::string_view column, std::string_view param) {
    return "substr(CAST(" + std::string(column) + " AS BLOB), 1, length(CAST(" +
           std::string(param) + " AS BLOB))) = CAST(" + std::string(param) + " AS BLOB)";
  }

  SqliteStore(std::string path, Options options, sqlite3* db);

  // All below require mu_ held.
  Status Configure();
  Status Migrate();
  StatusOr<Stmt> Prepare(std::string_view sql);
  Status Exec(std::string_view sql);
  Status Error(int rc, std::string_view what) const;
  StatusOr<int64_t> DataVersion();
  // Revisions <= this are no longer in the change log.
  StatusOr<int64_t> ReadCompactedRevision();
  // Runs `sql` with `params` bound to ?1, ?2, … and calls `each_row` (when not null) on each
  // row, stopping at its first error; `changed` (when not null) gets the rows it changed.
  Status Query(std::string_view sql, const std::vector<store_internal::SqlParam>& params,
               const std::function<Status(const Stmt&)>& each_row, int64_t* changed = nullptr);
  // What PostgreSQL needs and SQLite does not (internal/sql_store.h): BEGIN IMMEDIATE already
  // admits one writer at a time, and other processes see commits through data_version.
  static Status LockKey(const std::string& /*key*/) { return api::OkStatus(); }
  static Status LockWrites() { return api::OkStatus(); }
  StatusOr<int64_t> LockRevision() { return ReadRevision(); }
  static Status Notify() { return api::OkStatus(); }
  // Wakes this process's WaitForChange (data_version does not change for our own commits).
  void Committed() {
    ++local_commits_;
    committed_.notify_all();
  }
  const std::string& database() const { return path_; }
  std::string Now() const;
  std::string NewUid();

  const std::string path_;
  const Options options_;
  SystemClock system_clock_;
  Clock& clock_;

  std::mutex mu_;
  std::condition_variable committed_;
  sqlite3* db_ = nullptr;  // Guarded by mu_.
  // Prepared statements by SQL text, finalized on close. Guarded by mu_.
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
  std::mt19937_64 uid_random_;       // Guarded by mu_.
  uint64_t local_commits_ = 0;       // Guarded by mu_; object commits by this instance.
  int64_t seen_data_version_ = -1;   // Guarded by mu_; as of the last watch read.
  uint64_t seen_local_commits_ = 0;  // Guarded by mu_.
};

}  // namespace sbx::controller
