#include "controller/base/endpoint_pacing.h"

#include <gtest/gtest.h>

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
  std::optional<EndpointPacing::Permit> permit = pacing.Take(EndpointClass::kCommand);
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
    // Each 429 answers a call sent after the previous cut, with no hold (so each one cuts).
    pacing.Throttled(0ms,
                     EndpointPacing::Permit{
                         EndpointClass::kCreate, {clock.Steady(), false}, {clock.Steady(), false}});
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
