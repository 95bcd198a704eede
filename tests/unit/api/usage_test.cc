// api/usage.h: decimals in micro-units, the cost formula of DESIGN §8.2, UTC budget periods and
// the budget check.
#include "api/usage.h"

#include <gtest/gtest.h>

#include "api/codec.h"
#include "api/rfc3339.h"

namespace sbx::api {
namespace {

TEST(UsageTest, DecimalsAreMicroUnitsWithAtMostSixPlaces) {
  EXPECT_EQ(*ParseDecimal("12"), 12'000'000);
  EXPECT_EQ(*ParseDecimal("1.25"), 1'250'000);
  EXPECT_EQ(*ParseDecimal("0.000001"), 1);
  EXPECT_EQ(*ParseDecimal("0"), 0);
  for (const char* bad :
       {"", "-1", "+1", "1e3", "1.", ".5", "1.0000001", "abc", "1,5", "10000000000000"}) {
    EXPECT_EQ(ParseDecimal(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(FormatDecimal(1'250'000), "1.25");
  EXPECT_EQ(FormatDecimal(2'000'000), "2");
  EXPECT_EQ(FormatDecimal(1), "0.000001");
  EXPECT_EQ(FormatCost(1'250), "0.001250");
  EXPECT_EQ(FormatCost(0), "0.000000");
  EXPECT_EQ(FormatCost(3'000'000), "3.000000");
}

TEST(UsageTest, CostIsUncachedPlusCachedPlusOutputPlusComputeRoundedOnce) {
  WorkspacePricing p;
  p.input_tokens_per_million = *ParseDecimal("2.50");
  p.cached_input_tokens_per_million = *ParseDecimal("0.25");
  p.output_tokens_per_million = *ParseDecimal("10");
  p.compute_per_hour = *ParseDecimal("0.36");
  UsageSum u;
  u.input_tokens = 1'000'000;
  u.cached_input_tokens = 400'000;
  u.output_tokens = 100'000;
  u.compute_millis = 3'600'000;  // one hour
  // 600k × 2.50/M + 400k × 0.25/M + 100k × 10/M + 1 h × 0.36 = 1.5 + 0.1 + 1.0 + 0.36
  EXPECT_EQ(FormatCost(CostOf(p, u)), "2.960000");

  // No cached price: cached tokens cost the input price. No output price: output is free.
  WorkspacePricing input_only;
  input_only.input_tokens_per_million = *ParseDecimal("1");
  EXPECT_EQ(FormatCost(CostOf(input_only, u)), "1.000000");

  // One token at 1.25/M is 1.25 micro-units: rounded once, half up, at the end — and 3 tokens
  // are 3.75 → 4, not 3 × round(1.25) = 3.
  WorkspacePricing small;
  small.input_tokens_per_million = *ParseDecimal("1.25");
  EXPECT_EQ(CostOf(small, UsageSum{.input_tokens = 1}), 1);
  EXPECT_EQ(CostOf(small, UsageSum{.input_tokens = 3}), 4);
  // More cached than input (a service that counts oddly) never makes a negative uncached part.
  EXPECT_EQ(CostOf(small, UsageSum{.input_tokens = 1, .cached_input_tokens = 5}), 6);
}

TEST(UsageTest, PeriodsAreUtcDaysAndMonths) {
  const WallTime t = *ParseRfc3339("2026-12-31T23:59:59Z");
  const BudgetPeriodBounds day = PeriodAt(BudgetPeriod::kDay, t);
  EXPECT_EQ(day.name, "2026-12-31");
  EXPECT_EQ(FormatRfc3339(day.start), "2026-12-31T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(day.end), "2027-01-01T00:00:00Z");
  const BudgetPeriodBounds month = PeriodAt(BudgetPeriod::kMonth, t);
  EXPECT_EQ(month.name, "2026-12");
  EXPECT_EQ(FormatRfc3339(month.start), "2026-12-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(month.end), "2027-01-01T00:00:00Z");
  EXPECT_EQ(PeriodAt(BudgetPeriod::kMonth, *ParseRfc3339("2027-02-10T00:00:00+05:00")).name,
            "2027-02");
  EXPECT_EQ(PeriodAt(BudgetPeriod::kDay, *ParseRfc3339("2027-02-10T01:00:00+05:00")).name,
            "2027-02-09");
}

TEST(UsageTest, ABudgetIsReachedAtItsLimitNotAfter) {
  const BudgetPeriodBounds period =
      PeriodAt(BudgetPeriod::kDay, *ParseRfc3339("2026-12-04T10:00:00Z"));
  WorkspaceBudget budget;
  budget.period = BudgetPeriod::kDay;
  budget.tokens = 1000;
  EXPECT_FALSE(
      BudgetReached(budget, std::nullopt, {.input_tokens = 600, .output_tokens = 399}, period));
  std::optional<std::string> reached =
      BudgetReached(budget, std::nullopt, {.input_tokens = 600, .output_tokens = 400}, period);
  ASSERT_TRUE(reached);
  EXPECT_EQ(*reached, "tokens: 1000 used of 1000 today (2026-12-04)");

  WorkspaceBudget cost;
  cost.cost = *ParseDecimal("1");
  WorkspacePricing pricing;
  pricing.input_tokens_per_million = *ParseDecimal("10");
  EXPECT_FALSE(BudgetReached(cost, pricing, {.input_tokens = 99'999}, period));
  reached = BudgetReached(cost, pricing, {.input_tokens = 100'000}, period);
  ASSERT_TRUE(reached);
  EXPECT_EQ(*reached, "cost: 1.000000 used of 1 this month (2026-12-04)");
}

TEST(UsageTest, PricingAndBudgetDecodeFromStringsAndNumbersAndRoundTrip) {
  auto objects = DecodeManifests(R"(apiVersion: sbx.dev/v1alpha1
kind: Workspace
metadata: {name: ws}
spec:
  pricing: {inputTokensPerMillion: "1.25", outputTokensPerMillion: 10, computePerHour: 0.5}
  budget: {period: Day, tokens: 5000, cost: "2.5"}
)",
                                 "ws.yaml");
  ASSERT_TRUE(objects.ok()) << objects.status();
  const WorkspaceSpec& spec = (*objects)[0].object.workspace_spec();
  EXPECT_EQ(spec.pricing->input_tokens_per_million, 1'250'000);
  EXPECT_EQ(spec.pricing->output_tokens_per_million, 10'000'000);
  EXPECT_EQ(spec.pricing->compute_per_hour, 500'000);
  EXPECT_FALSE(spec.pricing->cached_input_tokens_per_million);
  EXPECT_EQ(spec.budget->period, BudgetPeriod::kDay);
  EXPECT_EQ(spec.budget->tokens, 5000);
  EXPECT_EQ(spec.budget->cost, 2'500'000);
  const std::string json = EncodeObjectJson((*objects)[0].object, /*pretty=*/false);
  EXPECT_NE(json.find(R"("inputTokensPerMillion":"1.25")"), std::string::npos) << json;

  auto bad = DecodeManifests(R"(apiVersion: sbx.dev/v1alpha1
kind: Workspace
metadata: {name: ws}
spec:
  pricing: {inputTokensPerMillion: "1.2500001"}
)",
                             "ws.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ws.yaml:5"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("inputTokensPerMillion"), std::string::npos)
      << bad.status();
}

TEST(UsageTest, SecondsKeepMillisecondsAndPrintShortest) {
  EXPECT_EQ(FormatSeconds(0), "0");
  EXPECT_EQ(FormatSeconds(300), "0.3");
  EXPECT_EQ(FormatSeconds(1234), "1.234");
  EXPECT_EQ(FormatSeconds(61'000), "61");
  EXPECT_EQ(FormatSeconds(5), "0.005");

  Object task;
  task.kind = Kind::kAgentTask;
  task.metadata.name = "t";
  task.spec = AgentTaskSpec{};
  AgentTaskStatus status;
  status.usage.compute_millis = 300;
  status.usage.attempt_start_running_millis = 0;  // set at 0 is not unset
  task.status = status;
  const std::string json = EncodeStatusJson(task);
  EXPECT_NE(json.find(R"("computeSeconds":0.3)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("attemptStartRunningSeconds":0)"), std::string::npos) << json;
  StatusOr<ResourceStatus> back = DecodeStatusJson(Kind::kAgentTask, json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::get<AgentTaskStatus>(*back).usage, status.usage);

  status.usage.attempt_start_running_millis.reset();
  task.status = status;
  EXPECT_EQ(EncodeStatusJson(task).find("attemptStartRunningSeconds"), std::string::npos);
}

TEST(UsageTest, ASandboxRunsForItsCountPlusTheOpenInterval) {
  SandboxUsage usage;
  usage.running_millis = 1500;
  const auto now = *ParseRfc3339("2026-12-04T10:00:02.250Z");
  EXPECT_EQ(RunningMillisAt(usage, now), 1500);  // nothing open: stopped
  usage.running_since = FormatRfc3339Millis(*ParseRfc3339("2026-12-04T10:00:00.125Z"));
  EXPECT_EQ(usage.running_since, "2026-12-04T10:00:00.125Z");
  EXPECT_EQ(RunningMillisAt(usage, now), 1500 + 2125);
  // A clock behind runningSince counts no negative time.
  EXPECT_EQ(RunningMillisAt(usage, *ParseRfc3339("2026-12-04T09:00:00Z")), 1500);
}

TEST(UsageTest, AComputeBudgetIsReachedAtItsHours) {
  const BudgetPeriodBounds period =
      PeriodAt(BudgetPeriod::kMonth, *ParseRfc3339("2026-12-04T10:00:00Z"));
  WorkspaceBudget budget;
  budget.compute_hours = *ParseDecimal("0.5");  // 1800 s
  EXPECT_FALSE(BudgetReached(budget, std::nullopt, {.compute_millis = 1'799'999}, period));
  std::optional<std::string> reached =
      BudgetReached(budget, std::nullopt, {.compute_millis = 1'800'000}, period);
  ASSERT_TRUE(reached);
  EXPECT_EQ(*reached, "computeHours: 1800 s used of 0.5 h this month (2026-12)");

  auto objects = DecodeManifests(R"(apiVersion: sbx.dev/v1alpha1
kind: Workspace
metadata: {name: ws}
spec:
  budget: {computeHours: "0.25"}
)",
                                 "ws.yaml");
  ASSERT_TRUE(objects.ok()) << objects.status();
  EXPECT_EQ((*objects)[0].object.workspace_spec().budget->compute_hours, 250'000);
}

}  // namespace
}  // namespace sbx::api
