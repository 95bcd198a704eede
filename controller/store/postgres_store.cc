// PostgresStore: connecting and migrating, the plumbing every operation uses (the revision row,
// object rows, the change log), the object operations and the watch. Events, inventory, leases,
// task logs and artifacts are in postgres_store_records.cc.
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
using store_internal::RowParams;
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

StatusOr<int64_t> PostgresStore::ReadRevision() {
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT value FROM revision WHERE id = 1"));
  if (r.Rows() != 1) {
    return DataLossError("database " + redacted_url_ + " has no revision row");
  }
  return r.Int(0, 0);
}

Status PostgresStore::WriteRevision(int64_t revision) {
  return conn_->Exec("UPDATE revision SET value = $1 WHERE id = 1", {P(revision)}).status();
}

Status PostgresStore::Notify() { return conn_->Exec("NOTIFY " + std::string(kChannel)).status(); }

std::vector<store_internal::PgParam> store_internal::RowParams(
    const store_internal::ObjectRow& row) {
  return {P(KindName(row.key.kind)),
          P(row.key.namespace_),
          P(row.key.name),
          P(row.uid),
          P(row.generation),
          P(row.resource_version),
          P(row.spec),
          P(row.status),
          P(row.labels),
          P(row.annotations),
          P(row.owner_references),
          P(row.finalizers),
          NullIfEmpty(row.deletion_timestamp),
          NullIfEmpty(row.applyset),
          P(row.creation_timestamp),
          P(row.update_timestamp),
          P(int64_t{row.finished ? 1 : 0})};
}

namespace {

std::vector<store_internal::PgParam> KeyParams(const ObjectKey& key) {
  return {P(KindName(key.kind)), P(key.namespace_), P(key.name)};
}

}  // namespace

StatusOr<std::optional<PostgresStore::Row>> PostgresStore::ReadRow(const ObjectKey& key) {
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec("SELECT " + std::string(kObjectColumns) +
                                               " FROM objects WHERE kind = $1 AND namespace = $2 "
                                               "AND name = $3",
                                           KeyParams(key)));
  if (r.Rows() == 0) {
    return std::optional<Row>();
  }
  ASSIGN_OR_RETURN(Row row, ReadRowColumns(redacted_url_, PgRow(r, 0)));
  return std::optional<Row>(std::move(row));
}

StatusOr<Object> PostgresStore::RowToObject(const Row& row) const {
  return store_internal::RowToObject(redacted_url_, row);
}

Status PostgresStore::InsertRow(const Row& row) {
  return conn_
      ->Exec("INSERT INTO objects (" + std::string(kObjectColumns) +
                 ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, "
                 "$17)",
             RowParams(row))
      .status();
}

Status PostgresStore::UpdateRow(const Row& row) {
  return conn_
      ->Exec(
          "UPDATE objects SET uid = $4, generation = $5, resource_version = $6, spec = $7, "
          "status = $8, labels = $9, annotations = $10, owner_references = $11, "
          "finalizers = $12, deletion_timestamp = $13, applyset = $14, "
          "creation_timestamp = $15, update_timestamp = $16, finished = $17 "
          "WHERE kind = $1 AND namespace = $2 AND name = $3",
          RowParams(row))
      .status();
}

Status PostgresStore::DeleteRow(const ObjectKey& key) {
  // What is kept beside an object goes with it (an AgentTask's log and artifacts).
  for (std::string_view table : {"task_log", "task_log_heads", "artifacts"}) {
    RETURN_IF_ERROR(conn_
                        ->Exec("DELETE FROM " + std::string(table) +
                                   " WHERE task_uid IN (SELECT uid FROM objects WHERE kind = $1 "
                                   "AND namespace = $2 AND name = $3)",
                               KeyParams(key))
                        .status());
  }
  return conn_
      ->Exec("DELETE FROM objects WHERE kind = $1 AND namespace = $2 AND name = $3", KeyParams(key))
      .status();
}

Status PostgresStore::AppendChange(int64_t revision, ChangeType type, const ObjectKey& key,
                                   const Row* row, bool wake_hint) {
  return conn_
      ->Exec(
          "INSERT INTO changes (revision, type, kind, namespace, name, object, wake_hint) VALUES "
          "($1, $2, $3, $4, $5, $6, $7)",
          {P(revision), P(store_internal::ChangeTypeName(type)), P(KindName(key.kind)),
           P(key.namespace_), P(key.name),
           row != nullptr ? P(store_internal::EncodeChangeObject(*row)) : store_internal::Null(),
           P(int64_t{wake_hint ? 1 : 0})})
      .status();
}

// ---- objects ----------------------------------------------------------------------------------
// What each write does to the rows is internal/object_writes.h, shared with SqliteStore; here
// is only the transaction: LockRevision at the start, PostgreSQL's stand-in for SQLite's BEGIN
// IMMEDIATE, and NOTIFY before the commit.

StatusOr<std::vector<ApplyResult>> PostgresStore::Apply(const std::vector<Object>& objects,
                                                        const ApplyOptions& options) {
  StatusOr<std::vector<ApplyResult>> results = ApplyInTransaction(objects, options);
  store_internal::AuditFailedApply(*this, objects, options, results.status());
  return results;
}

StatusOr<std::vector<ApplyResult>> PostgresStore::ApplyInTransaction(
    const std::vector<Object>& objects, const ApplyOptions& options) {
  ASSIGN_OR_RETURN(store_internal::ApplyPlan plan, store_internal::PlanApply(objects, options));
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, LockRevision());
  int64_t revision = start;
  ASSIGN_OR_RETURN(std::vector<ApplyResult> results,
                   Writes::Apply(*this, redacted_url_, plan, options, revision));
  if (options.dry_run) {
    txn.Rollback();
    return results;
  }
  if (revision != start) {
    RETURN_IF_ERROR(WriteRevision(revision));
    RETURN_IF_ERROR(Notify());
  }
  RETURN_IF_ERROR(txn.Commit());
  return results;
}

StatusOr<Object> PostgresStore::Get(const ObjectKey& key) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  return RowToObject(*row);
}

StatusOr<std::vector<Object>> PostgresStore::List(const ListOptions& options) {
  std::string sql = "SELECT " + std::string(kObjectColumns) + " FROM objects WHERE TRUE";
  std::vector<store_internal::PgParam> params;
  if (options.kind) {
    params.push_back(P(KindName(*options.kind)));
    sql += " AND kind = $1";
  }
  if (options.namespace_) {
    params.push_back(P(*options.namespace_));
    sql += " AND namespace = $" + std::to_string(params.size());
  }
  if (options.unfinished_only) {
    sql += " AND finished = 0";  // the partial index objects_unfinished
  }
  std::vector<Object> out;
  {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(PgResult r, conn_->Exec(sql, params));
    for (int i = 0; i < r.Rows(); ++i) {
      ASSIGN_OR_RETURN(Row row, ReadRowColumns(redacted_url_, PgRow(r, i)));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      if (api::MatchesLabels(object, options.label_selector)) {
        out.push_back(std::move(object));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

// Runs `write(revision)` in one object write transaction, then stores the revisions it took,
// commits and wakes the watchers; when it took none, nothing is written (the transaction rolls
// back).
template <typename Write>
auto PostgresStore::ObjectWrite(Write write) -> std::invoke_result_t<Write, int64_t&> {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, LockRevision());
  int64_t revision = start;
  auto result = write(revision);
  if (!result.ok() || revision == start) {
    return result;
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(Notify());
  RETURN_IF_ERROR(txn.Commit());
  return result;
}

StatusOr<Object> PostgresStore::UpdateStatus(const Object& object) {
  std::string status = api::EncodeStatusJson(object);
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::UpdateStatus(*this, redacted_url_, object, std::move(status),
                                                 revision);
                   }));
  return RowToObject(row);
}

StatusOr<Object> PostgresStore::UpdateControllerMetadata(const Object& object) {
  std::string finalizers = store_internal::FinalizersToJson(object.metadata.finalizers);
  std::string owners = store_internal::OwnersToJson(object.metadata.owner_references);
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::UpdateControllerMetadata(*this, object, std::move(finalizers),
                                                             std::move(owners), revision);
                   }));
  return RowToObject(row);
}

StatusOr<Object> PostgresStore::PostWakeHint(const ObjectKey& key) {
  ASSIGN_OR_RETURN(Row row, ObjectWrite([&](int64_t& revision) {
                     return Writes::WakeHint(*this, key, revision);
                   }));
  return RowToObject(row);
}

StatusOr<DeleteOutcome> PostgresStore::Delete(const ObjectKey& key, const DeleteOptions& options) {
  StatusOr<DeleteOutcome> outcome = ObjectWrite(
      [&](int64_t& revision) { return Writes::Delete(*this, key, options.audit, revision); });
  store_internal::AuditFailedWrite(*this, options.audit, {key}, outcome.status());
  return outcome;
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
  RETURN_IF_ERROR(txn.Begin());
  // One snapshot, so the numbers belong together.
  RETURN_IF_ERROR(conn_->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status());
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
