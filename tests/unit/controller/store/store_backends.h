// The store conformance tests' two backends: every TEST_P over StoreBackends() runs once against
// SqliteStore (":memory:") and once against PostgresStore (a fresh database on the test
// binary's throwaway PostgreSQL 15, tests/support/postgres_server.h). Header-only, test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "controller/base/clock.h"
#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"
#include "tests/support/postgres_server.h"

namespace sbx::controller {

// The options both stores take.
struct TestStoreOptions {
  Clock* clock = nullptr;
  int max_events_per_object = 100;
  int64_t task_log_max_bytes = int64_t{1} << 20;
};

inline auto StoreBackends() { return ::testing::Values(std::string("sqlite"), "postgres"); }

// "sqlite" → SqliteStore on ":memory:"; "postgres" → PostgresStore on a new database.
inline api::StatusOr<std::unique_ptr<Store>> OpenTestStore(const std::string& backend,
                                                           const TestStoreOptions& options = {}) {
  if (backend == "sqlite") {
    SqliteStore::Options sqlite;
    sqlite.clock = options.clock;
    sqlite.max_events_per_object = options.max_events_per_object;
    sqlite.task_log_max_bytes = options.task_log_max_bytes;
    ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> store, SqliteStore::Open(":memory:", sqlite));
    return std::unique_ptr<Store>(std::move(store));
  }
  std::string error;
  testing::PostgresServer* server = testing::SharedPostgresServer(&error);
  if (server == nullptr) {
    return api::UnavailableError("no PostgreSQL for the tests: " + error);
  }
  ASSIGN_OR_RETURN(std::string url, server->NewDatabaseUrl());
  PostgresStore::Options pg;
  pg.clock = options.clock;
  pg.max_events_per_object = options.max_events_per_object;
  pg.task_log_max_bytes = options.task_log_max_bytes;
  ASSIGN_OR_RETURN(std::unique_ptr<PostgresStore> store, PostgresStore::Open(url, pg));
  return std::unique_ptr<Store>(std::move(store));
}

// Two stores on ONE database, as two sbxd replicas have: "sqlite" → two SqliteStores on a file
// `sqlite_path` (its directory must exist); "postgres" → two PostgresStores on a new database.
inline api::StatusOr<std::pair<std::unique_ptr<Store>, std::unique_ptr<Store>>> OpenTestStorePair(
    const std::string& backend, const std::string& sqlite_path) {
  std::pair<std::unique_ptr<Store>, std::unique_ptr<Store>> pair;
  if (backend == "sqlite") {
    ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> a, SqliteStore::Open(sqlite_path, {}));
    ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> b, SqliteStore::Open(sqlite_path, {}));
    pair.first = std::move(a);
    pair.second = std::move(b);
    return pair;
  }
  std::string error;
  testing::PostgresServer* server = testing::SharedPostgresServer(&error);
  if (server == nullptr) {
    return api::UnavailableError("no PostgreSQL for the tests: " + error);
  }
  ASSIGN_OR_RETURN(std::string url, server->NewDatabaseUrl());
  ASSIGN_OR_RETURN(std::unique_ptr<PostgresStore> a, PostgresStore::Open(url, {}));
  ASSIGN_OR_RETURN(std::unique_ptr<PostgresStore> b, PostgresStore::Open(url, {}));
  pair.first = std::move(a);
  pair.second = std::move(b);
  return pair;
}

// The statistics both stores keep (SqliteStore::Stats and PostgresStore::Stats alike).
inline api::StatusOr<SqliteStore::Stats> ReadTestStoreStats(Store& store) {
  if (auto* sqlite = dynamic_cast<SqliteStore*>(&store)) {
    return sqlite->ReadStats();
  }
  auto* pg = dynamic_cast<PostgresStore*>(&store);
  if (pg == nullptr) {
    return api::InternalError("not a SqliteStore or PostgresStore");
  }
  ASSIGN_OR_RETURN(PostgresStore::Stats s, pg->ReadStats());
  return SqliteStore::Stats{s.revision, s.compacted_revision, s.changes, s.events};
}

inline std::string BackendName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace sbx::controller
