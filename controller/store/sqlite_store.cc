// SqliteStore: opening the file (private modes, configuration, schema migration), the SQLite
// plumbing every other part uses (statements, errors, the revision row), and the statistics.
// Objects, watch, events, inventory and leases live in sqlite_store_*.cc.
#include "controller/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"

namespace sbx::controller {

using api::OkStatus;
using store_internal::DataLossError;

namespace {

const int kLatestSchemaVersion = static_cast<int>(store_internal::SqliteMigrations().size());

}  // namespace

// ---- opening ----------------------------------------------------------------------------------

SqliteStore::SqliteStore(std::string path, Options options, sqlite3* db)
    : path_(std::move(path)),
      options_(options),
      clock_(options.clock != nullptr ? *options.clock : system_clock_),
      db_(db) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(),
                     device(), device(), device(), device()};
  uid_random_.seed(seed);
}

SqliteStore::~SqliteStore() {
  std::lock_guard lock(mu_);
  for (auto& [sql, stmt] : statements_) {
    sqlite3_finalize(stmt);
  }
  statements_.clear();
  sqlite3_close_v2(db_);
}

int SqliteStore::LatestSchemaVersion() { return kLatestSchemaVersion; }

namespace {

// Creates `dir` and its missing ancestors with mode 0700: the store holds workspace hosts,
// secret references, setup output and events, for its owner only. A directory that already
// exists keeps its mode: an operator may have widened it on purpose.
Status CreatePrivateDirectories(const std::filesystem::path& dir, const std::string& db) {
  struct stat st {};
  if (dir.empty() || ::stat(dir.c_str(), &st) == 0) {
    return OkStatus();
  }
  const std::filesystem::path parent = dir.parent_path();
  if (parent != dir) {
    RETURN_IF_ERROR(CreatePrivateDirectories(parent, db));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    const int error = errno;
    return api::FailedPreconditionError("cannot create directory " + dir.string() +
                                        " for database " + db + ": " + std::strerror(error));
  }
  return OkStatus();
}

// Creates the database file with mode 0600 unless it exists; an existing file keeps its mode.
// SQLite gives the -wal and -shm files the mode of the database file, so they are 0600 too.
// O_EXCL rather than a umask around sqlite3_open: the umask is process-wide and other threads
// create files. Errors are left to sqlite3_open_v2, which reports them in its own words.
void CreatePrivateFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
  }
}

}  // namespace

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, Options options) {
  if (path != ":memory:" && !path.empty()) {
    RETURN_IF_ERROR(CreatePrivateDirectories(std::filesystem::path(path).parent_path(), path));
    CreatePrivateFile(path);
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return api::FailedPreconditionError("cannot open database " + path + ": " + message +
                                        " (does its directory exist and is it writable?)");
  }
  // The constructor is private, so no make_unique.
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, options, db));
  std::lock_guard lock(store->mu_);
  // Two processes opening a brand-new file at once (sbxd starting while sbxctl applies) can
  // meet SQLITE_BUSY where SQLite does not call the busy handler (the journal-mode switch,
  // schema creation): retry the set-up until the busy timeout has really passed.
  const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
  for (;;) {
    Status status = store->Configure();
    if (status.ok()) {
      status = store->Migrate();
    }
    if (status.ok()) {
      return store;
    }
    if (status.code() != api::StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= deadline) {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

Status SqliteStore::Configure() {
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(options_.busy_timeout.count()));
  // The first statement reads the file header: a non-database file fails here.
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode = WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous = NORMAL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys = ON"));
  return OkStatus();
}

Status SqliteStore::Migrate() {
  auto read_version = [&]() -> StatusOr<int64_t> {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("PRAGMA user_version"));
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    return row ? stmt.Int(0) : 0;
  };
  auto too_new = [&](int64_t version) {
    return api::FailedPreconditionError("database " + path_ + " has schema version " +
                                        std::to_string(version) +
                                        ", newer than this sbx understands (" +
                                        std::to_string(kLatestSchemaVersion) + "); upgrade sbx");
  };
  // Read first without the write lock: the usual case is an up-to-date schema, and Open must
  // not wait for a busy writer then.
  ASSIGN_OR_RETURN(int64_t version, read_version());
  if (version > kLatestSchemaVersion) {
    return too_new(version);
  }
  if (version == kLatestSchemaVersion) {
    return OkStatus();
  }

  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(version, read_version());  // another process may have migrated meanwhile
  if (version > kLatestSchemaVersion) {
    return too_new(version);
  }
  if (version == kLatestSchemaVersion) {
    return OkStatus();
  }
  if (version == 0) {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE "
                                        "'sqlite_%'"));
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row && stmt.Int(0) > 0) {
      return api::FailedPreconditionError(path_ +
                                          " is an SQLite database but not an sbx one (it has "
                                          "tables and no sbx schema version)");
    }
  }
  const std::string now = Now();
  for (int64_t v = version; v < kLatestSchemaVersion; ++v) {
    RETURN_IF_ERROR(Exec(store_internal::SqliteMigrations()[v]));
    ASSIGN_OR_RETURN(Stmt stmt,
                     Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
    RETURN_IF_ERROR(stmt.Bind(1, v + 1).Bind(2, now).Run());
  }
  RETURN_IF_ERROR(Exec("PRAGMA user_version = " + std::to_string(kLatestSchemaVersion)));
  return txn.Commit();
}

Status SqliteStore::CheckIsSbxFile(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::string why;
  if (rc == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db,
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                            "name = 'schema_migrations'",
                            -1, &stmt, nullptr);
    if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      if (sqlite3_column_int(stmt, 0) != 1) {
        why = "it holds no sbx schema";
      }
    } else {
      why = sqlite3_errmsg(db);
    }
    sqlite3_finalize(stmt);
  } else {
    why = db != nullptr ? sqlite3_errmsg(db) : "cannot open it";
  }
  sqlite3_close(db);
  if (!why.empty()) {
    return api::FailedPreconditionError(path + " is not an sbx database (" + why + ")");
  }
  return OkStatus();
}

// ---- SQLite plumbing --------------------------------------------------------------------------

StatusOr<SqliteStore::Stmt> SqliteStore::Prepare(std::string_view sql) {
  std::string key(sql);
  auto it = statements_.find(key);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return Error(rc, store_internal::Describe(sql));
    }
    it = statements_.emplace(std::move(key), stmt).first;
  }
  return Stmt(this, it->second);
}

Status SqliteStore::Exec(std::string_view sql) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return Error(rc, store_internal::Describe(sql));
  }
  return OkStatus();
}

Status SqliteStore::Error(int rc, std::string_view what) const {
  const std::string detail = sqlite3_errmsg(db_);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return api::UnavailableError("database " + path_ + " is locked by another writer (" + detail +
                                   ", SQLite code " + std::to_string(rc) + "; busy timeout " +
                                   std::to_string(options_.busy_timeout.count()) + " ms)");
    case SQLITE_CORRUPT:
      return DataLossError("database " + path_ + " is corrupt (" + detail +
                           "); restore it from a backup or move it away");
    case SQLITE_NOTADB:
      return api::FailedPreconditionError(path_ + " is not an sbx database (" + detail + ")");
    case SQLITE_CANTOPEN:
      return api::FailedPreconditionError("cannot open database " + path_ + ": " + detail);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return api::PermissionDeniedError("database " + path_ + " is not writable: " + detail);
    case SQLITE_FULL:
      return api::ResourceExhaustedError("database " + path_ + ": disk full (" + detail + ")");
    default:
      return api::InternalError("database " + path_ + ": " + std::string(what) + ": " + detail);
  }
}

StatusOr<int64_t> SqliteStore::DataVersion() {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("PRAGMA data_version"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int(0) : 0;
}

std::string SqliteStore::Now() const { return FormatRfc3339(clock_.Now()); }

std::string SqliteStore::NewUid() { return store_internal::MakeUuidV4(uid_random_); }

// ---- statistics -------------------------------------------------------------------------------

StatusOr<SqliteStore::Stats> SqliteStore::ReadStats() {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.BeginRead());  // one snapshot, so the numbers belong together
  Stats stats;
  ASSIGN_OR_RETURN(stats.revision, ReadRevision());
  ASSIGN_OR_RETURN(stats.compacted_revision, ReadCompactedRevision());
  for (auto [table, field] :
       {std::pair{"changes", &Stats::changes}, std::pair{"events", &Stats::events}}) {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare(std::string("SELECT count(*) FROM ") + table));
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    stats.*field = row ? stmt.Int(0) : 0;
  }
  RETURN_IF_ERROR(txn.Commit());
  return stats;
}

Status SqliteStore::Checkpoint() {
  std::lock_guard lock(mu_);
  int wal_frames = 0;
  int checkpointed = 0;
  const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &wal_frames,
                                           &checkpointed);
  if (rc != SQLITE_OK) {
    return Error(rc, "wal_checkpoint(TRUNCATE)");
  }
  return OkStatus();
}

}  // namespace sbx::controller
