// AgentPool end to end (DESIGN §8.1): the built sbxd, sbxctl and sbx-emulator (both halves). A
// pool scaled to zero comes up for a batch of tasks, runs each on one replica at a time, never
// more replicas than max, and goes back to zero sandboxes once the work is done; the CLI's pool
// verbs (run --pool, scale, get ap) and their errors; PerTask replicas on OnDemand sandboxes,
// which sleep between tasks and are woken by the next one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
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
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;

constexpr milliseconds kConverge{120'000};
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

std::string PoolYaml(int max, const std::string& scale_down_after,
                     const std::string& session = "Shared") {
  return "apiVersion: sbx.dev/v1alpha1\nkind: AgentPool\nmetadata:\n  name: fixers\nspec:\n"
         "  template:\n    metadata:\n      labels: {team: a}\n    spec:\n"
         "      sandbox:\n        inactivityTimeout: 1h\n        setup:\n"
         "          - name: workspace\n            run: " +
         json(std::string("mkdir -p ") + kWorkspace).dump() +
         "\n      agent:\n        model: gpt-5-codex\n      workspaceDirectory: " + kWorkspace +
         "\n  replicas: {min: 0, max: " + std::to_string(max) +
         "}\n  scaleDownAfter: " + scale_down_after + "\n  session: " + session + "\n";
}

class AgentPoolTest : public ::testing::Test {
 protected:
  AgentPoolTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-ap-itest-",
                  .token = "dapi-SECRET-ap-1",
                  .app_key = "sk-app-SECRET-ap-2",
                  .executor_key = "sk-exec-SECRET-ap-3"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // The emulator and sbxd, with the executor looked at every 2 s.
  void StartAll() {
    ASSERT_TRUE(harness_.StartEmulator({}, kConverge).ok());
    ASSERT_TRUE(harness_
                    .StartSbxd("sbxd", {"--executor-status-interval", "2s",
                                        "--executor-probe-interval", "2s"})
                    .ok());
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  json Get(const std::string& kind, const std::string& name) { return harness_.Get(kind, name); }
  // Sandboxes that exist in the emulator.
  size_t CloudSandboxes() {
    const json list = json::parse(
        harness_.databricks().Get("/api/2.0/sandboxes?page_size=100").body, nullptr, false);
    return list.is_object() ? list.value("sandboxes", json::array()).size() : 0;
  }
  // Polls until every task in `names` has a final phase; their objects by name. `each_poll` runs
  // once per poll (to sample something meanwhile).
  std::map<std::string, json> WaitForTasks(const std::vector<std::string>& names,
                                           const std::function<void()>& each_poll = {}) {
    std::map<std::string, json> done;
    EXPECT_TRUE(PollUntil(
        [&] {
          if (each_poll) {
            each_poll();
          }
          for (const std::string& name : names) {
            last_ = Get("agenttask", name);
            const std::string phase =
                last_.is_object() ? last_.value("status", json::object()).value("phase", "") : "";
            if (phase == "Succeeded" || phase == "Failed" || phase == "TimedOut" ||
                phase == "Cancelled") {
              done[name] = last_;
            }
          }
          return done.size() == names.size();
        },
        In(kConverge), milliseconds(250)))
        << last_.dump(2);
    return done;
  }

  // Polls until `pool` has no replica and the cloud no sandbox (last_: the pool).
  bool WaitScaledToZero(const std::string& pool) {
    return PollUntil(
        [&] {
          last_ = Get("agentpool", pool);
          return last_.is_object() &&
                 last_.value("status", json::object()).value("replicas", 0) == 0 &&
                 CloudSandboxes() == 0;
        },
        In(kConverge), milliseconds(250));
  }

  SbxdHarness harness_;
  json last_;
};

TEST_F(AgentPoolTest, ScalesFromZeroForABatchRunsOneTaskPerReplicaAndScalesBackToZero) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  // Replicas stay while the test looks at their sessions; then scaleDownAfter drops to 1s.
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", PoolYaml(/*max=*/2, "10m")));
  ASSERT_TRUE(PollUntil(
      [&] {
        last_ = Get("agentpool", "fixers");
        return ConditionOf(last_, "Ready") ==
               std::make_pair(std::string("True"), std::string("ScaledToZero"));
      },
      In(kConverge), milliseconds(200)))
      << last_.dump(2);
  EXPECT_EQ(CloudSandboxes(), 0u);  // nothing runs without work

  std::string tasks;
  for (int i = 0; i < 4; ++i) {
    tasks += "---\napiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: t" +
             std::to_string(i) + "\nspec:\n  poolRef: fixers\n  input: \"$ echo " +
             std::to_string(i) + " > out.txt\"\n  timeout: 2m\n  collect:\n    - path: out.txt\n";
  }
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("tasks", tasks));
  size_t most_replicas = 0;
  const std::map<std::string, json> done = WaitForTasks({"t0", "t1", "t2", "t3"}, [&] {
    const json pool = Get("agentpool", "fixers");
    if (pool.is_object()) {
      const json st = pool.value("status", json::object());
      most_replicas = std::max(most_replicas, st.value("replicas", size_t{0}));
    }
  });
  ASSERT_EQ(done.size(), 4u);
  EXPECT_LE(most_replicas, 2u);  // never above max

  // Each task on one replica of the pool, in that replica's session, one turn each; no replica
  // ran two tasks at once.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> spans;  // by replica
  std::map<std::string, int> turns_expected;
  for (const auto& [name, task] : done) {
    const json st = task.value("status", json::object());
    EXPECT_EQ(st.value("phase", ""), "Succeeded") << task.dump(2);
    const std::string replica = st.value("worker", "");
    EXPECT_EQ(replica.rfind("fixers-", 0), 0u) << task.dump(2);
    EXPECT_EQ(replica.size(), std::string("fixers-").size() + 5);
    spans[replica].emplace_back(st.value("submittedAt", ""), st.value("completedAt", ""));
    ++turns_expected[st.value("sessionId", "")];
    const json artifacts = st.value("artifacts", json::array());
    ASSERT_EQ(artifacts.size(), 1u) << task.dump(2);
    EXPECT_EQ(artifacts.at(0).value("bytes", 0), 2) << task.dump(2);
  }
  for (auto& [replica, list] : spans) {
    std::sort(list.begin(), list.end());
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_LE(list[i - 1].second, list[i].first) << replica << " ran two tasks at once";
    }
  }
  for (const auto& [session, n] : turns_expected) {
    const json turns = json::parse(
        harness_.openai().Get("/v1/agents/sessions/" + session + "/turns").body, nullptr, false);
    ASSERT_TRUE(turns.is_object()) << session;
    EXPECT_EQ(static_cast<int>(turns.value("data", json::array()).size()), n) << turns.dump(2);
  }

  // The one-liner: a free replica runs it at once.
  const RunResult run =
      harness_.Sbxctl({"run", "--pool", "fixers", "--input", "$ echo hi > out.txt", "--collect",
                       "out.txt", "-o", (harness_.dir() / "out").string()},
                      kConverge);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("Succeeded"), std::string::npos) << run.out;

  // No work left: after scaleDownAfter every replica and its sandbox goes.
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", PoolYaml(/*max=*/2, "1s")));
  ASSERT_TRUE(WaitScaledToZero("fixers"))
      << last_.dump(2) << "\nsandboxes in the cloud: " << CloudSandboxes();
  EXPECT_EQ(ConditionOf(last_, "Ready").second, "ScaledToZero");
}

// session: PerTask (issue #27 item 4): each task runs in a session of its own, in
// /home/sandbox-agent/tasks/<uid> with an executor of its own; collect reads there; afterwards
// the session is deleted and the directory removed, unless keepWorkspace.
TEST_F(AgentPoolTest, PerTaskRunsEachTaskInItsOwnSessionAndDirectoryAndClosesThem) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", PoolYaml(/*max=*/1, "10m", "PerTask")));
  ASSERT_EQ(harness_.openai().Call("DELETE", "/_emulator/counters").status, 200);
  std::string tasks;
  for (int i = 0; i < 3; ++i) {
    tasks += "---\napiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: p" +
             std::to_string(i) + "\nspec:\n  poolRef: fixers\n  input: \"$ echo p" +
             std::to_string(i) + " > out.txt\"\n" + "  timeout: 2m\n" +
             (i == 2 ? "  keepWorkspace: true\n" : "") + "  collect:\n    - path: out.txt\n";
  }
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("tasks", tasks));
  const std::map<std::string, json> done = WaitForTasks({"p0", "p1", "p2"});
  ASSERT_EQ(done.size(), 3u);
  std::set<std::string> sessions;
  std::string replica;
  for (const auto& [name, task] : done) {
    const json st = task.value("status", json::object());
    ASSERT_EQ(st.value("phase", ""), "Succeeded") << task.dump(2);
    sessions.insert(st.value("sessionId", ""));
    replica = st.value("worker", "");
    const json artifacts = st.value("artifacts", json::array());
    ASSERT_EQ(artifacts.size(), 1u) << task.dump(2);
    // Written in the task's own directory, and collected from there.
    EXPECT_EQ(artifacts.at(0).value("bytes", 0), 3) << task.dump(2);
  }
  EXPECT_EQ(sessions.size(), 3u) << "one session per task";
  // Per task: one session create and delete, one input POST, and no more than two turn reads
  // (the turn for its usage, its items for the log): a fresh session has no turn to look for
  // before the POST.
  const json calls = json::parse(harness_.openai().Get("/_emulator/counters").body, nullptr, false);
  ASSERT_TRUE(calls.is_object()) << calls;
  EXPECT_EQ(calls.value("openai.sessions.create", 0), 3) << calls.dump();
  EXPECT_EQ(calls.value("openai.sessions.delete", 0), 3) << calls.dump();
  EXPECT_EQ(calls.value("openai.events.create", 0), 3) << calls.dump();
  EXPECT_LE(calls.value("openai.turns", 0), 2 * 3) << calls.dump();
  const json worker = Get("agentworker", replica);
  EXPECT_EQ(worker.value("status", json::object()).value("sessionId", ""), "")
      << "a PerTask replica holds no standing session: " << worker.dump(2);
  // Every task's session was deleted (a listing shows none of them).
  const json listed =
      json::parse(harness_.openai().Get("/v1/agents/sessions?limit=100").body, nullptr, false);
  ASSERT_TRUE(listed.is_object()) << listed;
  for (const json& s : listed.value("data", json::array())) {
    EXPECT_EQ(sessions.count(s.value("id", "")), 0u) << "not deleted: " << s.dump();
  }
  // The directories: removed, but for the task that keeps its workspace.
  const std::filesystem::path home =
      harness_.dir() / "emu" / "sandboxes" / ("default-" + replica) / "home";
  for (const auto& [name, task] : done) {
    const std::string uid = task.value("metadata", json::object()).value("uid", "");
    EXPECT_EQ(std::filesystem::exists(home / "tasks" / uid), name == "p2") << name;
    EXPECT_FALSE(std::filesystem::exists(home / ".sbx" / "tasks" / uid)) << name;
  }
}

// session: PerTask with the template's power: OnDemand (#27 item 3): a replica sleeps idleStop
// after its task, counts as sleeping (not idle), and the next task wakes that same replica
// instead of making a new one; each task still opens and deletes one session of its own. After
// scaleDownAfter the sleeping replica goes with its sandbox.
TEST_F(AgentPoolTest, PerTaskReplicasOnOnDemandSandboxesSleepBetweenTasksAndATaskWakesOne) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  const auto pool_yaml = [](const std::string& scale_down_after) {
    return "apiVersion: sbx.dev/v1alpha1\nkind: AgentPool\nmetadata:\n  name: sleepers\nspec:\n"
           "  template:\n    spec:\n      sandbox:\n        power: OnDemand\n"
           "        idleStop: 1s\n      agent:\n        model: gpt-5-codex\n"
           "  replicas: {min: 0, max: 1}\n  scaleDownAfter: " +
           scale_down_after + "\n  session: PerTask\n";
  };
  const auto task_yaml = [](const std::string& name) {
    return "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: " + name +
           "\nspec:\n  poolRef: sleepers\n  input: \"$ echo " + name +
           " > out.txt\"\n  timeout: 2m\n  collect:\n    - path: out.txt\n";
  };
  const auto counter = [&](sbx::testing::HttpTestClient& api, const std::string& name) {
    const json c = json::parse(api.Get("/_emulator/counters").body, nullptr, false);
    return c.is_object() ? c.value(name, 0) : -1;
  };
  const auto sandbox_state = [&](const std::string& replica) {
    const json s = json::parse(
        harness_.databricks().Get("/_emulator/sandboxes/default-" + replica).body, nullptr, false);
    return s.is_object() ? s.value("state", "") : "";
  };
  // Asleep: STOPPED in the cloud, the replica Ready=True Sleeping, the pool counting it.
  const auto asleep = [&](const std::string& replica) {
    return PollUntil(
        [&] {
          last_ = Get("agentpool", "sleepers");
          return sandbox_state(replica).find("STOPPED") != std::string::npos &&
                 ConditionOf(Get("agentworker", replica), "Ready") ==
                     std::make_pair(std::string("True"), std::string("Sleeping")) &&
                 last_.value("status", json::object()).value("sleeping", 0) == 1;
        },
        In(kConverge), milliseconds(100));
  };

  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", pool_yaml("10m")));
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("a1", task_yaml("a1")));
  std::map<std::string, json> done = WaitForTasks({"a1"});
  ASSERT_EQ(done["a1"]["status"].value("phase", ""), "Succeeded") << done["a1"].dump(2);
  const std::string replica = done["a1"]["status"].value("worker", "");
  ASSERT_FALSE(replica.empty());
  ASSERT_TRUE(asleep(replica)) << last_.dump(2) << "\nsandbox: " << sandbox_state(replica);
  EXPECT_EQ(last_["status"].value("idle", 0), 0) << "a sleeping replica is not idle";  // 0: omitted

  ASSERT_EQ(harness_.openai().Call("DELETE", "/_emulator/counters").status, 200);
  const int starts = counter(harness_.databricks(), "databricks.start");
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("a2", task_yaml("a2")));
  done = WaitForTasks({"a2"});
  const json st = done["a2"]["status"];
  ASSERT_EQ(st.value("phase", ""), "Succeeded") << done["a2"].dump(2);
  EXPECT_EQ(st.value("worker", ""), replica) << "the sleeping replica is woken, not replaced";
  EXPECT_EQ(counter(harness_.databricks(), "databricks.start"), starts + 1);
  ASSERT_EQ(st.value("artifacts", json::array()).size(), 1u) << done["a2"].dump(2);
  EXPECT_EQ(st["artifacts"].at(0).value("bytes", 0), 3);
  EXPECT_EQ(counter(harness_.openai(), "openai.sessions.create"), 1);
  EXPECT_EQ(counter(harness_.openai(), "openai.sessions.delete"), 1);
  EXPECT_EQ(counter(harness_.openai(), "openai.events.create"), 1);
  ASSERT_TRUE(asleep(replica)) << last_.dump(2) << "\nsandbox: " << sandbox_state(replica);

  // Asleep still counts against scaleDownAfter: the replica and its sandbox go.
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", pool_yaml("1s")));
  ASSERT_TRUE(WaitScaledToZero("sleepers"))
      << last_.dump(2) << "\nsandboxes in the cloud: " << CloudSandboxes();
}

TEST_F(AgentPoolTest, TheCliNamesAMissingPoolAndScalesWithinTheRules) {
  RunResult r = harness_.Sbxctl({"run", "--pool", "nosuch", "--input", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("agentpools \"nosuch\" not found in namespace \"default\"; no task was "
                       "created"),
            std::string::npos)
      << r.err;
  r = harness_.Sbxctl({"get", "agenttasks", "-o", "name"});
  EXPECT_EQ(r.out, "");  // nothing was created
  r = harness_.Sbxctl({"run", "nosuchworker", "--input", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("agentworkers \"nosuchworker\" not found"), std::string::npos) << r.err;

  ASSERT_NO_FATAL_FAILURE(ApplyYaml("pool", PoolYaml(/*max=*/2, "5m")));
  r = harness_.Sbxctl({"scale", "ap/fixers", "--max", "6"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "agentpool/fixers scaled\n");
  r = harness_.Sbxctl({"scale", "ap/fixers", "--min", "7"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("spec.replicas.min: must be between 0 and max (6), got 7"),
            std::string::npos)
      << r.err;
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("task",
                                    "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\n"
                                    "metadata:\n  name: waits\nspec:\n"
                                    "  poolRef: fixers\n  input: hi\n"));
  r = harness_.Sbxctl({"describe", "ap", "fixers"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Replicas:\n  <none>\nQueued Tasks:\n  NAME"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  waits "), std::string::npos) << r.out;
  r = harness_.Sbxctl({"get", "ap"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "NAME     READY   BUSY   IDLE   QUEUED   MIN   MAX   AGE");
  EXPECT_NE(r.out.find("fixers   0/0     0      0      0        0     6"), std::string::npos)
      << r.out;
}

}  // namespace
