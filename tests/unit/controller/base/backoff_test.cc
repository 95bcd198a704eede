#include "controller/base/backoff.h"

#include <gtest/gtest.h>

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

// u = 0.5 makes the jitter factor exactly 1.
Backoff::Uniform Fixed(double u) {
  return [u] { return u; };
}

TEST(BackoffTest, DoublesFromOneSecondUpToFiveMinutes) {
  Backoff backoff(BackoffPolicy{}, Fixed(0.5));
  EXPECT_EQ(backoff.Delay(1), 1s);
  EXPECT_EQ(backoff.Delay(2), 2s);
  EXPECT_EQ(backoff.Delay(3), 4s);
  EXPECT_EQ(backoff.Delay(9), 256s);
  EXPECT_EQ(backoff.Delay(10), 5min);
  EXPECT_EQ(backoff.Delay(11), 5min);
  EXPECT_EQ(backoff.Delay(1000000), 5min);
}

TEST(BackoffTest, TreatsNonPositiveFailuresAsTheFirst) {
  Backoff backoff(BackoffPolicy{}, Fixed(0.5));
  EXPECT_EQ(backoff.Delay(0), 1s);
  EXPECT_EQ(backoff.Delay(-3), 1s);
}

TEST(BackoffTest, JitterStaysWithinTenPercentAndUnderTheCap) {
  Backoff low(BackoffPolicy{}, Fixed(0.0));
  Backoff high(BackoffPolicy{}, Fixed(0.999999));
  EXPECT_EQ(low.Delay(1), 900ms);
  EXPECT_EQ(high.Delay(1), 1100ms);
  EXPECT_EQ(low.Delay(4), 7200ms);
  EXPECT_EQ(high.Delay(4), 8800ms);
  EXPECT_EQ(low.Delay(30), 270s);
  EXPECT_EQ(high.Delay(30), 5min);  // jitter never exceeds the cap
}

TEST(BackoffTest, DefaultRandomSourceSpreadsWithinBounds) {
  Backoff backoff;
  std::chrono::milliseconds lo = 1h, hi = 0ms;
  for (int i = 0; i < 2000; ++i) {
    const auto d = backoff.Delay(3);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_GE(lo, 3600ms);
  EXPECT_LE(hi, 4400ms);
  EXPECT_LT(lo, 3800ms);  // it really is random: 2000 draws cover most of the range
  EXPECT_GT(hi, 4200ms);
}

TEST(BackoffTest, CustomPolicyForShortPolls) {
  Backoff backoff(BackoffPolicy{.base = 1s, .cap = 10s, .jitter = 0}, Fixed(0.9));
  EXPECT_EQ(backoff.Delay(1), 1s);
  EXPECT_EQ(backoff.Delay(4), 8s);
  EXPECT_EQ(backoff.Delay(5), 10s);
}

TEST(BackoffTest, JitteredScalesAPeriodByUpToTheFraction) {
  EXPECT_EQ(Backoff({}, Fixed(0.0)).Jittered(60s, 0.1), 54s);
  EXPECT_EQ(Backoff({}, Fixed(0.5)).Jittered(60s, 0.1), 60s);
  EXPECT_EQ(Backoff({}, Fixed(0.999999)).Jittered(60s, 0.1), 66s);
  EXPECT_EQ(Backoff({}, Fixed(0.0)).Jittered(60s, 0.0), 60s);
  EXPECT_EQ(Backoff({}, Fixed(0.0)).Jittered(-5s, 0.1), 0s);
}

}  // namespace
}  // namespace sbx::controller
