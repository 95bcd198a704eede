// SqliteStore on real files: several store instances (as sbxctl and sbxd would be) sharing one
// database, concurrent writers, and the errors a user sees for bad, locked or newer files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

using api::Kind;
using api::StatusCode;
using ::testing::AnyOf;
using ::testing::HasSubstr;

Object Sandbox(const std::string& name, const std::string& image = "python:3.12") {
  Object o = api::MakeObject(Kind::kSandbox, name);
  o.sandbox_spec().image = image;
  return o;
}

class SqliteStoreFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "sbx.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteStore> MustOpen(SqliteStore::Options options = {}) {
    auto store = SqliteStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  void WriteFile(const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SqliteStoreFileTest, DataSurvivesReopen) {
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Apply({Sandbox("a")}, {}).ok());
  }
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  auto object = store->Get(ObjectKey{Kind::kSandbox, "default", "a"});
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->sandbox_spec().image, "python:3.12");
  EXPECT_EQ(*store->CurrentRevision(), 1);
}

TEST_F(SqliteStoreFileTest, UsesWalAndRecordsTheSchemaVersion) {
  ASSERT_NE(MustOpen(), nullptr);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  auto query_int = [&](const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    std::string value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return value;
  };
  EXPECT_EQ(query_int("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_int("PRAGMA user_version"), std::to_string(SqliteStore::LatestSchemaVersion()));
  EXPECT_EQ(query_int("SELECT max(version) FROM schema_migrations"),
            std::to_string(SqliteStore::LatestSchemaVersion()));
  sqlite3_close(db);
}

TEST_F(SqliteStoreFileTest, NonDatabaseFileIsAClearErrorNamingThePath) {
  WriteFile(
      "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\n# not a database at all, but long "
      "enough to have a header-sized prefix of garbage in it.........................\n");
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().code(), AnyOf(StatusCode::kFailedPrecondition, StatusCode::kDataLoss));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_EQ(store.status().message().find('\n'), std::string::npos);
}

TEST_F(SqliteStoreFileTest, CorruptDatabaseIsDataLossNamingThePath) {
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    std::vector<Object> many;
    for (int i = 0; i < 50; ++i) {
      many.push_back(Sandbox("s" + std::to_string(i)));
    }
    ASSERT_TRUE(store->Apply(many, {}).ok());
  }
  // Keep the header (so it still looks like SQLite) and smash every page after the first.
  std::fstream file(path_, std::ios::binary | std::ios::in | std::ios::out);
  file.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(file.tellg());
  ASSERT_GT(size, 4096);
  file.seekp(4096);
  file << std::string(static_cast<size_t>(size - 4096), '\x5a');
  file.close();

  auto store = SqliteStore::Open(path_);
  Status status = store.status();
  if (store.ok()) {
    status = (*store)->List({}).status();
  }
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.code(), AnyOf(StatusCode::kDataLoss, StatusCode::kFailedPrecondition));
  EXPECT_THAT(status.message(), HasSubstr(path_));
}

TEST_F(SqliteStoreFileTest, ForeignSqliteDatabaseIsRefused) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE customers (id INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("not an sbx"));
}

// A database written by the first schema (inventory states intent|live|deleting) is migrated:
// its rows survive and the new state 'abandoned' can be stored; its finished AgentTask is marked
// finished (schema 10) and an unfinished one is not.
TEST_F(SqliteStoreFileTest, MigratesInventoryToAcceptAbandonedAndKeepsItsRows) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* v1 = R"sql(
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
INSERT INTO schema_migrations VALUES (1, '2026-09-01T12:00:00Z');
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
INSERT INTO objects VALUES ('AgentTask', 'default', 'done', 'uid-done', 1, 1,
  '{"workerRef":"w","input":"hi"}', '{"phase":"Succeeded"}', '{}', '{}', '[]', '[]', NULL, NULL,
  '2026-09-01T12:00:00Z', '2026-09-01T12:00:00Z');
INSERT INTO objects VALUES ('AgentTask', 'default', 'live', 'uid-live', 1, 2,
  '{"workerRef":"w","input":"hi"}', '{"phase":"Running"}', '{}', '{}', '[]', '[]', NULL, NULL,
  '2026-09-01T12:00:00Z', '2026-09-01T12:00:00Z');
CREATE TABLE changes (
  revision INTEGER PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  object TEXT
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
INSERT INTO inventory VALUES ('default/default', 'session', 'sess_1', 'live', 'AgentWorker',
  'default', 'w', 'uid-w', '2026-09-01T12:00:00Z', '2026-09-01T12:00:00Z');
CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  renewed_at TEXT NOT NULL
);
INSERT INTO leases VALUES ('sbxd', 'old-host-1', 0, '2026-09-01T12:00:00Z');
PRAGMA user_version = 1;
)sql";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_GE(SqliteStore::LatestSchemaVersion(), 2);

  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  auto row = store->GetInventory("default/default", "session", "sess_1");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->state, Store::InventoryState::kLive);
  // Leases gained fencing tokens (schema 4): an old row starts at 0, its next tenure is 1.
  auto token = store->AcquireLease("sbxd", "new-host-2", std::chrono::seconds(15));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, std::optional<int64_t>(1));
  EXPECT_EQ((*row)->owner_uid, "uid-w");
  Store::InventoryRecord abandoned = **row;
  abandoned.state = Store::InventoryState::kAbandoned;
  ASSERT_TRUE(store->PutInventory(abandoned).ok());
  row = store->GetInventory("default/default", "session", "sess_1");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->state, Store::InventoryState::kAbandoned);

  ListOptions live_tasks;
  live_tasks.kind = api::Kind::kAgentTask;
  live_tasks.unfinished_only = true;
  auto live = store->List(live_tasks);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].metadata.name, "live");
  live_tasks.unfinished_only = false;
  EXPECT_EQ(store->List(live_tasks)->size(), 2u);
}

TEST_F(SqliteStoreFileTest, NewerSchemaIsRefused) {
  ASSERT_NE(MustOpen(), nullptr);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 999", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("999"));
}

TEST_F(SqliteStoreFileTest, LockedDatabaseIsUnavailableAfterTheBusyTimeout) {
  SqliteStore::Options options;
  options.busy_timeout = std::chrono::milliseconds(200);
  auto store = MustOpen(options);
  ASSERT_NE(store, nullptr);

  sqlite3* locker = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);

  const auto start = std::chrono::steady_clock::now();
  auto results = store->Apply({Sandbox("a")}, {});
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(results.status().message(), HasSubstr(path_));
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_TRUE(store->List({}).ok());

  ASSERT_EQ(sqlite3_exec(locker, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(locker);
  EXPECT_TRUE(store->Apply({Sandbox("a")}, {}).ok());
}

TEST_F(SqliteStoreFileTest, WatchSeesChangesFromAnotherInstance) {
  auto writer = MustOpen();
  auto watcher = MustOpen();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(watcher, nullptr);
  auto none = watcher->WatchSince(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(watcher->WaitForChange(std::chrono::milliseconds(30)));

  std::jthread write([&] { ASSERT_TRUE(writer->Apply({Sandbox("a"), Sandbox("b")}, {}).ok()); });
  EXPECT_TRUE(watcher->WaitForChange(std::chrono::seconds(10)));
  write.join();
  // WaitForChange may wake between the two objects of one apply only if they were separate
  // commits; they are one transaction, so one read sees both.
  auto changes = watcher->WatchSince(0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].key.name, "a");
  EXPECT_EQ((*changes)[1].key.name, "b");
  ASSERT_TRUE((*changes)[1].object.has_value());
  EXPECT_EQ((*changes)[1].object->metadata.resource_version, 2);
}

// Two writer threads, each with its own store instance (its own connection, as two processes
// would have), and a third instance watching: every revision appears exactly once, in order,
// with no gap, and the watcher sees every object write.
TEST_F(SqliteStoreFileTest, ConcurrentWritersLoseNoRevisionAndWatchSeesEachOnce) {
  constexpr int kObjectsPerWriter = 60;
  ASSERT_NE(MustOpen(), nullptr);  // create the schema once

  auto writer_body = [&](const std::string& prefix) {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < kObjectsPerWriter; ++i) {
      auto applied = store->Apply({Sandbox(prefix + std::to_string(i))}, {});
      ASSERT_TRUE(applied.ok()) << applied.status();
      Object object = (*applied)[0].object;
      object.sandbox_status().state = "RUNNING";
      ASSERT_TRUE(store->UpdateStatus(object).ok());
    }
  };
  constexpr int kTotal = 2 * kObjectsPerWriter * 2;  // two writers × (create + status)

  auto watcher = MustOpen();
  ASSERT_NE(watcher, nullptr);
  std::vector<Store::Change> seen;
  {
    std::jthread a(writer_body, "a");
    std::jthread b(writer_body, "b");
    int64_t since = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (static_cast<int>(seen.size()) < kTotal && std::chrono::steady_clock::now() < deadline) {
      auto changes = watcher->WatchSince(since, 7);  // small pages on purpose
      ASSERT_TRUE(changes.ok()) << changes.status();
      for (auto& change : *changes) {
        since = change.revision;
        seen.push_back(std::move(change));
      }
      if (changes->empty()) {
        watcher->WaitForChange(std::chrono::milliseconds(200));
      }
    }
  }
  ASSERT_EQ(static_cast<int>(seen.size()), kTotal);
  std::map<std::string, int> added;
  std::map<std::string, int> modified;
  for (int i = 0; i < kTotal; ++i) {
    EXPECT_EQ(seen[i].revision, i + 1) << "gap or duplicate at index " << i;
    if (seen[i].type == Store::ChangeType::kAdded) {
      ++added[seen[i].key.name];
    }
    if (seen[i].type == Store::ChangeType::kModified) {
      ++modified[seen[i].key.name];
      ASSERT_TRUE(seen[i].object.has_value());
      EXPECT_EQ(seen[i].object->sandbox_status().state, "RUNNING");
    }
  }
  EXPECT_EQ(added.size(), 2u * kObjectsPerWriter);
  EXPECT_EQ(modified.size(), 2u * kObjectsPerWriter);
  for (const auto& [name, count] : added) {
    EXPECT_EQ(count, 1) << name;
  }
  for (const auto& [name, count] : modified) {
    EXPECT_EQ(count, 1) << name;
  }
  EXPECT_EQ(*watcher->CurrentRevision(), kTotal);
  auto after = watcher->WatchSince(kTotal);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
}

TEST_F(SqliteStoreFileTest, ConcurrentOpensOfAFreshFileMigrateOnce) {
  std::vector<std::unique_ptr<SqliteStore>> stores(4);
  {
    std::vector<std::jthread> openers;
    for (auto& store : stores) {
      openers.emplace_back([&] { store = MustOpen(); });
    }
  }
  for (const auto& store : stores) {
    ASSERT_NE(store, nullptr);
  }
  ASSERT_TRUE(stores[0]->Apply({Sandbox("a")}, {}).ok());
  auto seen = stores[3]->Get(ObjectKey{Kind::kSandbox, "default", "a"});
  EXPECT_TRUE(seen.ok()) << seen.status();
}

// Several threads sharing one instance (one connection behind its mutex).
TEST_F(SqliteStoreFileTest, OneInstanceIsSafeFromSeveralThreads) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          auto applied =
              store->Apply({Sandbox("t" + std::to_string(t) + "-" + std::to_string(i))}, {});
          EXPECT_TRUE(applied.ok()) << applied.status();
        }
      });
    }
  }
  EXPECT_EQ(*store->CurrentRevision(), 100);
  EXPECT_EQ(store->List({})->size(), 100u);
}

TEST_F(SqliteStoreFileTest, LeaseIsExclusiveAcrossInstances) {
  auto a = MustOpen();
  auto b = MustOpen();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(*a->TryAcquireLease("sbxd", "a", std::chrono::seconds(30)));
  EXPECT_FALSE(*b->TryAcquireLease("sbxd", "b", std::chrono::seconds(30)));
  ASSERT_TRUE(a->ReleaseLease("sbxd", "a").ok());
  EXPECT_TRUE(*b->TryAcquireLease("sbxd", "b", std::chrono::seconds(30)));
}

// ---- file modes ---------------------------------------------------------------------------

// Sets the umask for one test: the modes checked below must not depend on the umask the suite
// runs under (before the fix, 022 gave a 0755 directory and 0644 files; 077 would hide that).
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

// The permission bits of `path`, or -1 if it does not exist.
int ModeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return -1;
  }
  return static_cast<int>(st.st_mode & 07777);
}

TEST_F(SqliteStoreFileTest, CreatesANewDatabaseAndItsDirectoriesPrivateToTheOwner) {
  ScopedUmask umask(022);
  const std::filesystem::path state = dir_ / "state";
  const std::filesystem::path path = state / "sbx" / "sbx.db";
  auto store = SqliteStore::Open(path.string());
  ASSERT_TRUE(store.ok()) << store.status();
  // A write, so that the -wal and -shm files exist while the store is open.
  ASSERT_TRUE((*store)->Apply({Sandbox("a")}, {}).ok());

  EXPECT_EQ(ModeOf(state), 0700);
  EXPECT_EQ(ModeOf(state / "sbx"), 0700);
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(path.string() + "-wal"), 0600);
  EXPECT_EQ(ModeOf(path.string() + "-shm"), 0600);
}

TEST_F(SqliteStoreFileTest, CreatesANewDatabaseInAnExistingDirectoryPrivateToTheOwner) {
  ScopedUmask umask(022);
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Apply({Sandbox("a")}, {}).ok());

  EXPECT_EQ(ModeOf(path_), 0600);
  EXPECT_EQ(ModeOf(path_ + "-wal"), 0600);
  EXPECT_EQ(ModeOf(path_ + "-shm"), 0600);
}

TEST_F(SqliteStoreFileTest, KeepsTheModesAnOperatorSetOnAnExistingDatabaseAndDirectory) {
  ScopedUmask umask(022);
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(path_.c_str(), 0640), 0);

  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Apply({Sandbox("a")}, {}).ok());

  EXPECT_EQ(ModeOf(dir_), 0750);
  EXPECT_EQ(ModeOf(path_), 0640);
  EXPECT_EQ(ModeOf(path_ + "-wal"), 0640);
  EXPECT_EQ(ModeOf(path_ + "-shm"), 0640);
}

TEST_F(SqliteStoreFileTest, ADirectoryThatCannotBeCreatedIsAClearError) {
  // A regular file where a directory is needed.
  WriteFile("not a directory");
  const std::string db = path_ + "/sub/sbx.db";
  auto store = SqliteStore::Open(db);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr("cannot create directory " + path_ + "/sub for database " + db));
}

// Compaction by one instance (the leader sbxd) while another (a watcher such as `sbxctl get -w`)
// is behind it: the watcher is told (kOutOfRange), never silently skips, and a watcher that
// re-lists on that error ends with exactly the store's state, even while a third instance
// writes, deletes and the log is compacted to the newest revision over and over.
TEST_F(SqliteStoreFileTest, AWatcherBehindAnotherInstancesCompactionIsToldAndCatchesUpByReListing) {
  auto writer = MustOpen();
  auto compactor = MustOpen();
  auto watcher = MustOpen();
  ASSERT_TRUE(writer && compactor && watcher);
  ASSERT_TRUE(writer->Apply({Sandbox("a"), Sandbox("b")}, {}).ok());
  ASSERT_TRUE(compactor->CompactChanges(1).ok());
  auto behind = watcher->WatchSince(0);
  ASSERT_FALSE(behind.ok());
  EXPECT_EQ(behind.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(behind.status().message(), HasSubstr(path_));

  // The race: each of 10 objects is rewritten, deleted and re-created while compaction chases
  // the newest revision.
  std::atomic<bool> done{false};
  std::jthread write([&] {
    for (int round = 0; round < 30; ++round) {
      for (int i = 0; i < 10; ++i) {
        const std::string name = "s" + std::to_string(i);
        ASSERT_TRUE(writer->Apply({Sandbox(name, "img:" + std::to_string(round))}, {}).ok());
        if ((round + i) % 7 == 0) {
          ASSERT_TRUE(writer->Delete(ObjectKey{Kind::kSandbox, "default", name}).ok());
        }
      }
    }
    done = true;
  });
  std::jthread compact([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      auto current = compactor->CurrentRevision();
      ASSERT_TRUE(current.ok());
      ASSERT_TRUE(compactor->CompactChanges(*current).ok());
      compactor->WaitForChange(std::chrono::milliseconds(5));
    }
  });

  std::map<ObjectKey, int64_t> view;  // key → resourceVersion, as the watcher saw it
  int64_t since = 0;
  int relists = 0;
  auto relist = [&] {
    auto revision = watcher->CurrentRevision();  // before listing, as StoreWatch does
    auto objects = watcher->List({});
    ASSERT_TRUE(revision.ok() && objects.ok());
    view.clear();
    for (const Object& o : *objects) {
      view[api::KeyOf(o)] = o.metadata.resource_version;
    }
    since = *revision;
    ++relists;
  };
  relist();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up);
    const bool finished = done.load();
    auto changes = watcher->WatchSince(since, 7);  // small batches: more chances to fall behind
    if (!changes.ok()) {
      ASSERT_EQ(changes.status().code(), StatusCode::kOutOfRange) << changes.status();
      relist();
      continue;
    }
    for (const Store::Change& change : *changes) {
      ASSERT_EQ(change.revision, since + 1) << "a revision was skipped";
      since = change.revision;
      if (change.type == Store::ChangeType::kDeleted) {
        view.erase(change.key);
      } else {
        view[change.key] = change.object->metadata.resource_version;
      }
    }
    auto current = watcher->CurrentRevision();
    ASSERT_TRUE(current.ok());
    if (finished && since == *current) {
      break;
    }
  }
  compact.request_stop();
  compact.join();
  write.join();

  auto objects = writer->List({});
  ASSERT_TRUE(objects.ok());
  std::map<ObjectKey, int64_t> truth;
  for (const Object& o : *objects) {
    truth[api::KeyOf(o)] = o.metadata.resource_version;
  }
  EXPECT_EQ(view, truth);
  std::cerr << "watcher re-listed " << relists - 1 << " times after falling behind\n";
}

}  // namespace
}  // namespace sbx::controller
