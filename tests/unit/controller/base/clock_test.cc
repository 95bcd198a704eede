#include "controller/base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace sbx::controller {
namespace {

TEST(SystemClockTest, SleepReturnsFalseAsSoonAsStopIsRequested) {
  SystemClock clock;
  std::stop_source stop;
  std::jthread stopper([&] { stop.request_stop(); });
  const auto start = clock.Steady();
  EXPECT_FALSE(clock.SleepFor(std::chrono::hours(1), stop.get_token()));
  EXPECT_LT(clock.Steady() - start, std::chrono::minutes(1));
}

TEST(SystemClockTest, SleepReturnsTrueAtDeadline) {
  SystemClock clock;
  EXPECT_TRUE(clock.SleepFor(std::chrono::milliseconds(1), {}));
}

}  // namespace
}  // namespace sbx::controller
