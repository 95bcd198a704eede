// AgentTask end to end (DESIGN §7.1): the built sbxd and sbx-emulator (both halves), a worker
// brought up as usual, then a task whose input runs `$ echo hi > out.txt` in the sandbox and
// collects out.txt: Succeeded, one turn, the artifact's size and sha256 in the status.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
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
using sbx::testing::MetricSample;
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
    sbxd_ = *p;
  }
  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Emulator and sbxd, then the AgentWorker "fixer" (inline sandbox, workspace kWorkspace)
  // Ready; `session` is its session.
  void StartWithReadyWorker(std::string& session) {
    ASSERT_NO_FATAL_FAILURE(StartAll());
    ASSERT_NO_FATAL_FAILURE(
        ApplyYaml("worker", SbxdHarness::InlineWorkerYaml("fixer", kWorkspace)));
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
  sbx::testing::Process* sbxd_ = nullptr;
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

// Budgets (DESIGN §8.2, #28 item 4): ten tasks of one input, each using T tokens (the emulator
// derives them from the text), on one worker with a token budget of 3T: the 3rd task reaches it,
// so tasks 4–10 stay Queued with reason BudgetExceeded and never reach the service; the
// Workspace says why (condition, event, status.usage with its cost); raising the budget runs
// them at once. Every task's cost is its tokens at the Workspace's prices.
TEST_F(AgentTaskTest, ATokenBudgetHoldsNewTasksOnceReachedAndRaisingItRunsThem) {
  std::string session;
  ASSERT_NO_FATAL_FAILURE(StartWithReadyWorker(session));
  auto task_yaml = [](int i) {
    char name[8];
    std::snprintf(name, sizeof name, "t%02d", i);
    return std::string("---\napiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: ") +
           name + "\nspec:\n  workerRef: fixer\n  timeout: 2m\n  input: \"$ echo budget\"\n";
  };
  auto workspace_yaml = [](int64_t tokens) {
    return "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: default\nspec:\n"
           "  pricing: {inputTokensPerMillion: \"2\", outputTokensPerMillion: \"8\"}\n" +
           (tokens > 0 ? "  budget: {period: Day, tokens: " + std::to_string(tokens) + "}\n"
                       : std::string());
  };
  auto finished = [](const json& t) {
    const std::string phase = t["status"].value("phase", "");
    return phase == "Succeeded" || phase == "Failed";
  };
  // T: what one task uses.
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("workspace", workspace_yaml(0)));
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("t01", task_yaml(1)));
  ASSERT_TRUE(Wait("agenttask", "t01", finished)) << last_.dump(2);
  const json& usage = last_["status"]["usage"];
  const int64_t in = usage.value("inputTokens", int64_t{0});
  const int64_t out = usage.value("outputTokens", int64_t{0});
  const int64_t t_tokens = in + out;
  ASSERT_GT(t_tokens, 0) << last_.dump(2);
  // Cost at 2 per million input tokens and 8 per million output tokens, in micro-units.
  char cost[32];
  std::snprintf(cost, sizeof cost, "0.%06lld", static_cast<long long>(in * 2 + out * 8));
  EXPECT_EQ(usage.value("cost", ""), cost) << last_.dump(2);

  ASSERT_NO_FATAL_FAILURE(ApplyYaml("workspace", workspace_yaml(3 * t_tokens)));
  std::string rest;
  for (int i = 2; i <= 10; ++i) {
    rest += task_yaml(i);
  }
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("rest", rest));
  ASSERT_TRUE(Wait("agenttask", "t03", finished)) << last_.dump(2);
  EXPECT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
  for (int i = 4; i <= 10; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "t%02d", i);
    ASSERT_TRUE(Wait("agenttask", name, [](const json& t) {
      return ConditionOf(t, "Submitted").second == "BudgetExceeded";
    })) << last_.dump(2);
    EXPECT_EQ(last_["status"].value("phase", ""), "Queued") << last_.dump(2);
  }
  ASSERT_TRUE(Wait("workspace", "default", [](const json& w) {
    return ConditionOf(w, "BudgetExceeded").first == "True";
  })) << last_.dump(2);
  const json& ws_usage = last_["status"]["usage"];
  EXPECT_EQ(ws_usage.value("tasks", 0), 3) << last_.dump(2);
  EXPECT_EQ(ws_usage.value("inputTokens", int64_t{0}) + ws_usage.value("outputTokens", int64_t{0}),
            3 * t_tokens)
      << last_.dump(2);
  std::snprintf(cost, sizeof cost, "0.%06lld", static_cast<long long>(3 * (in * 2 + out * 8)));
  EXPECT_EQ(ws_usage.value("cost", ""), cost) << last_.dump(2);
  // Three turns reached the service, no more.
  const json turns =
      json::parse(harness_.openai().Get("/v1/agents/sessions/" + session + "/turns?limit=100").body,
                  nullptr, false);
  ASSERT_TRUE(turns.is_object()) << turns;
  EXPECT_EQ(turns["data"].size(), 3u) << turns.dump(2);
  // Told: the event, and the CLI.
  const RunResult events = harness_.Sbxctl({"events", "workspace/default"});
  EXPECT_NE(events.out.find("BudgetExceeded"), std::string::npos) << events.out << events.err;
  const RunResult wide = harness_.Sbxctl({"get", "ws", "default", "-o", "wide", "--no-headers"});
  EXPECT_NE(wide.out.find("Exceeded"), std::string::npos) << wide.out << wide.err;

  // Raised: the held tasks run at once (the Workspace's change wakes them), all ten end.
  ASSERT_NO_FATAL_FAILURE(ApplyYaml("workspace", workspace_yaml(100 * t_tokens)));
  for (int i = 4; i <= 10; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "t%02d", i);
    ASSERT_TRUE(Wait("agenttask", name, finished)) << last_.dump(2);
    EXPECT_EQ(last_["status"].value("phase", ""), "Succeeded") << last_.dump(2);
  }
  ASSERT_TRUE(Wait("workspace", "default", [](const json& w) {
    return ConditionOf(w, "BudgetExceeded").first == "False" &&
           w["status"]["usage"].value("tasks", 0) == 10;
  })) << last_.dump(2);

  // `sbxctl top`: the workspace used 10T of its 100T budget; each task T tokens at its cost.
  const RunResult top = harness_.Sbxctl({"top", "workspaces"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("10% tokens"), std::string::npos) << top.out;
  const RunResult top_tasks = harness_.Sbxctl({"top", "tasks", "--sort-by", "name", "-o", "json"});
  ASSERT_EQ(top_tasks.exit_code, 0) << top_tasks.err;
  const json rows = json::parse(top_tasks.out, nullptr, false);
  ASSERT_TRUE(rows.is_array()) << top_tasks.out;
  ASSERT_EQ(rows.size(), 10u) << top_tasks.out;
  std::snprintf(cost, sizeof cost, "0.%06lld", static_cast<long long>(in * 2 + out * 8));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].value("name", ""), (i + 1 < 10 ? "t0" : "t") + std::to_string(i + 1));
    EXPECT_EQ(rows[i].value("tokens", int64_t{0}), t_tokens) << rows[i];
    EXPECT_EQ(rows[i].value("cost", ""), cost) << rows[i];
  }

  // The counters, from the same ledger.
  const int port = SbxdHarness::MetricsPort(*sbxd_, kConverge);
  ASSERT_GT(port, 0);
  const std::string text =
      sbx::testing::HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
  const std::vector<std::string> ws = {"workspace=\"default\"", "namespace=\"default\""};
  auto with = [&](const std::string& label) {
    std::vector<std::string> labels = ws;
    labels.push_back(label);
    return labels;
  };
  EXPECT_EQ(MetricSample(text, "sbx_tasks_finished_total", with("phase=\"Succeeded\"")), 10)
      << text;
  EXPECT_EQ(MetricSample(text, "sbx_task_tokens_total", with("type=\"input\"")), 10 * in) << text;
  EXPECT_EQ(MetricSample(text, "sbx_task_tokens_total", with("type=\"output\"")), 10 * out) << text;
}

}  // namespace
