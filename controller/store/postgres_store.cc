// PostgresStore: connecting and migrating, the plumbing every operation uses (the revision row,
// object rows, the change log), the object operations and the watch, and the dialect of
// internal/sql_store.h (Query, LockKey, Notify). Events, inventory, leases, task logs, artifacts
// and the other records are written once for both stores in internal/sql_store_records.cc.
#include "controller/store/postgres_store.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <type_traits>
#include <utility>

#include "api/codec.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/object_writes.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/postgres_schema.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/store_rows.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using store_internal::DataLossError;
using store_internal::kObjectColumns;
using store_internal::NullIfEmpty;
using store_internal::P;
using store_internal::PgConnection;
using store_internal::PgResult;
using store_internal::PgRow;
using store_internal::PgTxn;
using store_internal::ReadRowColumns;
using Writes = store_internal::ObjectWrites<PostgresStore>;

namespace {

const int kLatestSchemaVersion = static_cast<int>(store_internal::PostgresMigrations().size());

// The NOTIFY channel WaitForChange listens on.
constexpr std::string_view kChannel = "sbx_store";

// Any key: serialises concurrent migrations (pg_advisory_xact_lock).
constexpr int64_t kMigrationLockKey = 0x5b78'0017;

}  // namespace

bool IsPostgresUrl(std::string_view db) {
  return db.starts_with("postgres://") || db.starts_with("postgresql://");
}

std::string RedactDatabaseUrl(std::string_view url) {
  return store_internal::RedactDatabaseUrl(url);
}

// ---- opening ----------------------------------------------------------------------------------

PostgresStore::PostgresStore(std::string redacted_url, std::string url, Options options,
                             std::unique_ptr<PgConnection> conn)
    : redacted_url_(std::move(redacted_url)),
      url_(std::move(url)),
      options_(options),
      clock_(options.clock != nullptr ? *options.clock : system_clock_),
      conn_(std::move(conn)) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(),
                     device(), device(), device(), device()};
  uid_random_.seed(seed);
}

PostgresStore::~PostgresStore() = default;

int PostgresStore::LatestSchemaVersion() { return kLatestSchemaVersion; }

StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& url,
                                                             Options options) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Connect(url));
  std::string redacted = conn->redacted_url();
  std::unique_ptr<PostgresStore> store(
      new PostgresStore(std::move(redacted), url, options, std::move(conn)));
  std::lock_guard lock(store->mu_);
  RETURN_IF_ERROR(store->Migrate());
  return store;
}

Status PostgresStore::Migrate() {
  PgConnection& c = *conn_;
  auto too_new = [&](int64_t version) {
    return api::FailedPreconditionError("database " + redacted_url_ + " has schema version " +
                                        std::to_string(version) +
                                        ", newer than this sbx understands (" +
                                        std::to_string(kLatestSchemaVersion) + "); upgrade sbx");
  };
  for (;;) {
    PgTxn txn(c);
    RETURN_IF_ERROR(txn.Begin());
    RETURN_IF_ERROR(c.Exec("SELECT pg_advisory_xact_lock($1)", {P(kMigrationLockKey)}).status());
    ASSIGN_OR_RETURN(PgResult has_table,
                     c.Exec("SELECT to_regclass('schema_migrations') IS NOT NULL"));
    int64_t version = 0;
    if (has_table.Text(0, 0) == "t") {
      ASSIGN_OR_RETURN(PgResult v, c.Exec("SELECT coalesce(max(version), 0) FROM "
                                          "schema_migrations"));
      version = v.Int(0, 0);
    } else {
      ASSIGN_OR_RETURN(PgResult tables,
                       c.Exec("SELECT count(*) FROM information_schema.tables WHERE "
                              "table_schema = current_schema()"));
      if (tables.Int(0, 0) > 0) {
        return api::FailedPreconditionError(
            "database " + redacted_url_ +
            " is a PostgreSQL database but not an sbx one (it has tables and no "
            "schema_migrations)");
      }
      RETURN_IF_ERROR(c.Exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                             "applied_at TEXT NOT NULL)")
                          .status());
    }
    if (version > kLatestSchemaVersion) {
      return too_new(version);
    }
    if (version == kLatestSchemaVersion) {
      return txn.Commit();
    }
    // One migration per transaction: a failure leaves the schema at the last complete version.
    RETURN_IF_ERROR(c.Exec(store_internal::PostgresMigrations()[version]).status());
    RETURN_IF_ERROR(c.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                           {P(version + 1), P(Now())})
                        .status());
    RETURN_IF_ERROR(txn.Commit());
  }
}

// ---- plumbing ---------------------------------------------------------------------------------

std::string PostgresStore::Now() const { return FormatRfc3339(clock_.Now()); }

std::string PostgresStore::NewUid() { return store_internal::MakeUuidV4(uid_random_); }

StatusOr<int64_t> PostgresStore::LockRevision() {
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT value FROM revision WHERE id = 1 FOR UPDATE"));
  if (r.Rows() != 1) {
    return DataLossError("database " + redacted_url_ + " has no revision row");
  }
  return r.Int(0, 0);
}

Status PostgresStore::Notify() { return conn_->Exec("NOTIFY " + std::string(kChannel)).status(); }

store_internal::PgParam store_internal::ToPgParam(const SqlParam& param) {
  switch (param.type) {
    case SqlParam::Type::kNull:
      return Null();
    case SqlParam::Type::kText:
      return P(param.value);
    case SqlParam::Type::kInt:
      return P(param.number);
    case SqlParam::Type::kBytes:
    case SqlParam::Type::kBlob:
      return store_internal::Bytes(param.value);
  }
  return Null();
}

Status PostgresStore::LockKey(const std::string& key) {
  return conn_->Exec("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", {P(key)}).status();
}

// ---- watch ------------------------------------------------------------------------------------

StatusOr<std::vector<Store::Change>> PostgresStore::WatchSince(int64_t since, int limit) {
  std::vector<Change> out;
  since = std::max<int64_t>(since, 0);
  if (limit <= 0) {
    return out;
  }
  // Drain the listener before reading: whatever commits after this point leaves a notification
  // for WaitForChange. Only an optimisation (fewer spurious wake-ups), so skipped while another
  // thread waits on the listener rather than waiting for it.
  if (std::unique_lock listen_lock(listen_mu_, std::try_to_lock); listen_lock.owns_lock()) {
    (void)DrainListenerLocked();
  }
  std::lock_guard lock(mu_);
  // The revision first, then the rows, each statement with its own snapshot (READ COMMITTED):
  // every revision up to `current` was committed before the second snapshot, so a revision
  // since + 1 <= current missing from the rows was compacted (as in SqliteStore::WatchSince).
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(PgResult r,
                   conn_->Exec("SELECT revision, type, kind, namespace, name, object, wake_hint "
                               "FROM changes WHERE revision > $1 ORDER BY revision "
                               "LIMIT $2",
                               {P(since), P(int64_t{limit})}));
  for (int i = 0; i < r.Rows(); ++i) {
    ASSIGN_OR_RETURN(Change change, store_internal::ReadChangeColumns(redacted_url_, PgRow(r, i)));
    out.push_back(std::move(change));
  }
  const bool gap = out.empty() ? since < current : out.front().revision != since + 1;
  if (gap) {
    ASSIGN_OR_RETURN(const int64_t compacted, ReadCompactedRevision());
    return Status(
        api::StatusCode::kOutOfRange,
        "database " + redacted_url_ + ": cannot watch from revision " + std::to_string(since) +
            ": resourceVersion too old, the change log was compacted up to revision " +
            std::to_string(compacted) + "; list again and watch from the revision read before");
  }
  return out;
}

StatusOr<int64_t> PostgresStore::ReadCompactedRevision() {
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT min(revision) FROM changes"));
  if (r.Rows() == 0 || r.IsNull(0, 0)) {
    return current;
  }
  return r.Int(0, 0) - 1;
}

StatusOr<int64_t> PostgresStore::CompactChanges(int64_t revision) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("DELETE FROM changes WHERE revision <= $1",
                                           {P(std::min(revision, current))}));
  RETURN_IF_ERROR(txn.Commit());
  return r.Affected();
}

StatusOr<int64_t> PostgresStore::CurrentRevision() {
  std::lock_guard lock(mu_);
  return ReadRevision();
}

StatusOr<int> PostgresStore::DrainListenerLocked() {
  if (listener_ == nullptr) {
    ASSIGN_OR_RETURN(listener_, PgConnection::Connect(url_));
    auto listening = listener_->Exec("LISTEN " + std::string(kChannel));
    if (!listening.ok()) {
      listener_.reset();
      return listening.status();
    }
    return 0;
  }
  auto drained = listener_->DrainNotifications();
  if (!drained.ok()) {
    listener_.reset();  // reconnect (and LISTEN again) on the next call
  }
  return drained;
}

bool PostgresStore::WaitForChange(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::lock_guard lock(listen_mu_);
  for (;;) {
    auto drained = DrainListenerLocked();
    if (!drained.ok()) {
      // Notifications may have been lost with the connection: let the caller read (and see any
      // error there), which costs one read of the change log.
      return true;
    }
    if (*drained > 0) {
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    const auto slice =
        std::min<std::chrono::steady_clock::duration>(options_.poll_interval, deadline - now);
    pollfd fd{listener_->Socket(), POLLIN, 0};
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(slice).count();
    (void)::poll(&fd, 1, static_cast<int>(std::max<int64_t>(ms, 1)));
  }
}

// ---- statistics -------------------------------------------------------------------------------

StatusOr<PostgresStore::Stats> PostgresStore::ReadStats() {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.BeginRead());  // one snapshot, so the numbers belong together
  Stats stats;
  ASSIGN_OR_RETURN(stats.revision, ReadRevision());
  ASSIGN_OR_RETURN(stats.compacted_revision, ReadCompactedRevision());
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT (SELECT count(*) FROM changes), "
                                           "(SELECT count(*) FROM events)"));
  stats.changes = r.Int(0, 0);
  stats.events = r.Int(0, 0 + 1);
  RETURN_IF_ERROR(txn.Commit());
  return stats;
}

}  // namespace sbx::controller
