// What PostgresStore does beyond the shared Store contract (store_test.cc runs that against it):
// no password in any message, revisions gap-free and ordered under concurrent writers in several
// store instances, WaitForChange woken by another instance's commit (LISTEN/NOTIFY), versioned
// migrations, and refusing a database that is not an sbx one.
#include "controller/store/postgres_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/open_store.h"
#include "tests/support/postgres_server.h"

namespace sbx::controller {
namespace {

using api::Kind;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RedactDatabaseUrlTest, HidesEveryFormOfThePassword) {
  EXPECT_EQ(RedactDatabaseUrl("postgres://sbx:s3cret@db.example:5432/sbx"),
            "postgres://sbx:***@db.example:5432/sbx");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://sbx:p%40ss:w@rd@db/sbx?sslmode=require"),
            "postgresql://sbx:***@db/sbx?sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("postgres://db/sbx?user=sbx&password=s3cret&sslmode=require"),
            "postgres://db/sbx?user=sbx&password=***&sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("host=db user=sbx password = 's3 cret' dbname=sbx"),
            "host=db user=sbx password = *** dbname=sbx");
  // Nothing to hide: unchanged.
  EXPECT_EQ(RedactDatabaseUrl("postgres://sbx@db:5432/sbx"), "postgres://sbx@db:5432/sbx");
  EXPECT_EQ(DisplayDatabase("/var/lib/sbx/sbx.db"), "/var/lib/sbx/sbx.db");
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    server_ = testing::SharedPostgresServer(&error);
    ASSERT_NE(server_, nullptr) << error;
    auto url = server_->NewDatabaseUrl();
    ASSERT_TRUE(url.ok()) << url.status();
    url_ = *url;
  }
  std::unique_ptr<PostgresStore> MustOpen() {
    auto store = PostgresStore::Open(url_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  // One value of a one-row query, run on a connection of the test's own.
  std::string Query(const std::string& sql) {
    PGconn* conn = PQconnectdb(url_.c_str());
    PGresult* r = PQexec(conn, sql.c_str());
    std::string out = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0
                          ? PQgetvalue(r, 0, 0)
                          : std::string("error: ") + PQerrorMessage(conn);
    PQclear(r);
    PQfinish(conn);
    return out;
  }

  testing::PostgresServer* server_ = nullptr;
  std::string url_;
};

TEST_F(PostgresStoreTest, AFailedConnectionNeverShowsThePassword) {
  // The server trusts loopback, so ask for a database that does not exist, and a port nobody
  // listens on: both errors name the database, neither the password.
  const std::string base = server_->base_url();  // postgres://postgres@127.0.0.1:PORT
  const std::string with_password =
      "postgres://postgres:s3cret-pw@" + base.substr(base.find('@') + 1) + "/no_such_db";
  auto missing = OpenStore(with_password);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), Not(HasSubstr("s3cret-pw")));
  EXPECT_THAT(missing.status().message(), HasSubstr("postgres:***@127.0.0.1"));

  auto unreachable = OpenStore("postgres://sbx:s3cret-pw@127.0.0.1:1/sbx?password=s3cret-pw");
  ASSERT_FALSE(unreachable.ok());
  EXPECT_EQ(unreachable.status().code(), api::StatusCode::kUnavailable);
  EXPECT_THAT(unreachable.status().message(), Not(HasSubstr("s3cret-pw")));
}

TEST_F(PostgresStoreTest, ConcurrentWritersInSeveralStoresGetGapFreeOrderedRevisions) {
  constexpr int kWriters = 3;
  constexpr int kApplies = 20;
  std::vector<std::unique_ptr<PostgresStore>> stores;
  for (int i = 0; i < kWriters; ++i) {
    stores.push_back(MustOpen());
    ASSERT_NE(stores.back(), nullptr);
  }
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        for (int i = 0; i < kApplies; ++i) {
          api::Object o =
              api::MakeObject(Kind::kSandbox, "w" + std::to_string(w) + "-" + std::to_string(i));
          o.sandbox_spec().image = "python:3.12";
          auto applied = stores[w]->Apply({o}, {});
          EXPECT_TRUE(applied.ok()) << applied.status();
        }
      });
    }
  }
  auto changes = stores[0]->WatchSince(0, 1000);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), static_cast<size_t>(kWriters * kApplies));
  for (size_t i = 0; i < changes->size(); ++i) {
    EXPECT_EQ((*changes)[i].revision, static_cast<int64_t>(i + 1));
    ASSERT_TRUE((*changes)[i].object.has_value());
    EXPECT_EQ((*changes)[i].object->metadata.resource_version, static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(*stores[1]->CurrentRevision(), kWriters * kApplies);
}

TEST_F(PostgresStoreTest, WaitForChangeWakesOnAnotherStoresCommit) {
  auto watcher = MustOpen();
  auto writer = MustOpen();
  ASSERT_NE(watcher, nullptr);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(watcher->WatchSince(0).ok());
  EXPECT_FALSE(watcher->WaitForChange(std::chrono::milliseconds(50)));
  ASSERT_TRUE(writer->Apply({api::MakeObject(Kind::kWorkspace, "ws")}, {}).ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(watcher->WaitForChange(std::chrono::seconds(10)));
  // Woken by the notification, not by the end of the wait.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  auto changes = watcher->WatchSince(0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->size(), 1u);
}

TEST_F(PostgresStoreTest, ReconnectsAfterTheServerDroppedItsConnections) {
  auto store = MustOpen();
  auto writer = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(store->WatchSince(0).ok());  // opens the listening connection too
  // What a PostgreSQL restart or failover does to the store's two connections.
  const std::string db = url_.substr(url_.rfind('/') + 1);
  ASSERT_NE(Query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                  "datname = '" +
                  db + "' AND pid <> pg_backend_pid()"),
            "0");
  // The first call may see the broken connection (kUnavailable, retryable); the next one works.
  auto first = store->Apply({api::MakeObject(Kind::kWorkspace, "ws")}, {});
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), api::StatusCode::kUnavailable) << first.status();
    ASSERT_TRUE(store->Apply({api::MakeObject(Kind::kWorkspace, "ws")}, {}).ok());
  }
  EXPECT_EQ(*store->CurrentRevision(), 1);
  // The listener notices its loss ("may have changed"), listens again, and is woken by the
  // next commit of another store.
  EXPECT_TRUE(store->WaitForChange(std::chrono::seconds(5)));
  EXPECT_FALSE(store->WaitForChange(std::chrono::milliseconds(50)));
  auto second = writer->Apply({api::MakeObject(Kind::kWorkspace, "other")}, {});
  if (!second.ok()) {
    ASSERT_TRUE(writer->Apply({api::MakeObject(Kind::kWorkspace, "other")}, {}).ok());
  }
  EXPECT_TRUE(store->WaitForChange(std::chrono::seconds(10)));
  auto changes = store->WatchSince(1);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->size(), 1u);
}

// Schema 8 adds the finished flag and marks the finished AgentTasks already stored: taken back to
// schema 7 (the column dropped), a reopen runs 8 again and the finished task is left out.
TEST_F(PostgresStoreTest, TheFinishedFlagMigrationMarksTheTasksAlreadyFinished) {
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    std::vector<api::Object> tasks;
    for (const char* name : {"done", "live"}) {
      api::Object t = api::MakeObject(Kind::kAgentTask, name);
      t.agent_task_spec().worker_ref = "w";
      t.agent_task_spec().input = "hi";
      tasks.push_back(t);
    }
    ASSERT_TRUE(store->Apply(tasks, {}).ok());
    auto done = store->Get({Kind::kAgentTask, "default", "done"});
    ASSERT_TRUE(done.ok()) << done.status();
    done->agent_task_status().phase = api::TaskPhase::kSucceeded;
    ASSERT_TRUE(store->UpdateStatus(*done).ok());
  }
  const std::string latest = std::to_string(PostgresStore::LatestSchemaVersion());
  EXPECT_EQ(Query("ALTER TABLE objects DROP COLUMN finished; "
                  "DELETE FROM schema_migrations WHERE version = " +
                  latest + " RETURNING version"),
            latest);
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ListOptions live_tasks;
  live_tasks.kind = Kind::kAgentTask;
  live_tasks.unfinished_only = true;
  auto live = store->List(live_tasks);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].metadata.name, "live");
}

TEST_F(PostgresStoreTest, MigrationsAreVersionedAndReopeningMigratesNothing) {
  ASSERT_NE(MustOpen(), nullptr);
  ASSERT_NE(MustOpen(), nullptr);
  const std::string latest = std::to_string(PostgresStore::LatestSchemaVersion());
  EXPECT_EQ(Query("SELECT count(*) || ':' || max(version) FROM schema_migrations"),
            latest + ":" + latest);
}

TEST_F(PostgresStoreTest, ANewerSchemaIsRefused) {
  ASSERT_NE(MustOpen(), nullptr);
  Query("INSERT INTO schema_migrations VALUES (99, 'later') RETURNING version");
  auto store = PostgresStore::Open(url_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 99"));
}

TEST_F(PostgresStoreTest, ADatabaseWithOtherTablesIsNotTakenOver) {
  Query("CREATE TABLE customers (id int); SELECT 1");
  auto store = PostgresStore::Open(url_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("not an sbx one"));
}

}  // namespace
}  // namespace sbx::controller
