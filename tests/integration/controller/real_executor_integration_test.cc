// The REAL `codex exec-server` (npm @openai/codex 0.171.0, installed by scripts/install-deps.sh;
// its path is compiled in as SBX_REAL_CODEX) driven by the built sbxd through the built
// sbx-emulator, end to end (issue #14 part 1). CTest label `real_executor` (and `integration`,
// so CI runs it). A missing binary FAILS these tests: install-deps guarantees it.
//
// a. Direct mode (`--remote-transport direct --aws-sigv4`, reference codex-exec-server.md §5): an
//    AgentWorker whose executor.command is the real binary, executor.args select direct mode and
//    executor.env carries dummy AWS credentials (the secret one through valueFrom) reaches Ready;
//    an AgentTask then runs `$ echo hello`, writes a file and reads it back, all through the real
//    codex (the emulated harness is its JSON-RPC client); killing the real executor relaunches it.
// b. Default (Noise) mode: the real codex registers and counts as connected (Ready), though the
//    emulator cannot run commands through it (§9.2).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::ProcessAlive;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kConverge{90'000};  // the real codex is a 300 MB binary on a busy machine
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

// `command` empty: the default (`codex`, the sandbox's built-in one).
std::string WorkerYaml(const std::string& name, const std::string& command,
                       const std::vector<std::string>& args,
                       const std::vector<std::string>& env_lines) {
  std::string executor;
  if (!command.empty()) {
    executor += "    command: " + json(command).dump() + "\n";
  }
  if (!args.empty()) {
    executor += "    args: " + json(args).dump() + "\n";
  }
  if (!env_lines.empty()) {
    executor += "    env:\n";
    for (const auto& line : env_lines) {
      executor += "      - " + line + "\n";
    }
  }
  return SbxdHarness::InlineWorkerYaml(name, kWorkspace) +
         (executor.empty() ? "" : "  executor:\n" + executor);
}

class RealExecutorTest : public ::testing::Test {
 protected:
  RealExecutorTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-real-itest-",
                  .token = "dapi-SECRET-real-1",
                  .app_key = "sk-app-SECRET-real-2",
                  .executor_key = "sk-exec-SECRET-real-3"}) {}

  void SetUp() override {
    // Not a skip: CI installs the binary (scripts/install-deps.sh), so its absence is a failure.
    ASSERT_TRUE(std::filesystem::exists(SBX_REAL_CODEX))
        << SBX_REAL_CODEX << " is missing: run scripts/install-deps.sh";
    RunResult v = sbx::testing::RunProcess(SBX_REAL_CODEX, {"--version"}, harness_.dir(), {},
                                           milliseconds(30'000));
    ASSERT_EQ(v.exit_code, 0) << v.err;
    ASSERT_THAT(v.out, HasSubstr("codex-cli 0.171.0"));
  }
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  void StartAll(std::vector<std::string> emulator_flags = {}) {
    emulator_flags.insert(emulator_flags.begin(), {"--disconnected-after", "1s"});
    const sbx::api::Status started = harness_.StartEmulator(emulator_flags, kConverge);
    ASSERT_TRUE(started.ok()) << started;
    harness_.SetEnv("SBX_SECRET_DEFAULT_AWS_SECRET", "dummy-aws-secret-for-loopback");
    auto p = harness_.StartSbxd(
        "sbxd", {"--executor-status-interval", "2s", "--executor-probe-interval", "2s"});
    ASSERT_TRUE(p.ok()) << p.status();
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  bool Wait(const std::string& kind, const std::string& name,
            const std::function<bool(const json&)>& pred) {
    return PollUntil(
        [&] {
          last_ = harness_.Get(kind, name);
          return last_.is_object() && pred(last_);
        },
        In(kConverge), milliseconds(100));
  }
  static bool Ready(const json& w) {
    return ConditionOf(w, "Ready").first == "True" &&
           ConditionOf(w, "ExecutorConnected").first == "True" && Pid(w) > 0;
  }
  static int64_t Pid(const json& w) {
    return w.value(json::json_pointer("/status/executor/pid"), int64_t{0});
  }
  static int Restarts(const json& w) {
    return w.value(json::json_pointer("/status/executor/restarts"), 0);
  }

  SbxdHarness harness_;
  json last_;
};

TEST_F(RealExecutorTest, DirectModeWorkerRunsATaskThroughTheRealCodexAndIsRelaunchedWhenKilled) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const auto applied_at = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(ApplyYaml(
      "worker",
      WorkerYaml(
          "real", SBX_REAL_CODEX,
          {"--remote-transport", "direct", "--aws-sigv4", "--aws-region", "us-east-1"},
          {R"({name: AWS_ACCESS_KEY_ID, value: AKIDSBXEMULATOR})",
           R"({name: AWS_SECRET_ACCESS_KEY, valueFrom: {env: SBX_SECRET_DEFAULT_AWS_SECRET}})",
           R"({name: RUST_LOG, value: info})"})));
  ASSERT_TRUE(Wait("agentworker", "real", Ready)) << last_.dump(2);
  std::cerr << "real codex (direct): apply → worker Ready in "
            << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                        applied_at)
                   .count()
            << " ms\n";
  const std::string env_id = last_["status"].value("environmentId", "");
  const std::string session = last_["status"].value("sessionId", "");
  // It is the real binary that connected, over the direct transport.
  EXPECT_TRUE(PollUntil(
      [&] {
        return harness_.Sbxctl({"logs", "agentworker/real"})
                   .out.find("direct exec-server connected") != std::string::npos;
      },
      In(kConverge), milliseconds(200)))
      << harness_.Sbxctl({"logs", "agentworker/real"}).out;

  // A task: echo, write a file, read it back — every command a process/start on the real codex.
  ASSERT_NO_FATAL_FAILURE(
      ApplyYaml("task",
                "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: hello\n"
                "spec:\n  workerRef: real\n  input: |\n    $ echo hello\n"
                "    $ printf 'written by codex\\n' > note.txt\n    $ cat note.txt\n"
                "  timeout: 2m\n  collect:\n    - path: note.txt\n"));
  ASSERT_TRUE(Wait("agenttask", "hello", [](const json& t) {
    const std::string phase = t["status"].value("phase", "");
    return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled" || phase == "TimedOut";
  })) << last_.dump(2);
  const json& st = last_["status"];
  EXPECT_EQ(st.value("phase", ""), "Succeeded") << last_.dump(2);
  EXPECT_EQ(st.value("sessionId", ""), session);
  EXPECT_EQ(st.value("commands", 0), 3) << last_.dump(2);
  ASSERT_TRUE(st.contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(st["artifacts"][0].value("path", ""), "note.txt");
  EXPECT_EQ(st["artifacts"][0].value("bytes", 0), 17) << last_.dump(2);
  EXPECT_THAT(st.value(json::json_pointer("/result/message"), std::string()),
              HasSubstr("exited with code 0"));
  // The task's log shows each command's output as the real codex streamed it.
  RunResult log = harness_.Sbxctl({"logs", "agenttask/hello"});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(log.out, HasSubstr("hello"));
  EXPECT_THAT(log.out, HasSubstr("written by codex"));
  // The file is in the sandbox.
  RunResult cat =
      harness_.Sbxctl({"exec", "sandbox/real", "--", "cat", std::string(kWorkspace) + "/note.txt"});
  EXPECT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out, "written by codex\n");

  // Killing the real executor relaunches it: restarts + 1, a new pid, Ready again.
  ASSERT_TRUE(Wait("agentworker", "real", Ready)) << last_.dump(2);
  const int64_t old_pid = Pid(last_);
  const int restarts = Restarts(last_);
  ASSERT_TRUE(ProcessAlive(static_cast<pid_t>(old_pid)));
  ASSERT_EQ(::kill(static_cast<pid_t>(old_pid), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(Wait("agentworker", "real", [&](const json& w) {
    return Ready(w) && Restarts(w) == restarts + 1 && Pid(w) != old_pid;
  })) << last_.dump(2);
  std::cerr << "real codex (direct): killed → relaunched and connected in "
            << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                        killed_at)
                   .count()
            << " ms\n";
  EXPECT_TRUE(ProcessAlive(static_cast<pid_t>(Pid(last_))));
  EXPECT_EQ(last_["status"].value("environmentId", ""), env_id);
}

// The real codex as the sandboxes' built-in `codex` (sbx-emulator --builtin-codex), launched by
// the default executor command in its default (Noise) mode.
TEST_F(RealExecutorTest, DefaultNoiseModeRealCodexCountsAsConnected) {
  ASSERT_NO_FATAL_FAILURE(StartAll({"--builtin-codex", SBX_REAL_CODEX}));
  const auto applied_at = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("worker", WorkerYaml("noise", "", {}, {})));
  ASSERT_TRUE(Wait("agentworker", "noise", Ready)) << last_.dump(2);
  std::cerr << "real codex (noise): apply → worker Ready in "
            << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                        applied_at)
                   .count()
            << " ms\n";
  const std::string env_id = last_["status"].value("environmentId", "");
  const json env =
      json::parse(harness_.openai().Get("/v1/agents/environments/" + env_id).body, nullptr, false);
  ASSERT_TRUE(env.is_object());
  EXPECT_EQ(env.value("status", ""), "connected") << env.dump();
}

}  // namespace
