// Power OnDemand end to end (DESIGN §7.2): the built sbxd and sbx-emulator (both halves), one
// worker whose inline sandbox has power OnDemand and idleStop 2s.
//  * Sleep/wake cycles with a kill -9 of sbxd in the middle of a wake (the start call slowed
//    down and in flight), in the middle of a stop (likewise), and between a task's submission and
//    its turn (the session holds the input): every task Succeeded, exactly one root turn per task
//    (the emulator's totals.turns_started), and the sandbox STOPPED again after idleStop.
//  * While it sleeps, the emulator counts no Databricks call but the LIST sweep's, and no
//    exec-sync.
//  * An external wake without a webhook: input posted straight to the session wakes the
//    sandbox through required_actions on the worker's status cadence; the turn runs; it sleeps
//    again after.
//  * Compute accounting (#28): the Sandbox's status.usage.runningSeconds, its ledger counter
//    and each task's computeSeconds against the emulator's RUNNING intervals, across sleep/wake
//    cycles and a kill -9 of sbxd while the sandbox runs a task.
//  * A wake whose executor relaunch fails, with a short --disconnected-after: reported, the task
//    waits, and runs once the executor can start.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/rfc3339.h"
#include "api/usage.h"
#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::MetricSample;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;

constexpr milliseconds kConverge{90'000};
constexpr char kSandboxId[] = "default-fixer";

class OnDemandTest : public ::testing::Test {
 protected:
  OnDemandTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-od-itest-",
                  .token = "dapi-SECRET-od-1",
                  .app_key = "sk-app-SECRET-od-2",
                  .executor_key = "sk-exec-SECRET-od-3"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  void StartSbxd() {
    auto p =
        harness_.StartSbxd("sbxd-" + std::to_string(++sbxds_),
                           {"--executor-status-interval", "1s", "--executor-probe-interval", "5s"});
    ASSERT_TRUE(p.ok()) << p.status();
    sbxd_ = *p;
  }
  void KillSbxd() {
    ASSERT_NE(sbxd_, nullptr);
    sbxd_->Kill();  // SIGKILL: no drain, no status write after this
    sbxd_ = nullptr;
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void ApplyTask(const std::string& name, const std::string& input) {
    ApplyYaml(name, "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: " + name +
                        "\nspec:\n  workerRef: fixer\n  input: " + json(input).dump() +
                        "\n  timeout: 3m\n");
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
  std::string EmulatorState() {
    const json s = json::parse(
        harness_.databricks().Get("/_emulator/sandboxes/" + std::string(kSandboxId)).body, nullptr,
        false);
    return s.is_object() ? s.value("state", "") : "";
  }
  json Counters() {
    return json::parse(harness_.databricks().Get("/_emulator/counters").body, nullptr, false);
  }
  int Counter(const std::string& endpoint) {
    const json c = Counters();
    return c.is_object() ? c.value(endpoint, 0) : -1;
  }
  int TurnsStarted() {
    const json s =
        json::parse(harness_.openai().Get("/_emulator/openai/state").body, nullptr, false);
    return s.is_object() ? s["totals"].value("turns_started", -1) : -1;
  }
  // Asleep: the emulator's sandbox STOPPED, the worker Ready=True reason Sleeping (which it says
  // from the moment the stop is sent), and the Sandbox Ready=True reason Sleeping (once sbx's
  // sweep has seen STOPPED: until then it says Stopping).
  bool WaitAsleep() {
    const auto sleeping = [](const json& o) {
      return ConditionOf(o, "Ready") ==
             std::make_pair(std::string("True"), std::string("Sleeping"));
    };
    return PollUntil([&] { return EmulatorState().find("STOPPED") != std::string::npos; },
                     In(kConverge), milliseconds(100)) &&
           Wait("agentworker", "fixer", sleeping) && Wait("sandbox", "fixer", sleeping);
  }
  bool WaitSucceeded(const std::string& task) {
    return Wait("agenttask", task,
                [](const json& t) {
                  const std::string phase = t["status"].value("phase", "");
                  return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled" ||
                         phase == "TimedOut";
                }) &&
           last_["status"].value("phase", "") == "Succeeded";
  }

  SbxdHarness harness_;
  Process* sbxd_ = nullptr;
  int sbxds_ = 0;
  json last_;
};

TEST_F(OnDemandTest, SleepWakeCyclesSurviveKillsAndSleepingCostsNoDatabricksCall) {
  const sbx::api::Status started = harness_.StartEmulator({}, kConverge);
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_NO_FATAL_FAILURE(ApplyYaml(
      "worker",
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: fixer\n"
      "spec:\n  sandbox:\n    power: OnDemand\n    idleStop: 2s\n    setup:\n"
      "      - name: workspace\n        run: mkdir -p /home/sandbox-agent/ws\n"
      "  agent:\n    model: gpt-5-codex\n  workspaceDirectory: /home/sandbox-agent/ws\n"));

  // Bring-up once (session, executor connected), then asleep idleStop later.
  ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
    return !w["status"].value("connectedEnvironmentId", "").empty();
  })) << last_.dump(2);
  const std::string session = last_["status"].value("sessionId", "");
  ASSERT_TRUE(WaitAsleep()) << EmulatorState() << last_.dump(2);
  RunResult get = harness_.Sbxctl({"get", "aw"});
  EXPECT_NE(get.out.find("SLEEPING"), std::string::npos) << get.out;

  // Asleep: nothing but LIST reaches Databricks, and nothing runs inside the sandbox.
  ASSERT_EQ(harness_.databricks().Call("DELETE", "/_emulator/counters").status, 200);
  const size_t execs_before =
      json::parse(harness_.databricks().Get("/_emulator/exec_log").body, nullptr, false).size();
  const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  PollUntil([] { return false; }, quiet_until, milliseconds(500));  // 6 status checks, 6 sweeps
  const json counters = Counters();
  ASSERT_TRUE(counters.is_object()) << counters.dump();
  for (const auto& [endpoint, count] : counters.items()) {
    if (endpoint.rfind("databricks.", 0) == 0 && endpoint != "databricks.list") {
      EXPECT_EQ(count.get<int>(), 0) << endpoint << " on a sleeping sandbox: " << counters.dump();
    }
  }
  EXPECT_GT(counters.value("databricks.list", 0), 0) << counters.dump();
  EXPECT_EQ(
      json::parse(harness_.databricks().Get("/_emulator/exec_log").body, nullptr, false).size(),
      execs_before);

  // 1. Kill -9 in the middle of a wake: the start call is slowed down and in flight.
  ASSERT_EQ(harness_.databricks()
                .Post("/_emulator/latency", R"({"endpoint":"databricks.start","latency":"2s"})")
                .status,
            200);
  ASSERT_EQ(harness_.databricks().Call("DELETE", "/_emulator/counters").status, 200);
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t1", "$ echo one > one.txt"));
  ASSERT_TRUE(
      PollUntil([&] { return Counter("databricks.start") >= 1; }, In(kConverge), milliseconds(20)))
      << Counters().dump();
  ASSERT_NO_FATAL_FAILURE(KillSbxd());
  ASSERT_EQ(harness_.databricks().Call("DELETE", "/_emulator/faults").status, 200);
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_TRUE(WaitSucceeded("t1")) << last_.dump(2);
  EXPECT_EQ(TurnsStarted(), 1);
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();

  // 2. Kill -9 in the middle of a stop: wake it for t2, and once it is idle again, kill sbxd
  // while its stop call is in flight; t3 arrives while sbxd is down.
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t2", "$ echo two > two.txt"));
  ASSERT_TRUE(WaitSucceeded("t2")) << last_.dump(2);
  ASSERT_EQ(harness_.databricks()
                .Post("/_emulator/latency", R"({"endpoint":"databricks.stop","latency":"2s"})")
                .status,
            200);
  ASSERT_EQ(harness_.databricks().Call("DELETE", "/_emulator/counters").status, 200);
  ASSERT_TRUE(
      PollUntil([&] { return Counter("databricks.stop") >= 1; }, In(kConverge), milliseconds(20)))
      << Counters().dump();
  ASSERT_NO_FATAL_FAILURE(KillSbxd());
  ASSERT_EQ(harness_.databricks().Call("DELETE", "/_emulator/faults").status, 200);
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t3", "$ echo three > three.txt"));
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_TRUE(WaitSucceeded("t3")) << last_.dump(2);
  EXPECT_EQ(TurnsStarted(), 3);
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();

  // 3. Kill -9 between the submission and the turn: the session holds the next input 3 s.
  ASSERT_EQ(harness_.openai()
                .Post("/_emulator/openai/sessions/" + session + "/hold_inputs",
                      R"({"count":1,"release_after_ms":3000})")
                .status,
            200);
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t4", "$ echo four > four.txt"));
  ASSERT_TRUE(Wait("agenttask", "t4", [](const json& t) {
    return t["status"].value("phase", "") == "Submitted";
  })) << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(KillSbxd());
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_TRUE(WaitSucceeded("t4")) << last_.dump(2);
  EXPECT_EQ(TurnsStarted(), 4) << "a task ran a second turn, or lost its one";
  // No sandbox left running after idleStop.
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();

  // 4. External wake, no webhook: input posted straight to the session (held by the service
  // until an executor connects) wakes the sandbox through required_actions.
  auto posted = std::async(std::launch::async, [&] {
    return harness_.openai()
        .Post("/v1/agents/sessions/" + session + "/events",
              R"({"events":[{"type":"agent.session.input.message","input":[{"role":"user",)"
              R"("content":[{"type":"input_text","text":"$ echo outside > outside.txt"}]}]}]})")
        .status;
  });
  ASSERT_TRUE(PollUntil([&] { return TurnsStarted() == 5; }, In(kConverge), milliseconds(100)))
      << EmulatorState();
  EXPECT_EQ(posted.get(), 202);
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();
  EXPECT_EQ(TurnsStarted(), 5);
}

// The emulator's RUNNING time of the sandbox within [from_ms, to_ms), and in all.
struct EmulatorRunning {
  int64_t total_ms = 0;
  bool open = false;  // an interval has no end: RUNNING now
  int64_t Within(int64_t from_ms, int64_t to_ms) const {
    int64_t sum = 0;
    for (const auto& [start, end] : intervals) {
      sum += std::max<int64_t>(0, std::min(end, to_ms) - std::max(start, from_ms));
    }
    return sum;
  }
  std::vector<std::pair<int64_t, int64_t>> intervals;
};

int64_t EpochMillisOf(const std::string& rfc3339) {
  return std::chrono::duration_cast<milliseconds>(
             sbx::api::ParseRfc3339(rfc3339).value().time_since_epoch())
      .count();
}

// The emulator moves update_time on each transition (the reference leaves it open): sbx then
// times a start by it rather than by its first sighting of RUNNING (a fast sweep up to 1 s
// later).
TEST_F(OnDemandTest, RunningSecondsMatchTheEmulatorsIntervalsAcrossSleepWakeAndKill9) {
  const sbx::api::Status started =
      harness_.StartEmulator({"--update-time-on-transitions"}, kConverge);
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_NO_FATAL_FAILURE(
      ApplyYaml("worker",
                "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: fixer\n"
                "spec:\n  sandbox:\n    power: OnDemand\n    idleStop: 2s\n"
                "  agent:\n    model: gpt-5-codex\n"));
  ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
    return !w["status"].value("connectedEnvironmentId", "").empty();
  })) << last_.dump(2);
  ASSERT_TRUE(WaitAsleep()) << EmulatorState() << last_.dump(2);

  // A wake for t1; a wake for t2, with sbxd killed (-9) while t2's turn runs and the sandbox
  // with it, and started again.
  // When the test first saw each task end (polling every 100 ms): with the status's completedAt
  // (second precision only), the latest the task can have ended.
  std::map<std::string, int64_t> seen_ended;
  auto now_ms = [] {
    return std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t1", "$ echo one > one.txt"));
  ASSERT_TRUE(WaitSucceeded("t1")) << last_.dump(2);
  seen_ended["t1"] = now_ms();
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t2", "$ sleep 3 && echo two > two.txt"));
  ASSERT_TRUE(Wait("agenttask", "t2", [](const json& t) {
    return t["status"].value("phase", "") == "Running";
  })) << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(KillSbxd());
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  ASSERT_TRUE(WaitSucceeded("t2")) << last_.dump(2);
  seen_ended["t2"] = now_ms();
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();

  const json emu =
      json::parse(harness_.databricks().Get("/_emulator/sandboxes/" + std::string(kSandboxId)).body,
                  nullptr, false);
  ASSERT_TRUE(emu.is_object() && emu["running_intervals"].is_array()) << emu.dump();
  EmulatorRunning running;
  for (const json& i : emu["running_intervals"]) {
    ASSERT_FALSE(i["end_ms"].is_null()) << "asleep, yet RUNNING: " << emu.dump();
    running.intervals.emplace_back(i["start_ms"].get<int64_t>(), i["end_ms"].get<int64_t>());
  }
  running.total_ms = emu["running_ms"].get<int64_t>();
  ASSERT_EQ(running.intervals.size(), 3u) << "bring-up, t1's wake, t2's wake: " << emu.dump();

  // The Sandbox: every interval counted, none twice across the restart, nothing left open.
  const json sb = harness_.Get("sandbox", "fixer");
  const json& usage = sb["status"]["usage"];
  EXPECT_FALSE(usage.contains("runningSince")) << sb.dump(2);
  const double counted_ms = usage.value("runningSeconds", -1.0) * 1000;
  std::cout << "RUNNING: sbx counted " << counted_ms << " ms, the emulator ran " << running.total_ms
            << " ms\n";  // reported for the record
  EXPECT_NEAR(counted_ms, static_cast<double>(running.total_ms), 1000) << sb.dump(2) << emu.dump();

  // Each task: its sandbox's RUNNING time from its creation (the sandbox slept then) to its end.
  // The end is known to the second (completedAt, truncated) and no later than the test's poll
  // saw it; the sandbox idles on RUNNING after it, so the poll alone (late by seconds on a busy
  // host) is no bound. computeSeconds must lie between the emulator's RUNNING time up to the
  // earliest and up to the latest possible end, give or take sbx's own sampling (500 ms).
  for (const char* task : {"t1", "t2"}) {
    const json t = harness_.Get("agenttask", task);
    const int64_t from = EpochMillisOf(t["metadata"].value("creationTimestamp", ""));
    const int64_t ended = EpochMillisOf(t["status"].value("completedAt", ""));
    const int64_t earliest = running.Within(from, ended);
    const int64_t latest = running.Within(from, std::min(ended + 1000, seen_ended[task]));
    const double compute_ms = t["status"]["usage"].value("computeSeconds", -1.0) * 1000;
    std::cout << task << ": computeSeconds " << compute_ms << " ms, the emulator's window "
              << earliest << "–" << latest << " ms\n";
    EXPECT_GE(compute_ms, static_cast<double>(earliest) - 500)
        << task << ": " << t.dump(2) << emu.dump();
    EXPECT_LE(compute_ms, static_cast<double>(latest) + 500)
        << task << ": " << t.dump(2) << emu.dump();
    EXPECT_FALSE(t["status"]["usage"].contains("attemptStartRunningSeconds")) << t.dump(2);
  }
  EXPECT_GT(harness_.Get("agenttask", "t2")["status"]["usage"].value("computeSeconds", 0.0), 3.0);

  // The ledger's counter (the workspace's compute) agrees: the pieces add up to the status.
  const int port = SbxdHarness::MetricsPort(*sbxd_, kConverge);
  ASSERT_GT(port, 0);
  double metric = -1;
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string text =
            HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
        metric = MetricSample(text, "sbx_sandbox_running_seconds_total", {"namespace=\"default\""});
        return std::abs(metric * 1000 - counted_ms) < 1;
      },
      In(kConverge), milliseconds(200)))
      << metric << " s counted in the ledger, " << counted_ms << " ms in the status";

  const RunResult wide = harness_.Sbxctl({"get", "sandbox", "fixer", "-o", "wide"});
  EXPECT_NE(wide.out.find("RUNNING"), std::string::npos) << wide.out;
  EXPECT_NE(wide.out.find(sbx::api::FormatSeconds(static_cast<int64_t>(counted_ms)) + "s"),
            std::string::npos)
      << wide.out;
}

// A wake whose executor relaunch fails (#25): the worker's wrapper exits 7 while the file
// /home/sandbox-agent/broken exists (the home directory outlives a stop). Run with a short
// --disconnected-after (1 s): the real service's window between an executor's loss and
// `disconnected` is unknown (reference §2.4 observed ~20 s, unconfirmed; the emulator's default is
// 20 s), so the test does not depend on it. The woken worker reports the failed relaunch
// (ExecutorRunning=False) instead of a connection left over from before the sleep, the task waits
// Queued without a turn, and once the wrapper works again the task runs its one turn and the
// sandbox sleeps again.
TEST_F(OnDemandTest, AWakeWhoseRelaunchFailsIsReportedAndTheTaskWaitsForTheExecutor) {
  const sbx::api::Status started =
      harness_.StartEmulator({"--disconnected-after", "1s"}, kConverge);
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_NO_FATAL_FAILURE(StartSbxd());
  const std::string wrapper =
      R"(mkdir -p /home/sandbox-agent/bin && printf '%s\n' '#!/bin/bash' )"
      R"('[ -e "$(dirname "$0")/../broken" ] && { echo "relaunch refused" >&2; exit 7; }' )"
      R"('exec codex "$@"' > /home/sandbox-agent/bin/codex-wrap && )"
      R"(chmod +x /home/sandbox-agent/bin/codex-wrap)";
  ASSERT_NO_FATAL_FAILURE(ApplyYaml(
      "worker",
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: fixer\n"
      "spec:\n  sandbox:\n    power: OnDemand\n    idleStop: 2s\n    setup:\n"
      "      - name: workspace\n        run: mkdir -p /home/sandbox-agent/ws\n"
      "      - name: wrapper\n        run: " +
          json(wrapper).dump() +
          "\n  agent:\n    model: gpt-5-codex\n  workspaceDirectory: /home/sandbox-agent/ws\n"
          "  executor:\n    command: /home/sandbox-agent/bin/codex-wrap\n"));
  ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
    return ConditionOf(w, "ExecutorConnected").first == "True";
  })) << last_.dump(2);
  // Break the relaunch while it is awake, then let it sleep.
  RunResult broke =
      harness_.Sbxctl({"exec", "sandbox/fixer", "--", "touch", "/home/sandbox-agent/broken"});
  ASSERT_EQ(broke.exit_code, 0) << broke.err;
  ASSERT_TRUE(WaitAsleep()) << EmulatorState() << last_.dump(2);

  // The task wakes it; the relaunch fails and is reported; no turn starts.
  ASSERT_NO_FATAL_FAILURE(ApplyTask("t1", "$ echo one > one.txt"));
  ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
    const auto running = ConditionOf(w, "ExecutorRunning");
    return running.first == "False" &&
           (running.second == "ExecutorExitedOnStart" || running.second == "ExecutorExited");
  })) << last_.dump(2);
  EXPECT_NE(ConditionOf(last_, "ExecutorConnected").first, "True") << last_.dump(2);
  const json task = harness_.Get("agenttask", "t1");
  EXPECT_EQ(task["status"].value("phase", ""), "Queued") << task.dump(2);
  EXPECT_EQ(TurnsStarted(), 0);

  // Mended: the next relaunch connects, the task runs its one turn, the sandbox sleeps again.
  ASSERT_TRUE(PollUntil(
      [&] {
        return harness_
                   .Sbxctl(
                       {"exec", "sandbox/fixer", "--", "rm", "-f", "/home/sandbox-agent/broken"})
                   .exit_code == 0;
      },
      In(kConverge), milliseconds(500)));
  ASSERT_TRUE(WaitSucceeded("t1")) << last_.dump(2);
  EXPECT_EQ(TurnsStarted(), 1);
  ASSERT_TRUE(WaitAsleep()) << EmulatorState();
}

}  // namespace
