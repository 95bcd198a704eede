// AgentTask end to end (DESIGN §7.1): the built sbxd and sbx-emulator (both halves), a worker
// brought up as usual, then a task whose input runs `$ echo hi > out.txt` in the sandbox and
// collects out.txt: Succeeded, one turn, the artifact's size and sha256 in the status.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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

constexpr milliseconds kConverge{60'000};
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

class AgentTaskTest : public ::testing::Test {
 protected:
  AgentTaskTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-at-itest-",
                  .token = "dapi-SECRET-at-1",
                  .app_key = "sk-app-SECRET-at-2",
                  .executor_key = "sk-exec-SECRET-at-3"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  void StartAll() {
    const sbx::api::Status started = harness_.StartEmulator({}, kConverge);
    ASSERT_TRUE(started.ok()) << started;
    auto p = harness_.StartSbxd(
        "sbxd", {"--executor-status-interval", "2s", "--executor-probe-interval", "2s"});
    ASSERT_TRUE(p.ok()) << p.status();
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Emulator and sbxd, then the AgentWorker "fixer" (inline sandbox, workspace kWorkspace)
  // Ready; `session` is its session.
  void StartWithReadyWorker(std::string& session) {
    ASSERT_NO_FATAL_FAILURE(StartAll());
    ASSERT_NO_FATAL_FAILURE(ApplyYaml(
        "worker",
        "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: fixer\n"
        "spec:\n  sandbox:\n    inactivityTimeout: 1h\n    setup:\n"
        "      - name: workspace\n        run: " +
            json(std::string("mkdir -p ") + kWorkspace).dump() +
            "\n  agent:\n    model: gpt-5-codex\n  workspaceDirectory: " + kWorkspace + "\n"));
    ASSERT_TRUE(Wait("agentworker", "fixer", [](const json& w) {
      return ConditionOf(w, "Ready").first == "True";
    })) << last_.dump(2);
    session = last_["status"].value("sessionId", "");
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

  SbxdHarness harness_;
  json last_;
};

TEST_F(AgentTaskTest, ATaskRunsACommandInTheSandboxAndCollectsItsFile) {
  std::string session;
  ASSERT_NO_FATAL_FAILURE(StartWithReadyWorker(session));

  ASSERT_NO_FATAL_FAILURE(
      ApplyYaml("task",
                "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: hello\n"
                "spec:\n  workerRef: fixer\n  input: \"$ echo hi > out.txt\"\n  timeout: 2m\n"
                "  collect:\n    - path: out.txt\n"));
  ASSERT_TRUE(Wait("agenttask", "hello", [](const json& t) {
    const std::string phase = t["status"].value("phase", "");
    return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled" || phase == "TimedOut";
  })) << last_.dump(2);
  const json& st = last_["status"];
  EXPECT_EQ(st.value("phase", ""), "Succeeded") << last_.dump(2);
  EXPECT_EQ(st.value("sessionId", ""), session);
  EXPECT_EQ(st.value("idempotencyKey", ""), last_["metadata"].value("uid", ""));
  EXPECT_EQ(st.value("commands", 0), 1) << last_.dump(2);
  ASSERT_TRUE(st.contains("artifacts")) << last_.dump(2);
  EXPECT_EQ(st["artifacts"][0].value("path", ""), "out.txt");
  EXPECT_EQ(st["artifacts"][0].value("bytes", 0), 3) << last_.dump(2);
  EXPECT_EQ(st["artifacts"][0].value("sha256", ""),
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4");
  EXPECT_EQ(ConditionOf(last_, "Completed").first, "True");

  // One turn in the session: the task's.
  const json turns = json::parse(
      harness_.openai().Get("/v1/agents/sessions/" + session + "/turns").body, nullptr, false);
  ASSERT_TRUE(turns.is_object()) << turns.dump();
  EXPECT_EQ(turns["data"].size(), 1u) << turns.dump(2);
}

// Usage (DESIGN §8.2, #28 item 1): a task's status.usage is the sum of its attempts' root turns'
// usage exactly as the service records it (the emulator derives tokens from the text, so the sums
// are exact), a subagent's turn and a retried attempt included.
TEST_F(AgentTaskTest, ATasksUsageSumsItsAttemptsRootTurnsAsTheServiceRecordsThem) {
  std::string session;
  ASSERT_NO_FATAL_FAILURE(StartWithReadyWorker(session));
  const std::vector<std::pair<std::string, std::string>> tasks = {
      {"plain", "$ echo plain"},
      {"with-subagent", "look around\n!subagent\n$ echo sub"},
      {"retried", "$ echo retried and a longer line of text\n!flaky server_error once"}};
  std::string yaml;
  for (const auto& [name, input] : tasks) {
    yaml += "---\napiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: " + name +
            "\nspec:\n  workerRef: fixer\n  timeout: 2m\n  backoffLimit: 1\n  input: " +
            json(input).dump() + "\n";
  }
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("tasks", yaml));

  ASSERT_TRUE(PollUntil(
      [&] {
        for (const auto& [name, input] : tasks) {
          last_ = harness_.Get("agenttask", name);
          if (!last_.is_object() || last_["status"].value("phase", "") != "Succeeded") {
            return false;
          }
        }
        return true;
      },
      In(kConverge), milliseconds(250)))
      << last_.dump(2);
  const json listed =
      json::parse(harness_.openai().Get("/v1/agents/sessions/" + session + "/turns?limit=100").body,
                  nullptr, false);
  ASSERT_TRUE(listed.is_object()) << listed;
  std::map<std::string, json> usage_of;  // root turn id → its usage
  for (const json& turn : listed.value("data", json::array())) {
    usage_of[turn.value("id", "")] = turn.value("usage", json());
  }
  for (const auto& [name, input] : tasks) {
    const json task = harness_.Get("agenttask", name);
    const json& st = task["status"];
    int64_t in = 0, cached = 0, out = 0, reasoning = 0;
    for (const json& attempt : st.value("attempts", json::array())) {
      const json& u = usage_of[attempt.value("turnId", "")];
      ASSERT_TRUE(u.is_object()) << name << ": no usage recorded for " << attempt.dump();
      in += u.value("input_tokens", int64_t{0});
      cached += u.value("input_tokens_details", json::object()).value("cached_tokens", int64_t{0});
      out += u.value("output_tokens", int64_t{0});
      reasoning +=
          u.value("output_tokens_details", json::object()).value("reasoning_tokens", int64_t{0});
    }
    EXPECT_EQ(st["attempts"].size(), name == "retried" ? 2u : 1u) << task.dump(2);
    EXPECT_GT(in, 0) << name;
    const json usage = st.value("usage", json::object());
    EXPECT_EQ(usage.value("inputTokens", int64_t{-1}), in) << name << ": " << usage;
    EXPECT_EQ(usage.value("cachedInputTokens", int64_t{0}), cached) << name << ": " << usage;
    EXPECT_EQ(usage.value("outputTokens", int64_t{-1}), out) << name << ": " << usage;
    EXPECT_EQ(usage.value("reasoningTokens", int64_t{0}), reasoning) << name << ": " << usage;
  }
  // The CLI shows them: input + output tokens in the wide table.
  const RunResult wide = harness_.Sbxctl({"get", "at", "plain", "-o", "wide", "--no-headers"});
  const json plain = harness_.Get("agenttask", "plain")["status"]["usage"];
  EXPECT_NE(wide.out.find(std::to_string(plain.value("inputTokens", int64_t{0}) +
                                         plain.value("outputTokens", int64_t{0}))),
            std::string::npos)
      << wide.out;
}

}  // namespace
