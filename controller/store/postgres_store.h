// PostgresStore: the Store on a PostgreSQL 15 database (DESIGN §7.4, issue #17), for
// installations that outgrow one machine; SqliteStore stays the embedded default. Same contract
// as SqliteStore (store.h), checked by the same conformance tests.
//
// Opened with a libpq connection string, normally `postgres://user@host:port/db`. The password
// comes from PGPASSFILE (libpq's ~/.pgpass rules) or the URL; every message that names the
// database shows it through RedactDatabaseUrl, so no password reaches a log, status or error.
//
// Schema: versioned migrations (internal/postgres_schema.cc), each applied in a transaction of
// its own and recorded in schema_migrations; Open migrates under a transaction-level advisory
// lock, so replicas starting at once migrate once.
//
// Revisions: every object write (Apply, UpdateStatus, UpdateControllerMetadata, Delete,
// PostWakeHint) is one
// transaction that first locks the single row of the `revision` table (SELECT … FOR UPDATE), so
// object writes from every process serialise, revisions are gap-free and committed in order, and
// the change log holds exactly the revisions (compacted, current] as in SqliteStore. Events,
// inventory, leases, task logs and artifacts bump no revision and do not take that lock (task
// log appends and artifact puts of one task serialise on an advisory lock of the task's uid).
//
// Watch: WatchSince reads the change log (the same kOutOfRange after compaction). Every write
// transaction also sends NOTIFY sbx_store; WaitForChange LISTENs on a second connection (opened
// on first use) and wakes on any commit of any process, falling back to the poll interval.
//
// Thread-safety: one query connection guarded by mu_ and one listening connection guarded by
// listen_mu_; every method may be called from any thread, and any number of PostgresStore
// instances (in any number of processes or machines) may share a database. Connections broken
// between transactions are re-established on the next call. Ownership: the store owns its
// connections; the optional Clock must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "controller/base/clock.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/internal/sql_store.h"
#include "controller/store/store.h"

namespace sbx::controller {

namespace store_internal {
class PgConnection;
class PgRow;
}  // namespace store_internal

struct PostgresStoreOptions {
  // Longest single sleep of WaitForChange between checks of the listening connection.
  std::chrono::milliseconds poll_interval{100};
  // Source of timestamps and lease expiry; SystemClock when null. Not owned.
  Clock* clock = nullptr;
  // As SqliteStoreOptions: RecordEvent keeps at most this many events per involved object
  // (0 = unbounded), AppendTaskLog at most this much text per AgentTask.
  int max_events_per_object = 100;
  int64_t task_log_max_bytes = int64_t{1} << 20;
};

// True for the connection strings PostgresStore takes: postgres:// and postgresql:// URLs.
bool IsPostgresUrl(std::string_view db);
// `url` with its password replaced by "***" (URL userinfo, `password=` parameters); safe to log.
std::string RedactDatabaseUrl(std::string_view url);

class PostgresStore final : public store_internal::SqlStore<PostgresStore> {
 public:
  using Options = PostgresStoreOptions;

  // Connects to `url` and migrates the schema. kUnavailable if the server cannot be reached,
  // kUnauthenticated if it refuses the login, kFailedPrecondition if the database has a schema
  // newer than this build or tables but no sbx schema. Messages name the redacted URL only.
  static StatusOr<std::unique_ptr<PostgresStore>> Open(const std::string& url,
                                                       Options options = {});

  ~PostgresStore() override;
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  static int LatestSchemaVersion();
  // The URL with its password redacted.
  const std::string& redacted_url() const { return redacted_url_; }

  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) override;
  StatusOr<int64_t> CurrentRevision() override;
  bool WaitForChange(std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> CompactChanges(int64_t revision) override;

  // postgres_store_copy.cc. ExportTo reads in one REPEATABLE READ, READ ONLY transaction (one
  // snapshot); ImportFrom writes in one transaction holding the revision row's lock.
  Status ExportTo(StoreSink& sink) override;
  Status ImportFrom(const std::function<Status(StoreSink&)>& fill) override;

  // As SqliteStore::Stats.
  struct Stats {
    int64_t revision = 0;
    int64_t compacted_revision = 0;
    int64_t changes = 0;
    int64_t events = 0;
  };
  StatusOr<Stats> ReadStats();

 private:
  // The SQL written once for both stores (internal/): it reaches the mutex, Query and its rows,
  // and the dialect below (placeholders $1, $2, …).
  friend class store_internal::StoreCopier<PostgresStore>;
  friend class store_internal::UsageLedger<PostgresStore>;
  friend class store_internal::TaskSlots<PostgresStore>;
  friend class store_internal::ObjectWrites<PostgresStore>;
  friend class store_internal::AuditLog<PostgresStore>;
  friend class store_internal::NotificationOutbox<PostgresStore>;
  friend class store_internal::SqlRecords<PostgresStore>;
  friend class store_internal::SqlStore<PostgresStore>;
  using CopyRow = store_internal::PgRow;
  class Txn;  // internal/postgres_rows.h
  // The dialect (internal/sql_store.h). COLLATE "C": byte order, as SQLite sorts, whatever the
  // database's collation. md5(message): a unique index entry has a size limit, a message not.
  static constexpr char kParam = '$';
  static constexpr std::string_view kByteOrder = " COLLATE \"C\"";
  static constexpr std::string_view kEventKey =
      "(kind, namespace, name, type, reason, md5(message))";
  static std::string StartsWith(std::string_view column, std::string_view param) {
    return "starts_with(" + std::string(column) + ", " + std::string(param) + ")";
  }

  PostgresStore(std::string redacted_url, std::string url, Options options,
                std::unique_ptr<store_internal::PgConnection> conn);

  // All below require mu_ held.
  Status Migrate();
  // Locks the revision row for this transaction and returns its value.
  StatusOr<int64_t> LockRevision();
  StatusOr<int64_t> ReadCompactedRevision();
  // Runs `sql` with `params` as $1, $2, … and calls `each_row` (when not null) on each row,
  // stopping at its first error; `changed` (when not null) gets the rows it changed.
  Status Query(std::string_view sql, const std::vector<store_internal::SqlParam>& params,
               const std::function<Status(const store_internal::PgRow&)>& each_row,
               int64_t* changed = nullptr);
  // NOTIFY the listeners of WaitForChange (delivered at commit).
  Status Notify();
  // After an object write's commit: the NOTIFY went with it.
  static void Committed() {}
  // Serializes the writers of `key` (any process) until the commit: pg_advisory_xact_lock.
  Status LockKey(const std::string& key);
  // Orders this write after the object writes in flight: the revision row's lock.
  Status LockWrites() { return LockRevision().status(); }
  const std::string& database() const { return redacted_url_; }
  std::string Now() const;
  std::string NewUid();

  // Requires listen_mu_ held: opens the listening connection if needed, then drains it.
  StatusOr<int> DrainListenerLocked();

  const std::string redacted_url_;
  const std::string url_;  // with the password, if any: only ever passed to libpq
  const Options options_;
  SystemClock system_clock_;
  Clock& clock_;

  std::mutex mu_;
  std::unique_ptr<store_internal::PgConnection> conn_;  // Guarded by mu_.
  std::mt19937_64 uid_random_;                          // Guarded by mu_.

  std::mutex listen_mu_;
  std::unique_ptr<store_internal::PgConnection> listener_;  // Guarded by listen_mu_.
};

}  // namespace sbx::controller
