// The AgentTask contracts of issue #13 (DESIGN §7.1) end to end, on the BUILT sbxd, sbxctl and
// sbx-emulator (both halves), each checked against the emulator's own records:
//   - deleting a running task cancels its turn at the service before the task goes;
//   - `sbxctl cancel` ends in Cancelled and `timeout` in TimedOut, both with the turn cancelled at
//     the service; the timeout counts from submission (a task queued behind a long one does not
//     time out early), and a queued task shows its queuePosition;
//   - the executor gone mid-task (sandbox stopped behind sbx's back while the task is queued,
//     executor killed while the turn runs): the task shows reason WaitingForExecutor, the worker
//     relaunches the executor and the task continues (in the same turn) and Succeeds; killed
//     while the input POST is held by the service: still one accepted input and one turn;
//   - a timeout while the service holds the input POST cuts the POST at the deadline;
//   - no credential (Databricks token, OpenAI app and executor keys) in the task log, status,
//     describe (artifacts' metadata), events, sbxd's logs or the SQLite files;
//   - workerSelector picks the least busy Ready worker with the labels.
// Outages are held open deterministically: the gated worker's executor command is a wrapper that
// waits while the file /home/sandbox-agent/gate exists (found next to its own bin/: the emulator
// maps /home/sandbox-agent only in command lines, not inside scripts) before it execs codex (so a
// relaunch stays unconnected until the test removes the file), and the emulator's hold_inputs holds
// the input POST like the service does while no executor is connected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpResult;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::ProcessAlive;
using sbx::testing::ReadFile;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr milliseconds kConverge{60'000};
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

bool Terminal(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled" || phase == "TimedOut";
}
std::string Phase(const json& t) { return t.value(json::json_pointer("/status/phase"), ""); }
std::string S(const json& o, const std::string& field) {
  return o.value(json::json_pointer("/status/" + field), "");
}
int64_t Pid(const json& w) {
  return w.value(json::json_pointer("/status/executor/pid"), int64_t{0});
}
// True when any condition of the object has this reason.
bool HasReason(const json& o, const std::string& reason) {
  for (const json& c : o.value(json::json_pointer("/status/conditions"), json::array())) {
    if (c.value("reason", "") == reason) {
      return true;
    }
  }
  return false;
}

class AgentTaskContractTest : public ::testing::Test {
 protected:
  // Recognisable secrets, looked for where they must never be.
  static SbxdHarness::Options HarnessOptions() {
    std::random_device rd;
    const std::string salt = std::to_string(rd() % 100000);
    return {.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
            .dir_prefix = "sbx-atc-itest-",
            .token = "dapi-TASKSECRET-d41d-" + salt,
            .app_key = "sk-app-TASKSECRET-8f00-" + salt,
            .executor_key = "sk-exec-TASKSECRET-b204-" + salt};
  }
  AgentTaskContractTest() : harness_(HarnessOptions()) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // Environments report `disconnected` 1 s after the executor's socket closed; sbxd checks the
  // executor every 2 s, so that a loss is noticed within seconds.
  void StartAll() {
    const sbx::api::Status started =
        harness_.StartEmulator({"--disconnected-after", "1s"}, kConverge);
    ASSERT_TRUE(started.ok()) << started;
    auto p = harness_.StartSbxd(
        "sbxd", {"--executor-status-interval", "2s", "--executor-probe-interval", "2s"});
    ASSERT_TRUE(p.ok()) << p.status();
  }

  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // An inline-sandbox worker with `labels`; waits until it is Ready. Returns its JSON.
  // `gated`: the executor command is the gate wrapper (see the top of the file).
  json Worker(const std::string& name, const std::map<std::string, std::string>& labels = {},
              bool gated = false) {
    std::string y =
        "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: " + name + "\n";
    if (!labels.empty()) {
      y += "  labels:\n";
      for (const auto& [k, v] : labels) {
        y += "    " + k + ": " + v + "\n";
      }
    }
    y += "spec:\n  sandbox:\n    inactivityTimeout: 1h\n    setup:\n"
         "      - name: workspace\n        run: " +
         json(std::string("mkdir -p ") + kWorkspace).dump() + "\n";
    if (gated) {
      y += "      - name: gate\n        run: " +
           json(std::string(
                    R"(mkdir -p /home/sandbox-agent/bin && printf '%s\n' '#!/bin/bash' )"
                    R"('gate=$(dirname "$0")/../gate' 'while [ -e "$gate" ]; do sleep 0.2; done' )"
                    R"('exec codex "$@"' > /home/sandbox-agent/bin/codex-gate && )"
                    R"(chmod +x /home/sandbox-agent/bin/codex-gate)"))
               .dump() +
           "\n";
    }
    y +=
        "  agent:\n    model: gpt-5-codex\n  workspaceDirectory: " + std::string(kWorkspace) + "\n";
    if (gated) {
      y += "  executor:\n    command: /home/sandbox-agent/bin/codex-gate\n";
    }
    ApplyYaml("worker-" + name, y);
    json w;
    EXPECT_TRUE(PollUntil(
        [&] {
          w = harness_.Get("agentworker", name);
          return w.is_object() && ConditionOf(w, "Ready").first == "True" &&
                 ConditionOf(w, "ExecutorConnected").first == "True" && Pid(w) > 0;
        },
        In(kConverge), milliseconds(200)))
        << w.dump(2);
    return w;
  }
  // `target` is "workerRef: NAME" or "workerSelector: {...}"; `extra` more spec lines.
  void Task(const std::string& name, const std::string& target, const std::string& input,
            const std::string& extra = "") {
    ApplyYaml("task-" + name,
              "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: " + name +
                  "\nspec:\n  " + target + "\n  input: " + json(input).dump() + "\n" + extra);
  }
  json Get(const std::string& kind, const std::string& name) { return harness_.Get(kind, name); }
  // Polls the task until `pred`; last_ keeps the last read for messages.
  bool WaitTask(const std::string& name, const std::function<bool(const json&)>& pred,
                milliseconds timeout = kConverge) {
    return PollUntil(
        [&] {
          last_ = Get("agenttask", name);
          return last_.is_object() && pred(last_);
        },
        In(timeout), milliseconds(100));
  }
  bool WaitPhase(const std::string& name, const std::string& phase) {
    return WaitTask(name, [&](const json& t) { return Phase(t) == phase; });
  }
  bool WaitTerminal(const std::string& name) {
    return WaitTask(name, [](const json& t) { return Terminal(Phase(t)); });
  }
  RunResult Sbxctl(std::vector<std::string> args) { return harness_.Sbxctl(std::move(args)); }

  // The emulator's view.
  json Turn(const std::string& session, const std::string& turn) {
    return json::parse(
        harness_.openai().Get("/v1/agents/sessions/" + session + "/turns/" + turn).body, nullptr,
        false);
  }
  size_t RootTurns(const std::string& session) {
    const json turns = json::parse(
        harness_.openai().Get("/v1/agents/sessions/" + session + "/turns?limit=100").body, nullptr,
        false);
    return turns.is_object() ? turns["data"].size() : 0;
  }
  json SessionRecord(const std::string& session) {
    const json state =
        json::parse(harness_.openai().Get("/_emulator/openai/state").body, nullptr, false);
    for (const json& s : state.value("sessions", json::array())) {
      if (s.value("id", "") == session) {
        return s;
      }
    }
    return json();
  }
  // Closes / opens the gate of a gated worker's sandbox: while closed, a (re)launched executor
  // waits unconnected.
  void CloseGate(const std::string& sandbox) {
    RunResult r = Sbxctl({"exec", "sandbox/" + sandbox, "--", "touch", "/home/sandbox-agent/gate"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void OpenGate(const std::string& sandbox) {
    ASSERT_TRUE(PollUntil(
        [&] {
          return Sbxctl(
                     {"exec", "sandbox/" + sandbox, "--", "rm", "-f", "/home/sandbox-agent/gate"})
                     .exit_code == 0;
        },
        In(kConverge), milliseconds(500)));
  }
  // SIGKILLs a worker's executor: only ever a process of an emulated sandbox.
  void KillExecutor(int64_t pid) {
    ASSERT_GT(pid, 0);
    ASSERT_THAT(ReadFile("/proc/" + std::to_string(pid) + "/environ"),
                HasSubstr("SBX_EMULATOR_SANDBOX="));
    ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  }

  SbxdHarness harness_;
  json last_;
};

// Deleting a running task: the finalizer sends the cancel, waits for the turn to end at the
// service, then lets the task go; the worker is free for the next task.
TEST_F(AgentTaskContractTest, DeletingARunningTaskCancelsItsTurnBeforeTheTaskGoes) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const json w = Worker("fixer");
  const std::string session = S(w, "sessionId");
  ASSERT_NO_FATAL_FAILURE(Task("long", "workerRef: fixer", "!sleep 10m"));
  ASSERT_TRUE(WaitTask("long", [](const json& t) {
    return Phase(t) == "Running" && !S(t, "turnId").empty();
  })) << last_.dump(2);
  const std::string turn = S(last_, "turnId");
  ASSERT_EQ(Turn(session, turn).value("status", ""), "in_progress");

  RunResult del = Sbxctl({"delete", "agenttask", "long"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  ASSERT_TRUE(PollUntil([&] { return Get("agenttask", "long").is_null(); }, In(kConverge),
                        milliseconds(100)))
      << "the task is still there: " << Get("agenttask", "long").dump(2);
  EXPECT_EQ(Turn(session, turn).value("status", ""), "cancelled");

  // The session is free again: the next task runs at once.
  ASSERT_NO_FATAL_FAILURE(Task("next", "workerRef: fixer", "$ echo next"));
  ASSERT_TRUE(WaitTerminal("next")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  EXPECT_EQ(RootTurns(session), 2u);
}

// cancel → Cancelled and timeout → TimedOut, each with the turn cancelled at the service; the
// timeout counts from submission: `queued` waits ~8 s behind `first` with a 4 s timeout and still
// Succeeds. While it waits it shows queuePosition 1.
TEST_F(AgentTaskContractTest, CancelAndTimeoutCancelTheTurnAndTimeoutCountsFromSubmission) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const std::string session = S(Worker("fixer"), "sessionId");

  ASSERT_NO_FATAL_FAILURE(Task("first", "workerRef: fixer", "!sleep 8s", "  timeout: 1m\n"));
  ASSERT_NO_FATAL_FAILURE(Task("queued", "workerRef: fixer", "$ echo queued", "  timeout: 4s\n"));
  ASSERT_TRUE(WaitTask("queued", [](const json& t) {
    return Phase(t) == "Queued" && t.value(json::json_pointer("/status/queuePosition"), 0) == 1;
  })) << last_.dump(2);
  RunResult wide = Sbxctl({"get", "agenttask", "queued", "-o", "wide", "--no-headers"});
  EXPECT_THAT(wide.out, HasSubstr("Queued")) << wide.out;
  ASSERT_TRUE(WaitTerminal("queued")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << "the timeout counted the time queued: " << last_.dump(2);
  ASSERT_TRUE(WaitTerminal("first")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);

  ASSERT_NO_FATAL_FAILURE(Task("slow", "workerRef: fixer", "!sleep 10m", "  timeout: 2s\n"));
  ASSERT_TRUE(WaitTerminal("slow")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "TimedOut") << last_.dump(2);
  ASSERT_FALSE(S(last_, "turnId").empty()) << last_.dump(2);
  EXPECT_EQ(Turn(session, S(last_, "turnId")).value("status", ""), "cancelled");

  ASSERT_NO_FATAL_FAILURE(Task("stopme", "workerRef: fixer", "!sleep 10m"));
  ASSERT_TRUE(WaitTask("stopme", [](const json& t) {
    return Phase(t) == "Running" && !S(t, "turnId").empty();
  })) << last_.dump(2);
  RunResult cancel = Sbxctl({"cancel", "agenttask/stopme"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  ASSERT_TRUE(WaitTerminal("stopme")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Cancelled") << last_.dump(2);
  EXPECT_EQ(Turn(session, S(last_, "turnId")).value("status", ""), "cancelled");

  // One turn per task, no more.
  EXPECT_EQ(RootTurns(session), 4u);
  EXPECT_EQ(SessionRecord(session).value("turns_started", -1), 4);
}

// The sandbox stopped behind sbx's back while a task waits in the queue: once it is the worker's
// next task it shows WaitingForExecutor (the gate keeps the relaunched executor unconnected), then
// the executor connects into the same session and the task Succeeds.
TEST_F(AgentTaskContractTest, AQueuedTaskWaitsForTheExecutorAfterTheSandboxWasStopped) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const json w = Worker("fixer", {}, /*gated=*/true);
  const std::string session = S(w, "sessionId");
  const int64_t old_pid = Pid(w);

  ASSERT_NO_FATAL_FAILURE(CloseGate("fixer"));  // the running executor is past its gate
  ASSERT_NO_FATAL_FAILURE(Task("ahead", "workerRef: fixer", "!sleep 8s"));
  ASSERT_NO_FATAL_FAILURE(Task("next", "workerRef: fixer", "$ echo back > back.txt",
                               "  collect:\n    - path: back.txt\n"));
  ASSERT_TRUE(WaitPhase("ahead", "Running")) << last_.dump(2);
  ASSERT_TRUE(WaitPhase("next", "Queued")) << last_.dump(2);

  HttpResult stop = harness_.databricks().Post("/_emulator/sandboxes/default-fixer/stop");
  ASSERT_EQ(stop.status, 200) << stop.body;
  ASSERT_TRUE(PollUntil([&] { return !ProcessAlive(old_pid); }, In(kConverge)));
  ASSERT_TRUE(WaitTask("next", [](const json& t) { return HasReason(t, "WaitingForExecutor"); }))
      << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Queued") << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(OpenGate("fixer"));

  ASSERT_TRUE(WaitTerminal("next")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  EXPECT_EQ(S(last_, "sessionId"), session);
  ASSERT_TRUE(last_["status"].contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(last_["status"]["artifacts"][0].value("bytes", 0), 5) << last_.dump(2);
  const json after = Get("agentworker", "fixer");
  EXPECT_EQ(S(after, "sessionId"), session);
  EXPECT_NE(Pid(after), old_pid);
  EXPECT_EQ(RootTurns(session), 2u);
}

// #24: while a task runs, its author re-applies the worker's Sandbox with the id of a sandbox sbx
// did not create for it (another Sandbox's, holding its own p.txt and a log where the worker's
// would be). The controller refuses the edit, and collect, exec and the executor log keep going
// to the sandbox sbx created.
TEST_F(AgentTaskContractTest, AnEditedSandboxIdRedirectsNeitherCollectNorExecNorTheExecutorLog) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const auto sandbox_yaml = [](const std::string& name, const std::string& extra) {
    return "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: " + name +
           "\nspec:\n  inactivityTimeout: 1h\n" + extra + "  setup:\n    - name: workspace\n" +
           "      run: " + json(std::string("mkdir -p ") + kWorkspace).dump() + "\n";
  };
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("victim", sandbox_yaml("victim", "")));
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("box", sandbox_yaml("box", "")));
  ASSERT_NO_FATAL_FAILURE(
      ApplyYaml("w",
                "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: w\nspec:\n"
                "  sandboxRef: box\n  agent:\n    model: gpt-5-codex\n  workspaceDirectory: " +
                    std::string(kWorkspace) + "\n"));
  json w;
  ASSERT_TRUE(PollUntil(
      [&] {
        w = Get("agentworker", "w");
        return w.is_object() && ConditionOf(w, "Ready").first == "True" &&
               ConditionOf(w, "ExecutorConnected").first == "True";
      },
      In(kConverge), milliseconds(200)))
      << w.dump(2);
  ASSERT_TRUE(PollUntil(
      [&] {
        const json v = Get("sandbox", "victim");
        return v.is_object() && ConditionOf(v, "Ready").first == "True";
      },
      In(kConverge), milliseconds(200)));
  RunResult plant = Sbxctl({"exec", "sandbox/victim", "--", "/bin/sh", "-c",
                            std::string("echo FOREIGN > ") + kWorkspace +
                                "/p.txt && mkdir -p /home/sandbox-agent/.sbx/w && "
                                "echo FOREIGN-LOG >> /home/sandbox-agent/.sbx/w/log"});
  ASSERT_EQ(plant.exit_code, 0) << plant.err;

  ASSERT_NO_FATAL_FAILURE(Task("t", "workerRef: w", "!sleep 3s\n$ echo mine > p.txt",
                               "  collect:\n    - path: p.txt\n"));
  ASSERT_TRUE(WaitPhase("t", "Running")) << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("box", sandbox_yaml("box", "  sandboxId: default-victim\n")));
  json box;
  ASSERT_TRUE(PollUntil(
      [&] {
        box = Get("sandbox", "box");
        return box.is_object() && HasReason(box, "ImmutableFieldChanged");
      },
      In(kConverge), milliseconds(100)))
      << box.dump(2);

  ASSERT_TRUE(WaitTerminal("t")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  ASSERT_TRUE(last_["status"].contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(last_["status"]["artifacts"][0].value("bytes", 0), 5)
      << "mine\\n, not FOREIGN\\n: " << last_.dump(2);
  RunResult cat = Sbxctl({"exec", "sandbox/box", "--", "cat", std::string(kWorkspace) + "/p.txt"});
  EXPECT_EQ(cat.out, "mine\n") << cat.err;
  RunResult logs = Sbxctl({"logs", "agentworker/w"});
  EXPECT_EQ(logs.out.find("FOREIGN-LOG"), std::string::npos) << logs.out;
  EXPECT_EQ(Sbxctl({"exec", "sandbox/victim", "--", "cat", std::string(kWorkspace) + "/p.txt"}).out,
            "FOREIGN\n");
}

// The executor killed while the turn runs (during its `!sleep`, before its command): the task
// shows WaitingForExecutor while the relaunch is gated, then the command runs through the
// relaunched executor in the same turn (exit 0, its file collected) and the task Succeeds.
TEST_F(AgentTaskContractTest, ARunningTaskWaitsForAKilledExecutorAndContinuesInTheSameTurn) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const json w = Worker("fixer", {}, /*gated=*/true);
  const std::string session = S(w, "sessionId");
  const int64_t old_pid = Pid(w);

  ASSERT_NO_FATAL_FAILURE(CloseGate("fixer"));  // the running executor is past its gate
  ASSERT_NO_FATAL_FAILURE(Task("run", "workerRef: fixer", "!sleep 4s\n$ echo after > after.txt",
                               "  collect:\n    - path: after.txt\n"));
  ASSERT_TRUE(WaitTask("run", [](const json& t) {
    return Phase(t) == "Running" && !S(t, "turnId").empty();
  })) << last_.dump(2);
  const std::string turn = S(last_, "turnId");
  ASSERT_NO_FATAL_FAILURE(KillExecutor(old_pid));
  ASSERT_TRUE(WaitTask("run", [](const json& t) { return HasReason(t, "WaitingForExecutor"); }))
      << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Running") << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(OpenGate("fixer"));

  ASSERT_TRUE(WaitTerminal("run")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  EXPECT_EQ(S(last_, "turnId"), turn);
  ASSERT_TRUE(last_["status"].contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(last_["status"]["artifacts"][0].value("bytes", 0), 6) << last_.dump(2);
  RunResult logs = Sbxctl({"logs", "agenttask/run"});
  EXPECT_THAT(logs.out, HasSubstr("[exit 0]")) << logs.out;
  EXPECT_NE(Pid(Get("agentworker", "fixer")), old_pid);
  EXPECT_EQ(RootTurns(session), 1u);
}

// The executor killed while the task's input POST is held by the service (hold_inputs: as when no
// executor is connected): the POST runs in the background, so the task shows WaitingForExecutor
// (Submitted) while the relaunch is gated; the worker relaunches the executor before the hold
// ends (40 s: room for the kill, the gate, the relaunch and the connect on a slow CI machine),
// the input is accepted once and the task Succeeds with one turn.
TEST_F(AgentTaskContractTest, ASubmittedTaskSurvivesAKilledExecutorAndStartsOneTurn) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const json w = Worker("fixer", {}, /*gated=*/true);
  const std::string session = S(w, "sessionId");
  const int64_t old_pid = Pid(w);
  ASSERT_NO_FATAL_FAILURE(CloseGate("fixer"));  // the running executor is past its gate

  HttpResult hold = harness_.openai().Post("/_emulator/openai/sessions/" + session + "/hold_inputs",
                                           R"({"count":1,"release_after_ms":40000})");
  ASSERT_EQ(hold.status, 200) << hold.body;
  ASSERT_NO_FATAL_FAILURE(Task("held", "workerRef: fixer", "$ echo held > held.txt",
                               "  collect:\n    - path: held.txt\n"));
  ASSERT_TRUE(WaitPhase("held", "Submitted")) << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(KillExecutor(old_pid));
  ASSERT_TRUE(WaitTask("held", [](const json& t) { return HasReason(t, "WaitingForExecutor"); }))
      << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Submitted") << last_.dump(2);
  ASSERT_NO_FATAL_FAILURE(OpenGate("fixer"));
  ASSERT_TRUE(PollUntil(
      [&] {
        const json aw = Get("agentworker", "fixer");
        return Pid(aw) != old_pid && ConditionOf(aw, "ExecutorConnected").first == "True";
      },
      In(kConverge), milliseconds(200)));
  ASSERT_TRUE(WaitTerminal("held")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  ASSERT_TRUE(last_["status"].contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(last_["status"]["artifacts"][0].value("bytes", 0), 5) << last_.dump(2);
  const json rec = SessionRecord(session);
  EXPECT_EQ(rec.value("accepted_inputs", -1), 1) << rec.dump();
  EXPECT_EQ(rec.value("turns_started", -1), 1) << rec.dump();
}

// A task whose deadline passes while the service still holds its input POST (hold_inputs, as
// while no executor is connected) ends TimedOut at its deadline, not when the hold ends: sbx cuts
// the POST, the service drops a cut POST's input (dropped_inputs, reference §2.1), no turn ever
// starts, and the worker takes the next task.
TEST_F(AgentTaskContractTest, ATaskWhoseInputIsHeldPastItsDeadlineEndsTimedOutAtTheDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const json w = Worker("fixer");
  const std::string session = S(w, "sessionId");
  HttpResult hold = harness_.openai().Post("/_emulator/openai/sessions/" + session + "/hold_inputs",
                                           R"({"count":1,"release_after_ms":15000})");
  ASSERT_EQ(hold.status, 200) << hold.body;
  const auto applied = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(Task("held", "workerRef: fixer", "$ echo held", "  timeout: 3s\n"));
  ASSERT_TRUE(WaitTerminal("held")) << last_.dump(2);
  const auto took = std::chrono::steady_clock::now() - applied;
  EXPECT_EQ(Phase(last_), "TimedOut") << last_.dump(2);
  EXPECT_LT(took, std::chrono::seconds(12)) << "it ended when the service's hold ended (15 s)";
  EXPECT_TRUE(S(last_, "turnId").empty()) << last_.dump(2);

  // The hold ends: the cut POST's input is dropped and never runs.
  ASSERT_TRUE(PollUntil([&] { return SessionRecord(session).value("dropped_inputs", 0) == 1; },
                        In(kConverge), milliseconds(200)))
      << SessionRecord(session).dump();
  const json rec = SessionRecord(session);
  EXPECT_EQ(rec.value("accepted_inputs", -1), 0) << rec.dump();
  EXPECT_EQ(rec.value("turns_started", -1), 0) << rec.dump();
  RunResult logs = Sbxctl({"logs", "agenttask/held"});
  EXPECT_THAT(logs.out, HasSubstr("the input POST the service held was cut")) << logs.out;

  ASSERT_NO_FATAL_FAILURE(Task("next", "workerRef: fixer", "$ echo next"));
  ASSERT_TRUE(WaitTerminal("next")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  EXPECT_EQ(RootTurns(session), 1u);
}

// No credential anywhere sbx keeps or shows a task: log, status, describe (artifacts' metadata),
// events, sbxd's own logs, the SQLite files.
TEST_F(AgentTaskContractTest, NoCredentialInTheTaskLogStatusArtifactsEventsLogsOrDatabase) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  Worker("fixer");
  ASSERT_NO_FATAL_FAILURE(Task("ok", "workerRef: fixer", "$ echo report > report.md\n$ ls",
                               "  collect:\n    - path: report.md\n    - path: missing.txt\n"));
  ASSERT_NO_FATAL_FAILURE(Task("bad", "workerRef: fixer", "!fail boom the harness gave up"));
  ASSERT_TRUE(WaitTerminal("ok")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  ASSERT_TRUE(WaitTerminal("bad")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Failed") << last_.dump(2);

  std::map<std::string, std::string> places;
  for (const std::string task : {"ok", "bad"}) {
    places["logs " + task] = Sbxctl({"logs", "agenttask/" + task}).out;
    places["get -o json " + task] = Sbxctl({"get", "agenttask", task, "-o", "json"}).out;
    places["describe " + task] = Sbxctl({"describe", "agenttask", task}).out;
    places["events " + task] = Sbxctl({"events", "agenttask/" + task}).out;
  }
  places["events"] = Sbxctl({"events"}).out;
  EXPECT_THAT(places["logs ok"], HasSubstr("report"));  // the places are not empty
  EXPECT_THAT(places["describe ok"], HasSubstr("report.md"));
  for (const auto& entry : fs::directory_iterator(harness_.dir() / "logs")) {
    if (entry.path().filename().string().rfind("sbxd", 0) == 0) {
      places[entry.path().string()] = ReadFile(entry.path());
    }
  }
  for (const auto& entry : fs::directory_iterator(harness_.db().parent_path())) {
    places[entry.path().string()] = ReadFile(entry.path());
  }
  const auto& o = harness_.options();
  for (const std::string secret : {o.token, o.app_key, o.executor_key}) {
    for (const auto& [where, text] : places) {
      EXPECT_THAT(text, Not(HasSubstr(secret))) << secret << " in " << where;
      // Nor a recognisable part of it.
      EXPECT_THAT(text, Not(HasSubstr("TASKSECRET"))) << "part of " << secret << " in " << where;
    }
  }
}

// workerSelector: among the Ready workers with the labels, the least busy one; a worker without
// the labels is never picked. A selector task that has to wait shows its queue position.
TEST_F(AgentTaskContractTest, WorkerSelectorPicksTheLeastBusyReadyWorkerWithTheLabels) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  Worker("a1", {{"team", "agents"}});
  Worker("a2", {{"team", "agents"}});
  Worker("b1", {{"team", "other"}});
  ASSERT_NO_FATAL_FAILURE(Task("busy", "workerRef: a1", "!sleep 10m"));
  ASSERT_TRUE(WaitPhase("busy", "Running")) << last_.dump(2);

  ASSERT_NO_FATAL_FAILURE(
      Task("sel", "workerSelector: {matchLabels: {team: agents}}", "!sleep 10m"));
  ASSERT_TRUE(WaitPhase("sel", "Running")) << last_.dump(2);
  EXPECT_EQ(S(last_, "worker"), "a2") << "a1 is busier: " << last_.dump(2);

  // Both a1 and a2 run one task now: the next selector task waits behind one of them.
  ASSERT_NO_FATAL_FAILURE(
      Task("sel2", "workerSelector: {matchLabels: {team: agents}}", "$ echo two"));
  ASSERT_TRUE(WaitTask("sel2", [](const json& t) {
    return Phase(t) == "Queued" && !S(t, "worker").empty();
  })) << last_.dump(2);
  EXPECT_THAT(S(last_, "worker"), ::testing::AnyOf("a1", "a2"));
  EXPECT_EQ(last_.value(json::json_pointer("/status/queuePosition"), 0), 1) << last_.dump(2);
  EXPECT_TRUE(HasReason(last_, "Queued")) << last_.dump(2);

  // Cancel the long one on sel2's worker: sel2 runs there and Succeeds.
  const std::string blocker = S(last_, "worker") == "a1" ? "busy" : "sel";
  ASSERT_EQ(Sbxctl({"cancel", "agenttask/" + blocker}).exit_code, 0);
  ASSERT_TRUE(WaitTerminal("sel2")) << last_.dump(2);
  EXPECT_EQ(Phase(last_), "Succeeded") << last_.dump(2);
  const json b1 = Get("agentworker", "b1");
  EXPECT_EQ(RootTurns(S(b1, "sessionId")), 0u) << "b1 lacks the label but ran a turn";
}

}  // namespace
