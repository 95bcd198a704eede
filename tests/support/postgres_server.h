// PostgresServer: a throwaway PostgreSQL 15 for tests (issue #17) — initdb into a temp dir, then
// `postgres -D DIR -k DIR -p PORT -c listen_addresses=127.0.0.1` on a free loopback port, polled
// for readiness with a deadline, stopped with SIGINT (fast shutdown) and removed at the end.
// initdb and postgres refuse to run as root: as root (here and in CI) both run as the `postgres`
// system user of Debian's package (runuser -u postgres, the temp dir chowned to it). Binaries
// come from $SBX_PG_BIN, default /usr/lib/postgresql/15/bin. Durability is off (fsync=off):
// nothing outlives the test.
//
// SharedPostgresServer() is the one server of a test binary, started on first use and stopped
// by a GoogleTest Environment; a test gets a fresh database of its own from NewDatabaseUrl().
// Under ctest, the fixture tests/support/postgres-fixture.sh runs one server for the whole run
// and writes its URL to the file $SBX_TEST_POSTGRES_STATE names; when that file exists, its
// server is used instead.
//
// Test-only. A PostgresServer is thread-compatible; SharedPostgresServer is thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"
#include "tests/support/process.h"

namespace sbx::testing {

class PostgresServer {
 public:
  // Starts a server; kFailedPrecondition when the binaries are missing, kDeadlineExceeded when it
  // is not ready within `timeout` (its log is in the message).
  static api::StatusOr<std::unique_ptr<PostgresServer>> Start(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Uses a server someone else runs (superuser URL without a database path, e.g.
  // postgres://postgres@127.0.0.1:5432); nothing is stopped at the end.
  static std::unique_ptr<PostgresServer> Existing(std::string base_url);
  // Started: fast shutdown (SIGINT), waits for it, removes the directory. Existing: drops the
  // databases NewDatabaseUrl created (WITH (FORCE)), so a long ctest run does not fill the disk.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // postgres://postgres@127.0.0.1:PORT (no database).
  const std::string& base_url() const { return base_url_; }
  // Creates a new, empty database (CREATE DATABASE t_<pid>_<n>) and returns its URL.
  api::StatusOr<std::string> NewDatabaseUrl();
  // How long Start took from initdb to the first accepted connection.
  std::chrono::milliseconds startup_time() const { return startup_time_; }

 private:
  PostgresServer() = default;

  std::string base_url_;
  std::filesystem::path root_;  // temp dir: data/ and the logs; empty for Existing
  std::unique_ptr<Process> process_;
  std::chrono::milliseconds startup_time_{0};
  std::vector<std::string> databases_;  // created by NewDatabaseUrl
};

// The test binary's server (see above); null, with the reason in `*error`, if it cannot start.
PostgresServer* SharedPostgresServer(std::string* error = nullptr);

}  // namespace sbx::testing
