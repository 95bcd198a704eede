// SbxdHarness: one test's sbx installation on loopback, for the integration tests that drive the
// BUILT binaries: a temp directory (logs/, state/sbx.db or Options::db, manifests/, emu/), an
// sbx-emulator process (the Databricks half, and the OpenAI half when an app key is given) with
// fast timings, any number of sbxd processes on the test's store, and sbxctl runs with the same
// environment. The environment of every child is hermetic: HOME is the temp directory (no
// ~/.databrickscfg of the machine is read), Databricks profile variables and SBX_DB are removed,
// and DATABRICKS_* / OPENAI_* point at the emulator once it runs.
//
// Also here: ConditionOf, a condition of an object as `sbxctl get -o json` prints it, and
// MetricSample, one sample of sbxd's /metrics text.
//
// The binaries' paths are the test target's SBXD_PATH, SBXCTL_PATH and SBX_EMULATOR_PATH
// (compile definitions), passed in through SbxdHarness::Binaries.
//
// Test-only; used from the test's thread (thread-compatible). The harness owns its processes:
// Finish (or the destructor) kills the sbxds, lets the emulator stop its sandboxes (SIGTERM, 5 s,
// then SIGKILL) and removes the directory unless told to keep it.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/status.h"
#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/process.h"

namespace sbx::testing {

// (status, reason) of condition `type` in an object's JSON; ("", "") when absent.
std::pair<std::string, std::string> ConditionOf(const nlohmann::json& object,
                                                const std::string& type);

// The value of the /metrics sample of `family` whose labels include every one of `labels`
// (`name="value"` each); -1 if there is none.
double MetricSample(const std::string& text, const std::string& family,
                    const std::vector<std::string>& labels);

class SbxdHarness {
 public:
  struct Binaries {
    std::filesystem::path sbxd;
    std::filesystem::path sbxctl;
    std::filesystem::path emulator;
  };
  struct Options {
    Binaries binaries;
    std::string dir_prefix = "sbx-itest-";  // of the temp directory's name
    std::string token{};                    // the emulator's Databricks token (required)
    std::string app_key{};       // OpenAI app key; empty = the emulator runs no OpenAI half
    std::string executor_key{};  // OpenAI executor key (with app_key)
    std::string db{};            // the store: a postgres:// URL; empty = <dir>/state/sbx.db
  };

  // Creates the temp directory (and its logs/). Starts nothing.
  explicit SbxdHarness(Options options);
  ~SbxdHarness();  // Finish(/*keep_dir=*/false) unless called before
  SbxdHarness(const SbxdHarness&) = delete;
  SbxdHarness& operator=(const SbxdHarness&) = delete;

  // Stops everything; keeps the directory (and says so on stderr) when `keep_dir`, e.g. when the
  // test failed. Idempotent.
  void Finish(bool keep_dir);

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& db() const { return db_; }
  const Options& options() const { return options_; }

  // Starts sbx-emulator on ephemeral ports with 200 ms PENDING/STOPPING delays, `extra_args`
  // appended, and waits (up to `timeout`) for it to print its URLs. kUnavailable (with its
  // stderr) if it does not start.
  [[nodiscard]] api::Status StartEmulator(std::vector<std::string> extra_args = {},
                                          std::chrono::milliseconds timeout = kStartTimeout);
  Process* emulator() const { return emulator_.get(); }
  const std::string& databricks_url() const { return databricks_url_; }
  const std::string& openai_url() const { return openai_url_; }  // ends in /v1
  // Clients of the running emulator: Databricks with the token; OpenAI (at the root, without
  // /v1) with the app key and the Agents beta header.
  HttpTestClient& databricks() const { return *databricks_; }
  HttpTestClient& openai() const { return *openai_; }

  // Starts an sbxd on the test's store: --db, --resync 30s, --sweep-interval 1s, --metrics-addr
  // 127.0.0.1:0, --lease-duration 3s, then `extra_args`. Its output goes to logs/<log_name>.*.
  // The harness owns it; the pointer stays valid until Finish.
  [[nodiscard]] api::StatusOr<Process*> StartSbxd(const std::string& log_name,
                                                  std::vector<std::string> extra_args = {});
  // The port sbxd's health/metrics server bound (from its startup log line); 0 if not seen.
  static int MetricsPort(Process& sbxd, std::chrono::milliseconds timeout = kStartTimeout);
  // The manifest of an AgentWorker `name` with an inline sandbox (inactivityTimeout 1h, a setup
  // step that makes `workspace_directory`), model gpt-5-codex, working in `workspace_directory`.
  // Ends with a newline, so that spec fields (e.g. "  executor:\n…") can follow.
  static std::string InlineWorkerYaml(const std::string& name,
                                      const std::string& workspace_directory);

  // The environment of sbxd and sbxctl (see the top of this file), plus what SetEnv added.
  std::map<std::string, std::string> Env() const;
  void SetEnv(const std::string& name, const std::string& value) { extra_env_[name] = value; }
  // Options for a child of this test: Env(), the removed variables, output in logs/<log_name>.*.
  ProcessOptions ChildOptions(const std::string& log_name, std::vector<std::string> args) const;

  // `sbxctl --db <store> args…` to completion.
  RunResult Sbxctl(std::vector<std::string> args,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Writes `yaml` to manifests/<name>.yaml and runs `sbxctl apply -f` on it.
  RunResult Apply(const std::string& name, const std::string& yaml) const;
  // `sbxctl get <kind> <name> -o json`, parsed; null when it fails.
  nlohmann::json Get(const std::string& kind, const std::string& name) const;

  static constexpr std::chrono::milliseconds kStartTimeout{30'000};

 private:
  Options options_;
  std::filesystem::path dir_;
  std::filesystem::path db_;
  std::unique_ptr<Process> emulator_;
  std::vector<std::unique_ptr<Process>> daemons_;
  std::string databricks_url_;
  std::string openai_url_;
  std::unique_ptr<HttpTestClient> databricks_;
  std::unique_ptr<HttpTestClient> openai_;
  std::map<std::string, std::string> extra_env_;
  bool finished_ = false;
};

}  // namespace sbx::testing
