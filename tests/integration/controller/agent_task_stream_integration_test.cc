// AgentTask and the session's shared event stream, end to end (DESIGN §7.1, reference §2.2,
// §2.4, §2.6): the built sbxd and sbx-emulator. A worker's tasks share ONE SSE subscription and
// POST their input once each; the task log gets assistant text deltas while the turn still
// runs; a stream dropped mid-turn is recovered to the same items as a run without the drop; a
// subagent's terminal event does not end the task; sbxd's /metrics shows the open stream.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using nlohmann::json;
using sbx::controller::SqliteStore;
using sbx::controller::Store;
using sbx::testing::ConditionOf;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using LogKind = Store::TaskLogKind;

constexpr milliseconds kConverge{60'000};
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

bool Finished(const json& t) {
  const std::string phase = t["status"].value("phase", "");
  return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled" || phase == "TimedOut";
}

class AgentTaskStreamTest : public ::testing::Test {
 protected:
  AgentTaskStreamTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-atstream-itest-",
                  .token = "dapi-SECRET-ats-1",
                  .app_key = "sk-app-SECRET-ats-2",
                  .executor_key = "sk-exec-SECRET-ats-3"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // Emulator, sbxd, and a Ready worker "fixer"; sets session_.
  void StartWorker() {
    const sbx::api::Status started = harness_.StartEmulator({}, kConverge);
    ASSERT_TRUE(started.ok()) << started;
    auto p = harness_.StartSbxd(
        "sbxd", {"--executor-status-interval", "2s", "--executor-probe-interval", "2s"});
    ASSERT_TRUE(p.ok()) << p.status();
    sbxd_ = *p;
    ASSERT_NO_FATAL_FAILURE(
        ApplyYaml("worker", SbxdHarness::InlineWorkerYaml("fixer", kWorkspace)));
    ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
      return ConditionOf(w, "Ready").first == "True";
    })) << last_.dump(2);
    session_ = last_["status"].value("sessionId", "");
    ASSERT_FALSE(session_.empty());
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void ApplyTask(const std::string& name, const std::string& input) {
    ApplyYaml(name, "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: " + name +
                        "\nspec:\n  workerRef: fixer\n  input: " + json(input).dump() +
                        "\n  timeout: 2m\n");
  }
  bool Wait(const std::string& kind, const std::string& name,
            const std::function<bool(const json&)>& pred) {
    return PollUntil(
        [&] {
          last_ = harness_.Get(kind, name);
          return last_.is_object() && pred(last_);
        },
        In(kConverge), milliseconds(200));
  }
  // The emulator's record of the worker's session (GET /_emulator/openai/state).
  json SessionState() {
    const json state =
        json::parse(harness_.openai().Get("/_emulator/openai/state").body, nullptr, false);
    if (state.is_object()) {
      for (const json& s : state["sessions"]) {
        if (s.value("id", "") == session_) {
          return s;
        }
      }
    }
    return json();
  }
  // The task's log, read from the store as sbxctl does (a second connection to the file).
  std::vector<Store::TaskLogEntry> LogOf(const std::string& uid) {
    if (store_ == nullptr) {
      auto opened = SqliteStore::Open(harness_.db().string(), {});
      if (!opened.ok()) {
        ADD_FAILURE() << opened.status();
        return {};
      }
      store_ = *std::move(opened);
    }
    auto page = store_->ReadTaskLog(uid);
    return page.ok() ? page->entries : std::vector<Store::TaskLogEntry>{};
  }
  // The log's item results in order, without ids (they differ between runs).
  std::vector<std::pair<LogKind, std::string>> ItemsOf(const std::string& uid) {
    std::vector<std::pair<LogKind, std::string>> out;
    for (const Store::TaskLogEntry& e : LogOf(uid)) {
      if (e.kind == LogKind::kCommand || e.kind == LogKind::kCommandResult ||
          e.kind == LogKind::kAssistant) {
        out.emplace_back(e.kind, e.text);
      }
    }
    return out;
  }

  SbxdHarness harness_;
  Process* sbxd_ = nullptr;
  std::unique_ptr<SqliteStore> store_;
  std::string session_;
  json last_;
};

TEST_F(AgentTaskStreamTest, AWorkersTasksShareOneStreamAndPostTheirInputOnceEach) {
  ASSERT_NO_FATAL_FAILURE(StartWorker());
  for (int i = 1; i <= 5; ++i) {
    ASSERT_NO_FATAL_FAILURE(ApplyTask("t" + std::to_string(i), "$ echo " + std::to_string(i)));
  }
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(Wait("agenttask", "t" + std::to_string(i), Finished)) << last_.dump(2);
    EXPECT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
  }
  const json s = SessionState();
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s.value("accepted_inputs", -1), 5) << s.dump();
  EXPECT_EQ(s.value("deduped_inputs", -1), 0) << s.dump();  // exactly one POST per task
  EXPECT_EQ(s.value("turns_started", -1), 5) << s.dump();
  EXPECT_EQ(s.value("subscriptions_total", -1), 1) << s.dump();
  EXPECT_EQ(s.value("subscribers", -1), 1) << s.dump();  // still open: idle_close is 60 s

  // sbxd counts it.
  const int port = SbxdHarness::MetricsPort(*sbxd_, kConverge);
  ASSERT_GT(port, 0);
  HttpTestClient metrics("http://127.0.0.1:" + std::to_string(port));
  const std::string text = metrics.Get("/metrics").body;
  EXPECT_NE(text.find("\nsbx_session_streams_open 1\n"), std::string::npos) << text;
}

TEST_F(AgentTaskStreamTest, AssistantTextDeltasAreLoggedWhileTheTurnRuns) {
  ASSERT_NO_FATAL_FAILURE(StartWorker());
  ASSERT_NO_FATAL_FAILURE(ApplyTask("talk", "!say looking at the tests now\n!sleep 8s\n$ true"));
  ASSERT_TRUE(Wait("agenttask", "talk", [](const json& t) {
    return t["status"].value("phase", "") == "Running";
  })) << last_.dump(2);
  const std::string uid = last_["metadata"].value("uid", "");
  std::string said;
  ASSERT_TRUE(PollUntil(
      [&] {
        said.clear();
        for (const Store::TaskLogEntry& e : LogOf(uid)) {
          if (e.kind == LogKind::kAssistantDelta) {
            said += e.text;
          }
        }
        return said == "looking at the tests now";
      },
      In(kConverge), milliseconds(100)))
      << said;
  // Seen before the turn ended: the task is still running (the turn sleeps 8 s after saying it).
  EXPECT_EQ(harness_.Get("agenttask", "talk")["status"].value("phase", ""), "Running");
  ASSERT_TRUE(Wait("agenttask", "talk", Finished)) << last_.dump(2);
  EXPECT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
}

TEST_F(AgentTaskStreamTest, AStreamDroppedMidTurnRecoversTheSameLogAsNoDrop) {
  ASSERT_NO_FATAL_FAILURE(StartWorker());
  const std::string input = "$ echo one\n!sleep 3s\n$ echo two\n!say finished both";
  ASSERT_NO_FATAL_FAILURE(ApplyTask("plain", input));
  ASSERT_TRUE(Wait("agenttask", "plain", Finished)) << last_.dump(2);
  ASSERT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
  const auto reference = ItemsOf(last_["metadata"].value("uid", ""));
  ASSERT_EQ(reference.size(), 6u);  // 2 × (command, result), the said text, the final answer

  ASSERT_NO_FATAL_FAILURE(ApplyTask("dropped", input));
  ASSERT_TRUE(Wait("agenttask", "dropped", [](const json& t) {
    return t["status"].value("phase", "") == "Running";
  })) << last_.dump(2);
  const std::string uid = last_["metadata"].value("uid", "");
  ASSERT_TRUE(PollUntil([&] { return ItemsOf(uid).size() >= 2; }, In(kConverge)));  // `one` ran
  const auto dropped =
      harness_.openai().Post("/_emulator/openai/sessions/" + session_ + "/drop_streams", "{}");
  ASSERT_EQ(dropped.status, 200) << dropped.body;
  EXPECT_EQ(json::parse(dropped.body).value("dropped", 0), 1) << dropped.body;
  ASSERT_TRUE(Wait("agenttask", "dropped", Finished)) << last_.dump(2);
  EXPECT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
  EXPECT_EQ(last_["status"].value("commands", 0), 2);
  EXPECT_EQ(ItemsOf(uid), reference);
  const json s = SessionState();
  EXPECT_EQ(s.value("subscriptions_total", -1), 2) << s.dump();  // one reconnect
  EXPECT_EQ(s.value("accepted_inputs", -1), 2) << s.dump();      // no input twice
}

TEST_F(AgentTaskStreamTest, ASubagentsTerminalEventDoesNotEndTheTask) {
  ASSERT_NO_FATAL_FAILURE(StartWorker());
  ASSERT_NO_FATAL_FAILURE(ApplyTask("helper", "!subagent failed\n!sleep 2s\n$ echo after"));
  ASSERT_TRUE(Wait("agenttask", "helper", Finished)) << last_.dump(2);
  const json& st = last_["status"];
  EXPECT_EQ(st.value("phase", ""), "Succeeded") << last_.dump(2);
  EXPECT_EQ(st.value("commands", 0), 1) << last_.dump(2);
  bool after = false;
  for (const Store::TaskLogEntry& e : LogOf(last_["metadata"].value("uid", ""))) {
    after = after || (e.kind == LogKind::kCommandResult && e.text == "after\n");
  }
  EXPECT_TRUE(after);
}

}  // namespace
