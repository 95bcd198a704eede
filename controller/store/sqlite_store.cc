#include "controller/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>

#include "api/codec.h"

namespace sbx::controller {

using api::OkStatus;

namespace {

using json = nlohmann::json;
using api::Kind;
using api::KindName;
using api::StatusCode;

// Schema migrations: entry i takes the schema from version i to i + 1. Append only; never edit
// an entry that has shipped. All pending entries run in one transaction.
constexpr std::string_view kMigrations[] = {
    R"sql(
CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY,
  applied_at TEXT NOT NULL
);
-- The global revision: bumped once per object write; resourceVersion = revision of last write.
CREATE TABLE revision (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  value INTEGER NOT NULL
);
INSERT INTO revision (id, value) VALUES (1, 0);
CREATE TABLE objects (
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL UNIQUE,
  generation INTEGER NOT NULL,
  resource_version INTEGER NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL,
  labels TEXT NOT NULL,
  annotations TEXT NOT NULL,
  owner_references TEXT NOT NULL,
  finalizers TEXT NOT NULL,
  deletion_timestamp TEXT,
  applyset TEXT,
  creation_timestamp TEXT NOT NULL,
  update_timestamp TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX objects_by_applyset ON objects (applyset) WHERE applyset IS NOT NULL;
-- The watch log: one row per object write; object is NULL for a deletion.
CREATE TABLE changes (
  revision INTEGER PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  object TEXT
);
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  reason TEXT NOT NULL,
  message TEXT NOT NULL,
  count INTEGER NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL,
  UNIQUE (kind, namespace, name, type, reason, message)
);
CREATE TABLE inventory (
  workspace TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  external_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'live', 'deleting')),
  owner_kind TEXT NOT NULL,
  owner_namespace TEXT NOT NULL,
  owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (workspace, resource_type, external_id)
);
CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  renewed_at TEXT NOT NULL
);
)sql",
    // 2: inventory state 'abandoned' (a resource sbx gave up deleting, kept as a record for the
    // operator). SQLite cannot change a CHECK constraint in place: copy the table.
    R"sql(
CREATE TABLE inventory_v2 (
  workspace TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  external_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'live', 'deleting', 'abandoned')),
  owner_kind TEXT NOT NULL,
  owner_namespace TEXT NOT NULL,
  owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (workspace, resource_type, external_id)
);
INSERT INTO inventory_v2 SELECT workspace, resource_type, external_id, state, owner_kind,
  owner_namespace, owner_name, owner_uid, created_at, updated_at FROM inventory;
DROP TABLE inventory;
ALTER TABLE inventory_v2 RENAME TO inventory;
)sql",
    // 3: the AgentTask log and collected artifacts, keyed by the task's uid and deleted with its
    // row (DeleteRow). Both bounded: the log by Options::task_log_max_bytes per task, the
    // artifacts by kMaxTaskArtifactBytes per task.
    R"sql(
CREATE TABLE task_log_heads (
  task_uid TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  dropped INTEGER NOT NULL
);
CREATE TABLE task_log (
  task_uid TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  item_id TEXT NOT NULL,
  text TEXT NOT NULL,
  exit_code INTEGER,
  at TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (task_uid, seq)
);
CREATE TABLE artifacts (
  task_uid TEXT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  content BLOB NOT NULL,
  PRIMARY KEY (task_uid, path)
);
)sql",
};
constexpr int kLatestSchemaVersion = static_cast<int>(std::size(kMigrations));

// Columns of `objects` in the order Row is read.
constexpr std::string_view kObjectColumns =
    "kind, namespace, name, uid, generation, resource_version, spec, status, labels, "
    "annotations, owner_references, finalizers, deletion_timestamp, applyset, "
    "creation_timestamp, update_timestamp";

Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }

std::string_view ChangeTypeName(Store::ChangeType type) {
  switch (type) {
    case Store::ChangeType::kAdded:
      return "ADDED";
    case Store::ChangeType::kModified:
      return "MODIFIED";
    case Store::ChangeType::kDeleted:
      return "DELETED";
  }
  return "MODIFIED";
}

std::optional<Store::ChangeType> ParseChangeType(std::string_view text) {
  if (text == "ADDED") {
    return Store::ChangeType::kAdded;
  }
  if (text == "MODIFIED") {
    return Store::ChangeType::kModified;
  }
  if (text == "DELETED") {
    return Store::ChangeType::kDeleted;
  }
  return std::nullopt;
}

std::string_view InventoryStateName(Store::InventoryState state) {
  switch (state) {
    case Store::InventoryState::kIntent:
      return "intent";
    case Store::InventoryState::kLive:
      return "live";
    case Store::InventoryState::kDeleting:
      return "deleting";
    case Store::InventoryState::kAbandoned:
      return "abandoned";
  }
  return "intent";
}

std::optional<Store::InventoryState> ParseInventoryState(std::string_view text) {
  if (text == "intent") {
    return Store::InventoryState::kIntent;
  }
  if (text == "live") {
    return Store::InventoryState::kLive;
  }
  if (text == "deleting") {
    return Store::InventoryState::kDeleting;
  }
  if (text == "abandoned") {
    return Store::InventoryState::kAbandoned;
  }
  return std::nullopt;
}

// Canonical JSON of the metadata the store keeps as JSON columns. std::map and nlohmann's
// object are both sorted, so equal values give equal text and can be compared as strings.
std::string MapToJson(const std::map<std::string, std::string>& map) { return json(map).dump(); }

std::string FinalizersToJson(const std::vector<std::string>& finalizers) {
  return json(finalizers).dump();
}

std::string OwnersToJson(const std::vector<api::OwnerReference>& owners) {
  json array = json::array();
  for (const auto& owner : owners) {
    array.push_back({{"kind", std::string(KindName(owner.kind))},
                     {"name", owner.name},
                     {"uid", owner.uid},
                     {"controller", owner.controller}});
  }
  return array.dump();
}

std::string MakeUuidV4(std::mt19937_64& random) {
  std::array<uint8_t, 16> bytes{};
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t r = random();
    for (size_t j = 0; j < 8; ++j) {
      bytes[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
  }
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  out.reserve(36);
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out.push_back('-');
    }
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0x0f]);
  }
  return out;
}

// A short, single-line description of a statement for error messages.
std::string Describe(std::string_view sql) {
  std::string out;
  for (char c : sql) {
    if (out.size() >= 48) {
      out += "…";
      break;
    }
    if (c == '\n' || c == '\t' || c == ' ') {
      if (!out.empty() && out.back() != ' ') {
        out.push_back(' ');
      }
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

// One object row as stored; JSON columns kept as text.
struct internal::SqliteRow {
  ObjectKey key;
  std::string uid;
  int64_t generation = 0;
  int64_t resource_version = 0;
  std::string spec;
  std::string status;
  std::string labels = "{}";
  std::string annotations = "{}";
  std::string owner_references = "[]";
  std::string finalizers = "[]";
  std::string deletion_timestamp;  // "" when not being deleted (NULL in the table)
  std::string applyset;            // "" when in no applyset (NULL in the table)
  std::string creation_timestamp;
  std::string update_timestamp;
};

// A cached prepared statement in use; resets it (and its bindings) when it goes out of scope.
class SqliteStore::Stmt {
 public:
  Stmt(const SqliteStore* store, sqlite3_stmt* stmt) : store_(store), stmt_(stmt) {}
  Stmt(Stmt&& other) noexcept
      : store_(other.store_),
        stmt_(std::exchange(other.stmt_, nullptr)),
        bind_rc_(other.bind_rc_) {}
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }

  Stmt& Bind(int index, std::string_view text) {
    Check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& Bind(int index, int64_t value) {
    Check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  Stmt& BindBlob(int index, std::string_view bytes) {
    Check(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
    return *this;
  }
  // Binds NULL for "".
  Stmt& BindOrNull(int index, std::string_view text) {
    if (text.empty()) {
      Check(sqlite3_bind_null(stmt_, index));
      return *this;
    }
    return Bind(index, text);
  }

  // True when a row is available, false when done.
  StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) {
      return store_->Error(bind_rc_, Describe(sqlite3_sql(stmt_)));
    }
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) {
      return true;
    }
    if (rc == SQLITE_DONE) {
      return false;
    }
    return store_->Error(rc, Describe(sqlite3_sql(stmt_)));
  }
  // Steps to completion, ignoring rows.
  Status Run() {
    for (;;) {
      ASSIGN_OR_RETURN(bool row, Step());
      if (!row) {
        return OkStatus();
      }
    }
  }

  std::string Text(int column) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (text == nullptr) {
      return "";
    }
    return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) {
      bind_rc_ = rc;
    }
  }

  const SqliteStore* store_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock up front, so it waits for other
// writers through the busy timeout instead of failing on a lock upgrade). Rolls back unless
// committed.
class SqliteStore::Txn {
 public:
  explicit Txn(SqliteStore& store) : store_(store) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() { Rollback(); }

  Status Begin() {
    RETURN_IF_ERROR(store_.Exec("BEGIN IMMEDIATE"));
    open_ = true;
    return OkStatus();
  }
  Status Commit() {
    RETURN_IF_ERROR(store_.Exec("COMMIT"));
    open_ = false;
    return OkStatus();
  }
  void Rollback() {
    if (open_ && sqlite3_get_autocommit(store_.db_) == 0) {
      (void)store_.Exec("ROLLBACK");
    }
    open_ = false;
  }

 private:
  SqliteStore& store_;
  bool open_ = false;
};

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
    RETURN_IF_ERROR(Exec(kMigrations[v]));
    ASSIGN_OR_RETURN(Stmt stmt,
                     Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
    RETURN_IF_ERROR(stmt.Bind(1, v + 1).Bind(2, now).Run());
  }
  RETURN_IF_ERROR(Exec("PRAGMA user_version = " + std::to_string(kLatestSchemaVersion)));
  return txn.Commit();
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
      return Error(rc, Describe(sql));
    }
    it = statements_.emplace(std::move(key), stmt).first;
  }
  return Stmt(this, it->second);
}

Status SqliteStore::Exec(std::string_view sql) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return Error(rc, Describe(sql));
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

std::string SqliteStore::NewUid() { return MakeUuidV4(uid_random_); }

StatusOr<int64_t> SqliteStore::ReadRevision() {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT value FROM revision WHERE id = 1"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return DataLossError("database " + path_ + " has no revision row");
  }
  return stmt.Int(0);
}

Status SqliteStore::WriteRevision(int64_t revision) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("UPDATE revision SET value = ? WHERE id = 1"));
  return stmt.Bind(1, revision).Run();
}

// ---- rows -------------------------------------------------------------------------------------

namespace {

StatusOr<internal::SqliteRow> ReadRowColumns(const std::string& path, const auto& stmt) {
  internal::SqliteRow row;
  auto kind = api::ParseKind(stmt.Text(0));
  if (!kind.ok()) {
    return DataLossError("database " + path + ": object with unknown kind '" + stmt.Text(0) + "'");
  }
  row.key.kind = *kind;
  row.key.namespace_ = stmt.Text(1);
  row.key.name = stmt.Text(2);
  row.uid = stmt.Text(3);
  row.generation = stmt.Int(4);
  row.resource_version = stmt.Int(5);
  row.spec = stmt.Text(6);
  row.status = stmt.Text(7);
  row.labels = stmt.Text(8);
  row.annotations = stmt.Text(9);
  row.owner_references = stmt.Text(10);
  row.finalizers = stmt.Text(11);
  row.deletion_timestamp = stmt.Text(12);
  row.applyset = stmt.Text(13);
  row.creation_timestamp = stmt.Text(14);
  row.update_timestamp = stmt.Text(15);
  return row;
}

}  // namespace

StatusOr<std::optional<SqliteStore::Row>> SqliteStore::ReadRow(const ObjectKey& key) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kObjectColumns) +
                                      " FROM objects WHERE kind = ? AND namespace = ? AND "
                                      "name = ?"));
  stmt.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<Row>();
  }
  ASSIGN_OR_RETURN(Row row, ReadRowColumns(path_, stmt));
  return std::optional<Row>(std::move(row));
}

StatusOr<Object> SqliteStore::RowToObject(const Row& row) const {
  const std::string where = "database " + path_ + ": " + row.key.ToString() + ": ";
  Object object = api::MakeObject(row.key.kind, row.key.name, row.key.namespace_);
  auto spec = api::DecodeSpecJson(row.key.kind, row.spec);
  if (!spec.ok()) {
    return DataLossError(where + "spec: " + spec.status().message());
  }
  object.spec = std::move(spec).value();
  auto status = api::DecodeStatusJson(row.key.kind, row.status);
  if (!status.ok()) {
    return DataLossError(where + "status: " + status.status().message());
  }
  object.status = std::move(status).value();
  api::ObjectMeta& meta = object.metadata;
  meta.uid = row.uid;
  meta.generation = row.generation;
  meta.resource_version = row.resource_version;
  meta.creation_timestamp = row.creation_timestamp;
  meta.deletion_timestamp = row.deletion_timestamp;
  try {
    meta.labels = json::parse(row.labels).get<std::map<std::string, std::string>>();
    meta.annotations = json::parse(row.annotations).get<std::map<std::string, std::string>>();
    meta.finalizers = json::parse(row.finalizers).get<std::vector<std::string>>();
    for (const json& owner : json::parse(row.owner_references)) {
      api::OwnerReference ref;
      auto kind = api::ParseKind(owner.at("kind").get<std::string>());
      if (!kind.ok()) {
        return DataLossError(where + "ownerReferences: " + kind.status().message());
      }
      ref.kind = *kind;
      ref.name = owner.at("name").get<std::string>();
      ref.uid = owner.at("uid").get<std::string>();
      ref.controller = owner.value("controller", true);
      meta.owner_references.push_back(std::move(ref));
    }
  } catch (const json::exception& e) {
    return DataLossError(where + "metadata: " + e.what());
  }
  return object;
}

Status SqliteStore::InsertRow(const Row& row) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO objects (" + std::string(kObjectColumns) +
                                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  stmt.Bind(1, KindName(row.key.kind))
      .Bind(2, row.key.namespace_)
      .Bind(3, row.key.name)
      .Bind(4, row.uid)
      .Bind(5, row.generation)
      .Bind(6, row.resource_version)
      .Bind(7, row.spec)
      .Bind(8, row.status)
      .Bind(9, row.labels)
      .Bind(10, row.annotations)
      .Bind(11, row.owner_references)
      .Bind(12, row.finalizers)
      .BindOrNull(13, row.deletion_timestamp)
      .BindOrNull(14, row.applyset)
      .Bind(15, row.creation_timestamp)
      .Bind(16, row.update_timestamp);
  return stmt.Run();
}

Status SqliteStore::UpdateRow(const Row& row) {
  ASSIGN_OR_RETURN(
      Stmt stmt,
      Prepare("UPDATE objects SET uid = ?4, generation = ?5, resource_version = ?6, spec = ?7, "
              "status = ?8, labels = ?9, annotations = ?10, owner_references = ?11, "
              "finalizers = ?12, deletion_timestamp = ?13, applyset = ?14, "
              "creation_timestamp = ?15, update_timestamp = ?16 "
              "WHERE kind = ?1 AND namespace = ?2 AND name = ?3"));
  stmt.Bind(1, KindName(row.key.kind))
      .Bind(2, row.key.namespace_)
      .Bind(3, row.key.name)
      .Bind(4, row.uid)
      .Bind(5, row.generation)
      .Bind(6, row.resource_version)
      .Bind(7, row.spec)
      .Bind(8, row.status)
      .Bind(9, row.labels)
      .Bind(10, row.annotations)
      .Bind(11, row.owner_references)
      .Bind(12, row.finalizers)
      .BindOrNull(13, row.deletion_timestamp)
      .BindOrNull(14, row.applyset)
      .Bind(15, row.creation_timestamp)
      .Bind(16, row.update_timestamp);
  return stmt.Run();
}

Status SqliteStore::DeleteRow(const ObjectKey& key) {
  // What is kept beside an object goes with it (an AgentTask's log and artifacts).
  for (std::string_view table : {"task_log", "task_log_heads", "artifacts"}) {
    ASSIGN_OR_RETURN(Stmt side, Prepare("DELETE FROM " + std::string(table) +
                                        " WHERE task_uid IN (SELECT uid FROM objects WHERE kind = "
                                        "? AND namespace = ? AND name = ?)"));
    RETURN_IF_ERROR(
        side.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name).Run());
  }
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?"));
  stmt.Bind(1, KindName(key.kind)).Bind(2, key.namespace_).Bind(3, key.name);
  return stmt.Run();
}

namespace {

// The change log's object JSON: the API shape (apiVersion, kind, metadata, spec, status) built
// from the row's columns, so that a change decodes back into exactly the stored object.
std::string EncodeChangeObject(const internal::SqliteRow& row) {
  json meta = {{"name", row.key.name},
               {"namespace", row.key.namespace_},
               {"uid", row.uid},
               {"generation", row.generation},
               {"resourceVersion", row.resource_version},
               {"creationTimestamp", row.creation_timestamp}};
  if (!row.deletion_timestamp.empty()) {
    meta["deletionTimestamp"] = row.deletion_timestamp;
  }
  std::string meta_text = meta.dump();
  meta_text.pop_back();  // splice the JSON columns in as they are, without re-parsing them
  meta_text += ",\"labels\":" + row.labels + ",\"annotations\":" + row.annotations +
               ",\"finalizers\":" + row.finalizers +
               ",\"ownerReferences\":" + row.owner_references + "}";
  std::string out = "{\"apiVersion\":" + json(std::string(api::kApiVersion)).dump() +
                    ",\"kind\":" + json(std::string(KindName(row.key.kind))).dump() +
                    ",\"metadata\":" + meta_text + ",\"spec\":" + row.spec +
                    ",\"status\":" + row.status + "}";
  return out;
}

StatusOr<internal::SqliteRow> DecodeChangeObject(const ObjectKey& key, std::string_view text) {
  internal::SqliteRow row;
  row.key = key;
  try {
    const json object = json::parse(text);
    const json& meta = object.at("metadata");
    row.uid = meta.at("uid").get<std::string>();
    row.generation = meta.at("generation").get<int64_t>();
    row.resource_version = meta.at("resourceVersion").get<int64_t>();
    row.creation_timestamp = meta.value("creationTimestamp", "");
    row.deletion_timestamp = meta.value("deletionTimestamp", "");
    row.labels = meta.value("labels", json::object()).dump();
    row.annotations = meta.value("annotations", json::object()).dump();
    row.finalizers = meta.value("finalizers", json::array()).dump();
    row.owner_references = meta.value("ownerReferences", json::array()).dump();
    row.spec = object.at("spec").dump();
    row.status = object.at("status").dump();
  } catch (const json::exception& e) {
    return DataLossError(std::string("bad change record: ") + e.what());
  }
  return row;
}

}  // namespace

Status SqliteStore::AppendChange(int64_t revision, ChangeType type, const ObjectKey& key,
                                 const Row* row) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO changes (revision, type, kind, namespace, "
                                      "name, object) VALUES (?, ?, ?, ?, ?, ?)"));
  stmt.Bind(1, revision)
      .Bind(2, ChangeTypeName(type))
      .Bind(3, KindName(key.kind))
      .Bind(4, key.namespace_)
      .Bind(5, key.name);
  if (row != nullptr) {
    stmt.Bind(6, EncodeChangeObject(*row));
  }
  return stmt.Run();
}

StatusOr<DeleteOutcome> SqliteStore::DeleteLocked(Row& row, int64_t& revision) {
  if (!row.deletion_timestamp.empty()) {
    return DeleteOutcome::kAlreadyDeleting;
  }
  if (row.finalizers != "[]") {
    row.deletion_timestamp = Now();
    row.update_timestamp = row.deletion_timestamp;
    row.resource_version = ++revision;
    RETURN_IF_ERROR(UpdateRow(row));
    RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kModified, row.key, &row));
    return DeleteOutcome::kMarkedForDeletion;
  }
  row.resource_version = ++revision;
  RETURN_IF_ERROR(DeleteRow(row.key));
  RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kDeleted, row.key, nullptr));
  return DeleteOutcome::kDeleted;
}

// ---- objects ----------------------------------------------------------------------------------

StatusOr<std::vector<ApplyResult>> SqliteStore::Apply(const std::vector<Object>& objects,
                                                      const ApplyOptions& options) {
  if (options.prune && options.applyset.empty()) {
    return api::InvalidArgumentError("prune needs an applyset to know which objects to delete");
  }
  // Whatever the client (sbxctl, a GitOps pull, an API server), an empty apply with prune would
  // delete the whole set, and deletionPolicy Delete then the sandboxes.
  if (options.prune && objects.empty() && !options.prune_allow_empty) {
    return api::FailedPreconditionError(
        "no objects passed to apply; refusing to prune every "
        "member of applyset \"" +
        options.applyset + "\" (prune_allow_empty not set)");
  }
  // Validate and encode before taking the lock: pure work.
  struct Wanted {
    ObjectKey key;
    int64_t resource_version;
    std::string spec;
    std::string labels;
    std::string annotations;
  };
  std::vector<Wanted> wanted;
  wanted.reserve(objects.size());
  std::set<ObjectKey> keys;
  for (const Object& object : objects) {
    ObjectKey key = api::KeyOf(object);
    if (key.name.empty()) {
      return api::InvalidArgumentError("a " + std::string(KindName(key.kind)) + " in namespace " +
                                       key.namespace_ + " has no name");
    }
    if (!keys.insert(key).second) {
      return api::InvalidArgumentError(key.ToString() + " appears more than once in one apply");
    }
    wanted.push_back({std::move(key), object.metadata.resource_version, api::EncodeSpecJson(object),
                      MapToJson(object.metadata.labels), MapToJson(object.metadata.annotations)});
  }

  std::unique_lock lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  const std::string now = Now();
  std::vector<ApplyResult> results;
  results.reserve(wanted.size());

  for (Wanted& w : wanted) {
    ASSIGN_OR_RETURN(std::optional<Row> existing, ReadRow(w.key));
    ApplyResult result;
    result.key = w.key;
    Row row;
    if (options.require_resource_version) {
      if (!existing) {
        return api::NotFoundError(w.key.ToString() + " not found");
      }
      if (existing->resource_version != w.resource_version) {
        return api::AbortedError("conflict updating " + w.key.ToString() +
                                 ": it changed (resourceVersion " +
                                 std::to_string(w.resource_version) + " is now " +
                                 std::to_string(existing->resource_version) + "); read it again");
      }
    }
    if (!existing) {
      row.key = w.key;
      row.uid = NewUid();
      row.generation = 1;
      row.resource_version = ++revision;
      row.spec = std::move(w.spec);
      row.status = api::EncodeStatusJson(api::MakeObject(w.key.kind, w.key.name));
      row.labels = std::move(w.labels);
      row.annotations = std::move(w.annotations);
      row.applyset = options.applyset;
      row.creation_timestamp = now;
      row.update_timestamp = now;
      RETURN_IF_ERROR(InsertRow(row));
      RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kAdded, row.key, &row));
      result.action = ApplyAction::kCreated;
    } else {
      row = std::move(*existing);
      if (!row.deletion_timestamp.empty()) {
        return api::FailedPreconditionError(w.key.ToString() + " is being deleted (since " +
                                            row.deletion_timestamp +
                                            "); wait until it is gone, then apply again");
      }
      const bool spec_changed = row.spec != w.spec;
      const bool meta_changed = row.labels != w.labels || row.annotations != w.annotations;
      const bool applyset_changed = !options.applyset.empty() && row.applyset != options.applyset;
      if (spec_changed || meta_changed) {
        if (spec_changed) {
          ++row.generation;
        }
        row.spec = std::move(w.spec);
        row.labels = std::move(w.labels);
        row.annotations = std::move(w.annotations);
        if (!options.applyset.empty()) {
          row.applyset = options.applyset;
        }
        row.resource_version = ++revision;
        row.update_timestamp = now;
        RETURN_IF_ERROR(UpdateRow(row));
        RETURN_IF_ERROR(AppendChange(row.resource_version, ChangeType::kModified, row.key, &row));
        result.action = ApplyAction::kConfigured;
      } else {
        if (applyset_changed) {
          // Membership is bookkeeping of ours, not part of the object: no revision, no change.
          row.applyset = options.applyset;
          RETURN_IF_ERROR(UpdateRow(row));
        }
        result.action = ApplyAction::kUnchanged;
      }
    }
    ASSIGN_OR_RETURN(result.object, RowToObject(row));
    results.push_back(std::move(result));
  }

  if (options.prune) {
    std::vector<ObjectKey> members;
    {
      ASSIGN_OR_RETURN(Stmt stmt,
                       Prepare("SELECT kind, namespace, name FROM objects WHERE applyset = ?"));
      stmt.Bind(1, options.applyset);
      for (;;) {
        ASSIGN_OR_RETURN(bool more, stmt.Step());
        if (!more) {
          break;
        }
        auto kind = api::ParseKind(stmt.Text(0));
        if (!kind.ok()) {
          return DataLossError("database " + path_ + ": object with unknown kind '" + stmt.Text(0) +
                               "'");
        }
        ObjectKey key{*kind, stmt.Text(1), stmt.Text(2)};
        if (!keys.contains(key)) {
          members.push_back(std::move(key));
        }
      }
    }
    std::sort(members.begin(), members.end());
    for (const ObjectKey& key : members) {
      ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
      if (!row || !row->deletion_timestamp.empty()) {
        continue;  // already on its way out
      }
      ApplyResult result;
      result.key = key;
      result.action = ApplyAction::kPruned;
      ASSIGN_OR_RETURN(DeleteOutcome outcome, DeleteLocked(*row, revision));
      (void)outcome;
      ASSIGN_OR_RETURN(result.object, RowToObject(*row));
      results.push_back(std::move(result));
    }
  }

  if (options.dry_run) {
    txn.Rollback();
    return results;
  }
  if (revision != start) {
    RETURN_IF_ERROR(WriteRevision(revision));
  }
  RETURN_IF_ERROR(txn.Commit());
  if (revision != start) {
    ++local_commits_;
    committed_.notify_all();
  }
  return results;
}

StatusOr<Object> SqliteStore::Get(const ObjectKey& key) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  return RowToObject(*row);
}

StatusOr<std::vector<Object>> SqliteStore::List(const ListOptions& options) {
  std::string sql = "SELECT " + std::string(kObjectColumns) + " FROM objects";
  if (options.kind && options.namespace_) {
    sql += " WHERE kind = ?1 AND namespace = ?2";
  } else if (options.kind) {
    sql += " WHERE kind = ?1";
  } else if (options.namespace_) {
    sql += " WHERE namespace = ?2";
  }
  std::vector<Object> out;
  {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
    if (options.kind) {
      stmt.Bind(1, KindName(*options.kind));
    }
    if (options.namespace_) {
      stmt.Bind(2, *options.namespace_);
    }
    for (;;) {
      ASSIGN_OR_RETURN(bool more, stmt.Step());
      if (!more) {
        break;
      }
      ASSIGN_OR_RETURN(Row row, ReadRowColumns(path_, stmt));
      ASSIGN_OR_RETURN(Object object, RowToObject(row));
      bool match = true;
      for (const auto& [label, value] : options.label_selector) {
        auto it = object.metadata.labels.find(label);
        if (it == object.metadata.labels.end() || it->second != value) {
          match = false;
          break;
        }
      }
      if (match) {
        out.push_back(std::move(object));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

StatusOr<Object> SqliteStore::UpdateStatus(const Object& object) {
  const ObjectKey key = api::KeyOf(object);
  std::string status = api::EncodeStatusJson(object);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  if (row->resource_version != object.metadata.resource_version) {
    return api::AbortedError("conflict updating status of " + key.ToString() +
                             ": it changed (resourceVersion " +
                             std::to_string(object.metadata.resource_version) + " is now " +
                             std::to_string(row->resource_version) + "); read it again");
  }
  if (row->status == status) {
    return RowToObject(*row);
  }
  ASSIGN_OR_RETURN(int64_t revision, ReadRevision());
  row->status = std::move(status);
  row->resource_version = ++revision;
  row->update_timestamp = Now();
  RETURN_IF_ERROR(UpdateRow(*row));
  RETURN_IF_ERROR(AppendChange(revision, ChangeType::kModified, key, &*row));
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return RowToObject(*row);
}

StatusOr<Object> SqliteStore::UpdateControllerMetadata(const Object& object) {
  const ObjectKey key = api::KeyOf(object);
  std::string finalizers = FinalizersToJson(object.metadata.finalizers);
  std::string owners = OwnersToJson(object.metadata.owner_references);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  if (row->resource_version != object.metadata.resource_version) {
    return api::AbortedError("conflict updating metadata of " + key.ToString() +
                             ": it changed (resourceVersion " +
                             std::to_string(object.metadata.resource_version) + " is now " +
                             std::to_string(row->resource_version) + "); read it again");
  }
  if (row->finalizers == finalizers && row->owner_references == owners) {
    return RowToObject(*row);
  }
  ASSIGN_OR_RETURN(int64_t revision, ReadRevision());
  row->finalizers = std::move(finalizers);
  row->owner_references = std::move(owners);
  row->resource_version = ++revision;
  row->update_timestamp = Now();
  if (!row->deletion_timestamp.empty() && row->finalizers == "[]") {
    // The last finalizer is gone from an object being deleted: it goes for good.
    RETURN_IF_ERROR(DeleteRow(key));
    RETURN_IF_ERROR(AppendChange(revision, ChangeType::kDeleted, key, nullptr));
  } else {
    RETURN_IF_ERROR(UpdateRow(*row));
    RETURN_IF_ERROR(AppendChange(revision, ChangeType::kModified, key, &*row));
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return RowToObject(*row);
}

StatusOr<DeleteOutcome> SqliteStore::Delete(const ObjectKey& key) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(std::optional<Row> row, ReadRow(key));
  if (!row) {
    return api::NotFoundError(key.ToString() + " not found");
  }
  ASSIGN_OR_RETURN(const int64_t start, ReadRevision());
  int64_t revision = start;
  ASSIGN_OR_RETURN(DeleteOutcome outcome, DeleteLocked(*row, revision));
  if (revision == start) {
    return outcome;
  }
  RETURN_IF_ERROR(WriteRevision(revision));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return outcome;
}

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
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT revision, type, kind, namespace, name, object FROM "
                                      "changes WHERE revision > ? ORDER BY revision LIMIT ?"));
  stmt.Bind(1, since).Bind(2, static_cast<int64_t>(std::max(limit, 0)));
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    Change change;
    change.revision = stmt.Int(0);
    const std::string where = "database " + path_ + ": change " + std::to_string(change.revision);
    auto type = ParseChangeType(stmt.Text(1));
    auto kind = api::ParseKind(stmt.Text(2));
    if (!type || !kind.ok()) {
      return DataLossError(where + ": bad type or kind");
    }
    change.type = *type;
    change.key = ObjectKey{*kind, stmt.Text(3), stmt.Text(4)};
    if (!stmt.IsNull(5)) {
      auto row = DecodeChangeObject(change.key, stmt.Text(5));
      if (!row.ok()) {
        return DataLossError(where + ": " + row.status().message());
      }
      auto object = RowToObject(*row);
      if (!object.ok()) {
        return DataLossError(where + ": " + object.status().message());
      }
      change.object = std::move(object).value();
    }
    out.push_back(std::move(change));
  }
  const bool gap = out.empty() ? since < current : out.front().revision != since + 1;
  if (gap) {
    ASSIGN_OR_RETURN(const int64_t compacted, ReadCompactedRevision());
    return Status(StatusCode::kOutOfRange,
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

StatusOr<SqliteStore::Stats> SqliteStore::ReadStats() {
  std::lock_guard lock(mu_);
  // One read transaction, so the numbers belong together.
  RETURN_IF_ERROR(Exec("BEGIN"));
  auto read = [&]() -> StatusOr<Stats> {
    Stats stats;
    ASSIGN_OR_RETURN(stats.revision, ReadRevision());
    ASSIGN_OR_RETURN(stats.compacted_revision, ReadCompactedRevision());
    for (auto [table, field] :
         {std::pair{"changes", &Stats::changes}, std::pair{"events", &Stats::events}}) {
      ASSIGN_OR_RETURN(Stmt stmt, Prepare(std::string("SELECT count(*) FROM ") + table));
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      stats.*field = row ? stmt.Int(0) : 0;
    }
    return stats;
  };
  StatusOr<Stats> stats = read();
  (void)Exec("COMMIT");
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

// ---- events -----------------------------------------------------------------------------------

Status SqliteStore::RecordEvent(const Event& event) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(
      Stmt stmt, Prepare("INSERT INTO events (kind, namespace, name, type, reason, message, count, "
                         "first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                         "ON CONFLICT (kind, namespace, name, type, reason, message) DO UPDATE SET "
                         "count = count + excluded.count, last_seen = excluded.last_seen"));
  stmt.Bind(1, KindName(event.involved.kind))
      .Bind(2, event.involved.namespace_)
      .Bind(3, event.involved.name)
      .Bind(4, event.type)
      .Bind(5, event.reason)
      .Bind(6, event.message)
      .Bind(7, std::max<int64_t>(event.count, 1))
      .Bind(8, event.first_seen.empty() ? now : event.first_seen)
      .Bind(9, event.last_seen.empty() ? now : event.last_seen);
  RETURN_IF_ERROR(stmt.Run());
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
  std::string sql =
      "SELECT kind, namespace, name, type, reason, message, count, first_seen, last_seen "
      "FROM events";
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
    auto kind = api::ParseKind(stmt.Text(0));
    if (!kind.ok()) {
      return DataLossError("database " + path_ + ": event with unknown kind '" + stmt.Text(0) +
                           "'");
    }
    Event event;
    event.involved = ObjectKey{*kind, stmt.Text(1), stmt.Text(2)};
    event.type = stmt.Text(3);
    event.reason = stmt.Text(4);
    event.message = stmt.Text(5);
    event.count = stmt.Int(6);
    event.first_seen = stmt.Text(7);
    event.last_seen = stmt.Text(8);
    out.push_back(std::move(event));
  }
  return out;
}

// ---- inventory --------------------------------------------------------------------------------

namespace {

constexpr std::string_view kInventoryColumns =
    "workspace, resource_type, external_id, state, owner_kind, owner_namespace, owner_name, "
    "owner_uid, created_at, updated_at";

}  // namespace

Status SqliteStore::PutInventory(const InventoryRecord& record) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(
      Stmt stmt,
      Prepare("INSERT INTO inventory (" + std::string(kInventoryColumns) +
              ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (workspace, resource_type, external_id) DO UPDATE SET "
              "state = excluded.state, owner_kind = excluded.owner_kind, "
              "owner_namespace = excluded.owner_namespace, owner_name = excluded.owner_name, "
              "owner_uid = excluded.owner_uid, updated_at = excluded.updated_at"));
  stmt.Bind(1, record.workspace)
      .Bind(2, record.resource_type)
      .Bind(3, record.external_id)
      .Bind(4, InventoryStateName(record.state))
      .Bind(5, KindName(record.owner.kind))
      .Bind(6, record.owner.namespace_)
      .Bind(7, record.owner.name)
      .Bind(8, record.owner_uid)
      .Bind(9, record.created_at.empty() ? now : record.created_at)
      .Bind(10, record.updated_at.empty() ? now : record.updated_at);
  RETURN_IF_ERROR(stmt.Run());
  return txn.Commit();
}

namespace {

StatusOr<Store::InventoryRecord> ReadInventoryColumns(const std::string& path, const auto& stmt) {
  Store::InventoryRecord record;
  record.workspace = stmt.Text(0);
  record.resource_type = stmt.Text(1);
  record.external_id = stmt.Text(2);
  auto state = ParseInventoryState(stmt.Text(3));
  auto kind = api::ParseKind(stmt.Text(4));
  if (!state || !kind.ok()) {
    return DataLossError("database " + path + ": inventory record " + record.workspace + "/" +
                         record.resource_type + "/" + record.external_id +
                         " has a bad state or owner kind");
  }
  record.state = *state;
  record.owner = ObjectKey{*kind, stmt.Text(5), stmt.Text(6)};
  record.owner_uid = stmt.Text(7);
  record.created_at = stmt.Text(8);
  record.updated_at = stmt.Text(9);
  return record;
}

}  // namespace

StatusOr<std::optional<Store::InventoryRecord>> SqliteStore::GetInventory(
    const std::string& workspace, const std::string& resource_type,
    const std::string& external_id) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kInventoryColumns) +
                                      " FROM inventory WHERE workspace = ? AND "
                                      "resource_type = ? AND external_id = ?"));
  stmt.Bind(1, workspace).Bind(2, resource_type).Bind(3, external_id);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<InventoryRecord>();
  }
  ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(path_, stmt));
  return std::optional<InventoryRecord>(std::move(record));
}

StatusOr<std::vector<Store::InventoryRecord>> SqliteStore::ListInventory(
    const std::optional<std::string>& workspace) {
  std::string sql = "SELECT " + std::string(kInventoryColumns) + " FROM inventory";
  if (workspace) {
    sql += " WHERE workspace = ?";
  }
  sql += " ORDER BY workspace, resource_type, external_id";
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  if (workspace) {
    stmt.Bind(1, *workspace);
  }
  std::vector<InventoryRecord> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(path_, stmt));
    out.push_back(std::move(record));
  }
  return out;
}

Status SqliteStore::DeleteInventory(const std::string& workspace, const std::string& resource_type,
                                    const std::string& external_id) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM inventory WHERE workspace = ? AND "
                                      "resource_type = ? AND external_id = ?"));
  RETURN_IF_ERROR(stmt.Bind(1, workspace).Bind(2, resource_type).Bind(3, external_id).Run());
  return txn.Commit();
}

// ---- leases -----------------------------------------------------------------------------------

StatusOr<bool> SqliteStore::TryAcquireLease(const std::string& name, const std::string& holder,
                                            std::chrono::milliseconds ttl) {
  if (holder.empty()) {
    return api::InvalidArgumentError("lease " + name + ": empty holder");
  }
  const auto now = clock_.Now();
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT holder, expires_at_ms FROM leases WHERE name = ?"));
    stmt.Bind(1, name);
    ASSIGN_OR_RETURN(bool found, stmt.Step());
    if (found && stmt.Text(0) != holder && stmt.Int(1) > now_ms) {
      return false;  // held by someone else and not expired
    }
  }
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO leases (name, holder, expires_at_ms, "
                                      "renewed_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO "
                                      "UPDATE SET holder = excluded.holder, expires_at_ms = "
                                      "excluded.expires_at_ms, renewed_at = excluded.renewed_at"));
  RETURN_IF_ERROR(stmt.Bind(1, name)
                      .Bind(2, holder)
                      .Bind(3, now_ms + ttl.count())
                      .Bind(4, FormatRfc3339(now))
                      .Run());
  RETURN_IF_ERROR(txn.Commit());
  return true;
}

Status SqliteStore::ReleaseLease(const std::string& name, const std::string& holder) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM leases WHERE name = ? AND holder = ?"));
  RETURN_IF_ERROR(stmt.Bind(1, name).Bind(2, holder).Run());
  return txn.Commit();
}

StatusOr<std::optional<Store::Lease>> SqliteStore::GetLease(const std::string& name) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("SELECT holder, expires_at_ms, renewed_at FROM leases WHERE name = ?"));
  stmt.Bind(1, name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<Lease>();
  }
  Lease lease;
  lease.name = name;
  lease.holder = stmt.Text(0);
  lease.expires_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(stmt.Int(1)));
  lease.renewed_at = stmt.Text(2);
  return std::optional<Lease>(std::move(lease));
}

// ---- AgentTask log and artifacts --------------------------------------------------------------

namespace {

std::string_view TaskLogKindName(Store::TaskLogKind kind) {
  switch (kind) {
    case Store::TaskLogKind::kAssistantDelta:
      return "assistant.delta";
    case Store::TaskLogKind::kAssistant:
      return "assistant";
    case Store::TaskLogKind::kCommand:
      return "command";
    case Store::TaskLogKind::kOutputDelta:
      return "output.delta";
    case Store::TaskLogKind::kCommandResult:
      return "command.result";
    case Store::TaskLogKind::kStatus:
      return "status";
  }
  return "status";
}

Store::TaskLogKind ParseTaskLogKind(std::string_view name) {
  for (Store::TaskLogKind k : {Store::TaskLogKind::kAssistantDelta, Store::TaskLogKind::kAssistant,
                               Store::TaskLogKind::kCommand, Store::TaskLogKind::kOutputDelta,
                               Store::TaskLogKind::kCommandResult}) {
    if (TaskLogKindName(k) == name) {
      return k;
    }
  }
  return Store::TaskLogKind::kStatus;
}

}  // namespace

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
    const std::string_view text = std::string_view(e.text).substr(0, static_cast<size_t>(bound));
    ASSIGN_OR_RETURN(Stmt stmt,
                     Prepare("INSERT INTO task_log (task_uid, seq, kind, item_id, text, exit_code, "
                             "at, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    stmt.Bind(1, task_uid)
        .Bind(2, seq)
        .Bind(3, TaskLogKindName(e.kind))
        .Bind(4, e.item_id)
        .Bind(5, text)
        .Bind(7, now)
        .Bind(8, static_cast<int64_t>(text.size()));
    if (e.exit_code.has_value()) {
      stmt.Bind(6, *e.exit_code);
    }
    RETURN_IF_ERROR(stmt.Run());
  }
  {
    ASSIGN_OR_RETURN(
        Stmt stmt,
        Prepare("INSERT INTO task_log_heads (task_uid, kind, namespace, name, last_seq, dropped) "
                "VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT (task_uid) DO UPDATE SET "
                "last_seq = excluded.last_seq"));
    stmt.Bind(1, task_uid)
        .Bind(2, KindName(task.kind))
        .Bind(3, task.namespace_)
        .Bind(4, task.name)
        .Bind(5, seq);
    RETURN_IF_ERROR(stmt.Run());
  }
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
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT seq, kind, item_id, text, exit_code, at FROM "
                                        "task_log WHERE task_uid = ? AND seq > ? ORDER BY seq "
                                        "LIMIT ?"));
    stmt.Bind(1, task_uid).Bind(2, after_seq).Bind(3, limit > 0 ? int64_t{limit} : int64_t{-1});
    for (;;) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) {
        break;
      }
      TaskLogEntry e;
      e.seq = stmt.Int(0);
      e.kind = ParseTaskLogKind(stmt.Text(1));
      e.item_id = stmt.Text(2);
      e.text = stmt.Text(3);
      if (!stmt.IsNull(4)) {
        e.exit_code = stmt.Int(4);
      }
      e.at = stmt.Text(5);
      page.entries.push_back(std::move(e));
    }
    return page;
  };
  StatusOr<TaskLogPage> page = read();
  (void)Exec("COMMIT");
  return page;
}

Status SqliteStore::PutArtifact(const ObjectKey& task, const std::string& task_uid,
                                const Artifact& artifact) {
  if (artifact.bytes != static_cast<int64_t>(artifact.content.size())) {
    return api::InvalidArgumentError("artifact " + artifact.path + ": bytes " +
                                     std::to_string(artifact.bytes) + " but " +
                                     std::to_string(artifact.content.size()) + " bytes of content");
  }
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT coalesce(sum(bytes), 0) FROM artifacts WHERE "
                                        "task_uid = ? AND path != ?"));
    stmt.Bind(1, task_uid).Bind(2, artifact.path);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    const int64_t others = row ? stmt.Int(0) : 0;
    if (others + artifact.bytes > kMaxTaskArtifactBytes) {
      return api::ResourceExhaustedError(
          "artifact " + artifact.path + " (" + std::to_string(artifact.bytes) +
          " bytes) would take task " + task.ToString() + " past 16 MiB of artifacts");
    }
  }
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("INSERT INTO artifacts (task_uid, kind, namespace, name, path, bytes, "
                           "sha256, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                           "(task_uid, path) DO UPDATE SET bytes = excluded.bytes, sha256 = "
                           "excluded.sha256, content = excluded.content"));
  stmt.Bind(1, task_uid)
      .Bind(2, KindName(task.kind))
      .Bind(3, task.namespace_)
      .Bind(4, task.name)
      .Bind(5, artifact.path)
      .Bind(6, artifact.bytes)
      .Bind(7, artifact.sha256)
      .BindBlob(8, artifact.content);
  RETURN_IF_ERROR(stmt.Run());
  return txn.Commit();
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

}  // namespace sbx::controller
