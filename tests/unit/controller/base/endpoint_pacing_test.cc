#include "controller/base/endpoint_pacing.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "controller/base/inline_wait.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

TEST(EndpointPacingTest, TheWorkspaceRateCapsEveryClass) {
  testing::FakeClock clock;
  EndpointPacing pacing(clock, /*rate=*/2, /*burst=*/2);
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kRead));
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kCreate));
  EXPECT_FALSE(pacing.TryAcquire(EndpointClass::kCommand)) << "two tokens a workspace, not a class";
  clock.Advance(500ms);
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kWrite));
}

TEST(EndpointPacingTest, A429CutsAndHoldsOnlyItsClass) {
  testing::FakeClock clock;
  EndpointPacing pacing(clock, 20, 20);
  // A routine call's 429 (a needed call's would also keep routine calls back: below).
  std::optional<EndpointPacing::Permit> permit = pacing.TryTake(EndpointClass::kCommand);
  ASSERT_TRUE(permit.has_value());
  pacing.Throttled(1s, *permit);
  EXPECT_DOUBLE_EQ(pacing.rate(EndpointClass::kCommand), 10);
  EXPECT_DOUBLE_EQ(pacing.rate(EndpointClass::kRead), 20);
  EXPECT_DOUBLE_EQ(pacing.rate(), 20);
  EXPECT_EQ(pacing.cuts(), 1);
  EXPECT_FALSE(pacing.TryAcquire(EndpointClass::kCommand));
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kRead));
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kCreate));
  clock.Advance(1s + 100ms);
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kCommand));
}

// Random 429s cut a rate again and again (each one after the previous cut counts); the recovery
// step must not shrink with the collapsed rate, or it takes minutes to come back.
TEST(EndpointPacingTest, AfterCutsInARowTheRateComesBackInSeconds) {
  testing::FakeClock clock;
  EndpointPacing pacing(clock, 20, 1, AimdPolicy{.hold = 0ms});
  for (int i = 0; i < 5; ++i) {
    // Each 429 answers a call sent after the previous cut, with no hold (so each one cuts). The
    // calls are routine ones, so that they starve nothing (TryAcquire below goes on).
    pacing.Throttled(0ms, EndpointPacing::Permit{EndpointClass::kCreate,
                                                 {clock.Steady(), false},
                                                 {clock.Steady(), false},
                                                 /*routine=*/true});
    clock.Advance(1ms);
  }
  EXPECT_LT(pacing.rate(EndpointClass::kCreate), 1);
  // Saturated calls for 15 s of the fake clock, every one answered.
  const Clock::SteadyTime end = clock.Steady() + 15s;
  while (clock.Steady() < end) {
    if (pacing.TryAcquire(EndpointClass::kCreate)) {
      pacing.Succeeded(EndpointPacing::Permit{
          EndpointClass::kCreate, {clock.Steady(), /*waited=*/true}, {clock.Steady(), true}});
    }
    clock.Advance(10ms);
  }
  EXPECT_GE(pacing.rate(EndpointClass::kCreate), 19.9);
}

// What the rate limit cost: the time needed calls spent blocked in Take, summed over callers
// (sbx_api_pacing_wait_seconds_total). A call with a token at once adds nothing.
TEST(EndpointPacingTest, WaitedSumsTheTimeCallsWaitedForTheirTokens) {
  testing::FakeClock clock;
  EndpointPacing pacing(clock, /*rate=*/2, /*burst=*/1);
  ASSERT_TRUE(pacing.Take(EndpointClass::kRead).has_value());
  EXPECT_EQ(pacing.waited(), 0ms);
  std::optional<EndpointPacing::Permit> waiting;
  std::thread caller([&] { waiting = pacing.Take(EndpointClass::kCommand); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(500ms);  // the next token, at 2 per second
  caller.join();
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(pacing.waited(), 500ms);
  EXPECT_FALSE(pacing.TryTake(EndpointClass::kRead).has_value());
  EXPECT_EQ(pacing.waited(), 500ms) << "a routine call that is not sent waits for nothing";
}

// Routine calls give way while a needed call waits out a 429: in every class, until a needed
// call of the starved class succeeds, or for at most the starve limit.
TEST(EndpointPacingTest, RoutineCallsWaitForANeededCallsRetryAfterA429) {
  testing::FakeClock clock;
  EndpointPacing pacing(clock, 20, 20, {}, /*starve_limit=*/10s);
  std::optional<EndpointPacing::Permit> create = pacing.Take(EndpointClass::kCreate);
  ASSERT_TRUE(create.has_value());
  EXPECT_FALSE(create->routine);
  EXPECT_FALSE(pacing.Starving());
  pacing.Throttled(1s, *create);
  EXPECT_TRUE(pacing.Starving());
  EXPECT_FALSE(pacing.TryAcquire(EndpointClass::kRead)) << "a status check would take its token";
  clock.Advance(2s);
  EXPECT_FALSE(pacing.TryAcquire(EndpointClass::kRead)) << "the create's hold is over, not its 429";
  std::optional<EndpointPacing::Permit> read = pacing.Take(EndpointClass::kRead);
  ASSERT_TRUE(read.has_value()) << "needed calls of other classes go on";
  pacing.Succeeded(*read);
  EXPECT_TRUE(pacing.Starving()) << "only a success of the starved class ends it";
  std::optional<EndpointPacing::Permit> retry = pacing.Take(EndpointClass::kCreate);
  ASSERT_TRUE(retry.has_value());
  pacing.Succeeded(*retry);
  EXPECT_FALSE(pacing.Starving());
  std::optional<EndpointPacing::Permit> look = pacing.TryTake(EndpointClass::kRead);
  ASSERT_TRUE(look.has_value());
  EXPECT_TRUE(look->routine);

  // A routine call's own 429 starves nothing (the looks would otherwise stop themselves).
  pacing.Throttled(1s, *look);
  EXPECT_FALSE(pacing.Starving());

  // A needed call that is never retried keeps routine calls back for the limit only, and a 429
  // after that begins a new starvation.
  std::optional<EndpointPacing::Permit> write = pacing.Take(EndpointClass::kWrite);
  ASSERT_TRUE(write.has_value());
  pacing.Throttled(1s, *write);
  clock.Advance(9s);
  EXPECT_TRUE(pacing.Starving());
  clock.Advance(1s);
  EXPECT_FALSE(pacing.Starving());
  EXPECT_TRUE(pacing.TryAcquire(EndpointClass::kCommand));
  std::optional<EndpointPacing::Permit> again = pacing.Take(EndpointClass::kWrite);
  ASSERT_TRUE(again.has_value());
  pacing.Throttled(1s, *again);
  EXPECT_TRUE(pacing.Starving());
}

TEST(InlineWaitTest, ScopesSetAndRestoreTheThreadsLimit) {
  EXPECT_FALSE(InlineWaitLimit().has_value());
  {
    const ScopedInlineWaitLimit outer(0ms);
    EXPECT_EQ(InlineWaitLimit(), std::optional(0ms));
    {
      const ScopedInlineWaitLimit inner(250ms);
      EXPECT_EQ(InlineWaitLimit(), std::optional<std::chrono::milliseconds>(250ms));
    }
    EXPECT_EQ(InlineWaitLimit(), std::optional(0ms));
  }
  EXPECT_FALSE(InlineWaitLimit().has_value());
}

}  // namespace
}  // namespace sbx::controller
