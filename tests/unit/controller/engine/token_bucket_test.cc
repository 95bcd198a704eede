#include "controller/engine/token_bucket.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

TEST(TokenBucketTest, AllowsBurstThenPacesAtRate) {
  testing::FakeClock clock;
  TokenBucket bucket(clock, /*rate=*/2, /*burst=*/3);
  EXPECT_TRUE(bucket.TryAcquire());
  EXPECT_TRUE(bucket.TryAcquire());
  EXPECT_TRUE(bucket.TryAcquire());
  EXPECT_FALSE(bucket.TryAcquire());
  clock.Advance(499ms);
  EXPECT_FALSE(bucket.TryAcquire());
  clock.Advance(1ms);
  EXPECT_TRUE(bucket.TryAcquire());
  EXPECT_FALSE(bucket.TryAcquire());
}

TEST(TokenBucketTest, PenaltyBlocksEveryCallerUntilItPasses) {
  testing::FakeClock clock;
  TokenBucket bucket(clock, 100, 10);
  bucket.Penalize(2s);
  EXPECT_FALSE(bucket.TryAcquire());
  clock.Advance(1999ms);
  EXPECT_FALSE(bucket.TryAcquire());
  clock.Advance(20ms);
  EXPECT_TRUE(bucket.TryAcquire());
}

TEST(TokenBucketTest, AcquireWaitsForTheClockAndStopsOnRequest) {
  testing::FakeClock clock;
  TokenBucket bucket(clock, 1, 1);
  ASSERT_TRUE(bucket.Acquire());
  bool got = false;
  std::jthread waiter([&] { got = bucket.Acquire(); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(1s);
  waiter.join();
  EXPECT_TRUE(got);

  std::stop_source stop;
  bool stopped_result = true;
  std::jthread stopped([&] { stopped_result = bucket.Acquire(stop.get_token()); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  stop.request_stop();
  stopped.join();
  EXPECT_FALSE(stopped_result);
}

TEST(TokenBucketTest, ZeroRateIsUnlimited) {
  testing::FakeClock clock;
  TokenBucket bucket(clock, 0, 1);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(bucket.TryAcquire());
  }
}

}  // namespace
}  // namespace sbx::controller
