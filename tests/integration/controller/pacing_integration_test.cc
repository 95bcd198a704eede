// Integration tests of adaptive pacing (issue #14 part 3) with the BUILT sbxd, sbxctl and
// sbx-emulator: the emulator enforces an OpenAI rate limit (429 rate_limit_exceeded with
// Retry-After and retry-after-ms, counted as "openai.throttled"), and sbxd, started far above
// that limit, backs off (AIMD: the rate is cut on each 429 and held for the delay) and brings
// every worker to Ready without a storm of 429s. The 429s are counted at the emulator, not
// taken from sbxd's word; sbxd's /metrics shows the rate it ended at.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kConverge{120'000};

class PacingTest : public ::testing::Test {
 protected:
  PacingTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-pacing-itest-",
                  .token = "dapi-pacing",
                  .app_key = "sk-pacing-app",
                  .executor_key = "sk-pacing-executor"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  json Counters() {
    HttpResult r = harness_.databricks().Get("/_emulator/counters");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  static int64_t Count(const json& counters, const std::string& key) {
    return counters.is_object() ? counters.value(key, int64_t{0}) : 0;
  }
  // The OpenAI API calls sbxd made (answered or throttled), not the executors' registrations.
  static int64_t OpenAiApiCalls(const json& counters) {
    int64_t n = 0;
    for (const auto& [key, value] : counters.items()) {
      if (key.starts_with("openai.") && key != "openai.throttled" &&
          !key.starts_with("openai.executor.")) {
        n += value.get<int64_t>();
      }
    }
    return n;
  }
  // The value of the first sample of `name` with `label` in sbxd's /metrics; -1 if absent.
  static double Metric(const std::string& metrics, const std::string& name,
                       const std::string& label) {
    const std::regex line("^" + name + "\\{([^}]*)\\} ([0-9.e+-]+)$", std::regex::multiline);
    for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), line);
         it != std::sregex_iterator(); ++it) {
      if ((*it)[1].str().find(label) != std::string::npos) {
        return std::stod((*it)[2].str());
      }
    }
    return -1;
  }

  SbxdHarness harness_;
};

TEST_F(PacingTest, TheEmulatorEnforcesAnOpenAiRateLimitWithRetryAfter) {
  ASSERT_TRUE(harness_.StartEmulator({"--openai-rate-limit", "2"}).ok());
  HttpTestClient& openai = harness_.openai();
  int throttled = 0;
  HttpResult last;
  for (int i = 0; i < 6; ++i) {
    HttpResult r = openai.Get("/v1/agents/environments/env_missing");
    if (r.status == 429) {
      ++throttled;
      last = r;
    } else {
      EXPECT_EQ(r.status, 404) << r.body;
    }
  }
  EXPECT_GE(throttled, 3) << "burst 2 at 2/s: six calls in a row cannot all pass";
  EXPECT_THAT(last.body, HasSubstr("rate_limit_exceeded"));
  EXPECT_EQ(last.Header("Retry-After"), "1");
  const int ms = std::stoi(last.Header("retry-after-ms"));
  EXPECT_GT(ms, 0);
  EXPECT_LE(ms, 500);
  EXPECT_EQ(Count(Counters(), "openai.throttled"), throttled);
  // The executor's own registration is not limited; the Databricks API has its own limit.
  EXPECT_EQ(Count(Counters(), "databricks.throttled"), 0);
  // The admin API turns it off (and on): {"api":"openai"}.
  ASSERT_EQ(harness_.databricks()
                .Post("/_emulator/rate_limit", R"({"api":"openai","requests_per_second":0})")
                .status,
            200);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(openai.Get("/v1/agents/environments/env_missing").status, 404);
  }
  EXPECT_EQ(harness_.databricks()
                .Post("/_emulator/rate_limit", R"({"api":"anthropic","requests_per_second":1})")
                .status,
            400);
}

TEST_F(PacingTest, SbxdBacksOffAnOpenAiRateLimitAndConvergesWithoutA429Storm) {
  constexpr int kWorkers = 6;
  ASSERT_TRUE(harness_.StartEmulator({"--openai-rate-limit", "2"}).ok());
  // Ten times the limit to start with; status checks every second keep the demand (6 req/s)
  // above the limit for the whole test, so a pacing that does not back off keeps hitting it.
  auto sbxd = harness_.StartSbxd(
      "sbxd", {"--openai-requests-per-second", "20", "--openai-max-requests-per-second", "50",
               "--executor-status-interval", "1s"});
  ASSERT_TRUE(sbxd.ok()) << sbxd.status();
  for (int i = 0; i < kWorkers; ++i) {
    const std::string name = "paced-" + std::to_string(i);
    const auto r = harness_.Apply(
        name, "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: " + name +
                  "\nspec:\n  sandbox:\n    inactivityTimeout: 1h\n"
                  "  workspaceDirectory: /home/sandbox-agent\n"
                  "  agent:\n    model: gpt-5-codex\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto all_ready = [&] {
    for (int i = 0; i < kWorkers; ++i) {
      if (ConditionOf(harness_.Get("agentworker", "paced-" + std::to_string(i)), "Ready").first !=
          "True") {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(PollUntil(all_ready, In(kConverge), milliseconds(500)))
      << harness_.Sbxctl({"get", "agentworkers", "-o", "wide"}).out;

  // Steady state under the limit: 15 s of status checks (a measuring window, not a wait).
  ASSERT_EQ(harness_.databricks().Delete("/_emulator/counters").status, 200);
  const auto window_start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(15));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
  const json counters = Counters();
  const int64_t calls = OpenAiApiCalls(counters);
  const int64_t throttled = Count(counters, "openai.throttled");
  const int64_t answered = calls - throttled;
  // Under the limit: at most 2/s (+ burst) answered; and few 429s: a pacing that stays at 20/s
  // has about one 429 per answered call (each 429 holds the bucket only until the next token).
  EXPECT_LE(answered, static_cast<int64_t>(2 * seconds) + 3) << counters.dump();
  EXPECT_GE(answered, static_cast<int64_t>(seconds / 2)) << "still checking: " << counters.dump();
  EXPECT_LE(throttled * 4, answered) << "a 429 storm: " << counters.dump();
  EXPECT_TRUE(all_ready()) << "Ready through the throttling";

  const int port = SbxdHarness::MetricsPort(**sbxd, kConverge);
  ASSERT_NE(port, 0);
  const std::string metrics =
      HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
  // The steady load is status reads: a 429 cuts the read class, and only that class (#25).
  const double read_rate =
      Metric(metrics, "sbx_api_pacing_class_requests_per_second", "api=\"openai\",class=\"read\"");
  EXPECT_GT(read_rate, 0) << metrics;
  EXPECT_LT(read_rate, 5) << "cut from 20/s towards the limit of 2/s:\n" << metrics;
  EXPECT_EQ(
      Metric(metrics, "sbx_api_pacing_class_requests_per_second", "api=\"openai\",class=\"write\""),
      20)
      << "no write was answered 429, so writes keep their rate:\n"
      << metrics;
  EXPECT_GE(Metric(metrics, "sbx_api_pacing_cuts_total", "api=\"openai\""), 1) << metrics;
  EXPECT_EQ(Metric(metrics, "sbx_api_pacing_max_requests_per_second", "api=\"openai\""), 50);
  EXPECT_EQ(Metric(metrics, "sbx_api_pacing_requests_per_second", "api=\"databricks\""), 15)
      << "the Databricks pacing never rises above where it started by default";
}

}  // namespace
