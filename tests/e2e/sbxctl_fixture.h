// The fixture of the sbxctl e2e tests: a temp directory with its own database, and `sbxctl …`
// run as a real process (stdin from a string, stdout/stderr captured, extra environment
// variables), plus the manifests the tests apply. Not thread-safe: one per test.
#pragma once

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/support/process.h"

extern char** environ;

namespace sbx_e2e {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

using sbx::testing::WriteFile;
// Files the test shares with its children (tests/support/process.h).
inline std::string ReadAll(const fs::path& p) { return sbx::testing::ReadFile(p); }

inline int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

class SbxctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("sbxctl-e2e-" + std::to_string(rd()));
    fs::create_directories(dir_);
    db_ = dir_ / "state" / "sbx.db";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts sbxctl with `args` (after --db), stdin from `input`; returns the pid.
  pid_t Start(const std::vector<std::string>& args, const std::string& input, int n) {
    const fs::path in = dir_ / ("stdin" + std::to_string(n));
    WriteFile(in, input);
    std::vector<std::string> argv_s = {SBXCTL_PATH};
    if (with_db_) {
      argv_s.insert(argv_s.end(), {"--db", db_.string()});
    }
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, in.c_str(), O_RDONLY, 0);
    const std::string out = (dir_ / ("stdout" + std::to_string(n))).string();
    const std::string err = (dir_ / ("stderr" + std::to_string(n))).string();
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // The test's environment, with env_ set on top.
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (env_.count(entry.substr(0, entry.find('='))) == 0) {
        env_s.push_back(entry);
      }
    }
    for (const auto& [name, value] : env_) {
      env_s.push_back(name + "=" + value);
    }
    std::vector<char*> envp;
    for (std::string& e : env_s) {
      envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, SBXCTL_PATH, &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "cannot start " << SBXCTL_PATH;
    return pid;
  }

  Result Finish(pid_t pid, int n) {
    Result r;
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadAll(dir_ / ("stdout" + std::to_string(n)));
    r.err = ReadAll(dir_ / ("stderr" + std::to_string(n)));
    return r;
  }

  Result Run(const std::vector<std::string>& args, const std::string& input = "") {
    const int n = ++runs_;
    return Finish(Start(args, input, n), n);
  }

  // Everything in the store, as JSON text (for before/after comparisons).
  std::string Snapshot() {
    const Result r = Run({"get", "ws,sb,aw", "-A", "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  std::unique_ptr<sbx::controller::SqliteStore> OpenStore() {
    auto store = sbx::controller::SqliteStore::Open(db_.string());
    EXPECT_TRUE(store.ok()) << store.status();
    return std::move(store).value();
  }

  // Sets a condition on a stored object as the controller would.
  void SetCondition(const std::string& name, const std::string& type,
                    sbx::api::ConditionStatus status, const std::string& reason) {
    auto store = OpenStore();
    auto object = store->Get({sbx::api::Kind::kSandbox, "default", name});
    ASSERT_TRUE(object.ok()) << object.status();
    sbx::api::Condition c;
    c.type = type;
    c.status = status;
    c.reason = reason;
    c.message = reason + " happened";
    c.observed_generation = object->metadata.generation;
    sbx::api::SetCondition(object->conditions(), c, "2026-01-01T00:00:00Z");
    object->sandbox_status().observed_generation = object->metadata.generation;
    object->sandbox_status().state = "RUNNING";
    ASSERT_TRUE(store->UpdateStatus(*object).ok());
  }

  fs::path dir_;
  fs::path db_;
  int runs_ = 0;
  // Environment variables set for every sbxctl the test runs (e.g. EDITOR).
  std::map<std::string, std::string> env_;
  // Whether sbxctl gets `--db <the test's database>` (false: a test of --server).
  bool with_db_ = true;
};

inline std::string SandboxManifest(const std::string& name, const std::string& display_name) {
  return "apiVersion: sbx.dev/v1alpha1\n"
         "kind: Sandbox\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "  labels:\n"
         "    app: demo\n"
         "spec:\n"
         "  displayName: " +
         display_name +
         "\n"
         "  inactivityTimeout: 15m\n";
}

inline std::string WorkerManifest(const std::string& name, const std::string& sandbox) {
  return "apiVersion: sbx.dev/v1alpha1\n"
         "kind: AgentWorker\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n"
         "  sandboxRef: " +
         sandbox +
         "\n"
         "  agent:\n"
         "    model: gpt-5\n"
         "    instructions: Be helpful.\n";
}

}  // namespace sbx_e2e
