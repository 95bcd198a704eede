#include "tests/support/postgres_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

namespace sbx::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

fs::path PgBin() {
  const char* env = std::getenv("SBX_PG_BIN");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path("/usr/lib/postgresql/15/bin");
}

// A loopback port nobody listens on right now (the server binds it a moment later; Start retries
// if someone else took it in between).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// As root, the command runs as the `postgres` user (initdb and postgres refuse root).
struct Command {
  fs::path binary;
  std::vector<std::string> args;
};
api::StatusOr<Command> AsPostgresUser(const fs::path& binary, std::vector<std::string> args) {
  if (::geteuid() != 0) {
    return Command{binary, std::move(args)};
  }
  fs::path runuser = "/usr/sbin/runuser";
  if (!fs::exists(runuser)) {
    runuser = "/sbin/runuser";
  }
  if (!fs::exists(runuser) || ::getpwnam("postgres") == nullptr) {
    return api::FailedPreconditionError(
        "running as root needs runuser and the postgres user (Debian's postgresql package)");
  }
  std::vector<std::string> full = {"-u", "postgres", "--", binary.string()};
  full.insert(full.end(), args.begin(), args.end());
  return Command{runuser, std::move(full)};
}

bool Ready(int port) {
  const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port) +
                               " user=postgres dbname=postgres connect_timeout=2";
  return PQping(conninfo.c_str()) == PQPING_OK;
}

}  // namespace

api::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(
    std::chrono::milliseconds timeout) {
  const auto started = std::chrono::steady_clock::now();
  const Deadline deadline = In(timeout);
  const fs::path bin = PgBin();
  for (const char* tool : {"initdb", "postgres"}) {
    if (!fs::exists(bin / tool)) {
      return api::FailedPreconditionError(
          (bin / tool).string() +
          " not found: install Debian's postgresql package (scripts/install-deps.sh) or set "
          "SBX_PG_BIN");
    }
  }
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  std::string dir_template = (fs::temp_directory_path() / "sbx-pg-XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) {
    return api::InternalError("mkdtemp " + dir_template + " failed");
  }
  server->root_ = dir_template;
  const fs::path data = server->root_ / "data";
  fs::create_directory(data);
  if (::geteuid() == 0) {
    // The postgres user must reach its data directory: the temp dir is traversable, the data
    // directory its own (initdb wants 0700).
    fs::permissions(server->root_,
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr || ::chown(data.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return api::FailedPreconditionError("cannot hand " + data.string() + " to the postgres user");
    }
  }
  fs::permissions(data, fs::perms::owner_all);

  ASSIGN_OR_RETURN(Command initdb,
                   AsPostgresUser(bin / "initdb",
                                  {"-D", data.string(), "-U", "postgres", "--auth=trust",
                                   "--no-sync", "--no-locale", "-E", "UTF8", "--no-instructions"}));
  RunResult init = RunProcess(initdb.binary, initdb.args, server->root_, {}, timeout);
  if (init.exit_code != 0) {
    return api::FailedPreconditionError("initdb failed (exit " + std::to_string(init.exit_code) +
                                        "): " + init.err + init.out);
  }

  std::string last_log;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int port = FreePort();
    ASSIGN_OR_RETURN(
        Command postgres,
        AsPostgresUser(bin / "postgres", {"-D", data.string(), "-k", data.string(), "-p",
                                          std::to_string(port), "-c", "listen_addresses=127.0.0.1",
                                          "-c", "fsync=off", "-c", "synchronous_commit=off", "-c",
                                          "full_page_writes=off", "-c", "max_connections=300"}));
    ProcessOptions options;
    options.args = postgres.args;
    options.stdout_path = server->root_ / "postgres.out";
    options.stderr_path = server->root_ / "postgres.log";
    ASSIGN_OR_RETURN(server->process_, Process::Start(postgres.binary, options));
    const bool ready =
        PollUntil([&] { return Ready(port) || !server->process_->Running(); }, deadline, 20ms) &&
        server->process_->Running();
    if (ready) {
      server->base_url_ = "postgres://postgres@127.0.0.1:" + std::to_string(port);
      server->startup_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - started);
      return server;
    }
    last_log = server->process_->Stderr();
    server->process_.reset();  // kills whatever is left of it
    if (last_log.find("Address already in use") == std::string::npos) {
      break;
    }
  }
  return api::DeadlineExceededError("postgres did not become ready: " + last_log);
}

std::unique_ptr<PostgresServer> PostgresServer::Existing(std::string base_url) {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->base_url_ = std::move(base_url);
  return server;
}

PostgresServer::~PostgresServer() {
  if (process_ != nullptr) {
    // SIGINT to the postmaster itself (the child may be runuser): fast shutdown.
    std::ifstream pid_file(root_ / "data" / "postmaster.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) {
      ::kill(pid, SIGINT);
    }
    if (!process_->Wait(In(30s))) {
      process_->Kill();
    }
    process_.reset();
  }
  if (!root_.empty()) {
    std::error_code ec;
    fs::remove_all(root_, ec);
  } else if (!databases_.empty()) {
    PGconn* conn = PQconnectdb((base_url_ + "/postgres").c_str());
    if (PQstatus(conn) == CONNECTION_OK) {
      for (const std::string& name : databases_) {
        PQclear(PQexec(conn, ("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").c_str()));
      }
    }
    PQfinish(conn);
  }
}

api::StatusOr<std::string> PostgresServer::NewDatabaseUrl() {
  const std::string name =
      "t_" + std::to_string(::getpid()) + "_" + std::to_string(databases_.size() + 1);
  PGconn* conn = PQconnectdb((base_url_ + "/postgres").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return api::UnavailableError("cannot connect to " + base_url_ + ": " + message);
  }
  PGresult* result = PQexec(conn, ("CREATE DATABASE " + name).c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  std::string message = PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  if (!ok) {
    return api::InternalError("CREATE DATABASE " + name + ": " + message);
  }
  databases_.push_back(name);
  return base_url_ + "/" + name;
}

namespace {

std::mutex shared_mu;
std::unique_ptr<PostgresServer> shared_server;  // Guarded by shared_mu.
std::string shared_error;                       // Guarded by shared_mu.
bool shared_tried = false;                      // Guarded by shared_mu.

// Stops the shared server after the last test of the binary.
class SharedServerEnvironment final : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard lock(shared_mu);
    shared_server.reset();
  }
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment());

}  // namespace

PostgresServer* SharedPostgresServer(std::string* error) {
  std::lock_guard lock(shared_mu);
  if (!shared_tried) {
    shared_tried = true;
    std::string url;
    if (const char* state = std::getenv("SBX_TEST_POSTGRES_STATE"); state != nullptr) {
      std::ifstream in(state);
      std::getline(in, url);
    }
    if (!url.empty()) {
      shared_server = PostgresServer::Existing(url);
    } else {
      auto started = PostgresServer::Start();
      if (started.ok()) {
        shared_server = std::move(started).value();
        std::cerr << "[postgres] started " << shared_server->base_url() << " in "
                  << shared_server->startup_time().count() << " ms\n";
      } else {
        shared_error = started.status().ToString();
      }
    }
  }
  if (shared_server == nullptr && error != nullptr) {
    *error = shared_error;
  }
  return shared_server.get();
}

}  // namespace sbx::testing
