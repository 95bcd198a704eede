#include "controller/engine/clock.h"

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

TEST(ClockTest, FormatsRfc3339Utc) {
  EXPECT_EQ(FormatRfc3339(Clock::WallTime(std::chrono::seconds(1788264000))),
            "2026-09-01T12:00:00Z");
}

TEST(ClockTest, ParsesRfc3339RoundTripAndOffsets) {
  const Clock::WallTime t(std::chrono::seconds(1788264000));
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(t)), t);
  EXPECT_EQ(ParseRfc3339("2026-09-01T14:00:00+02:00"), t);
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00.500Z"), t + std::chrono::milliseconds(500));
  EXPECT_FALSE(ParseRfc3339("2026-09-01 12:00:00").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-13-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00Zjunk").has_value());
  EXPECT_FALSE(ParseRfc3339("").has_value());
}

}  // namespace
}  // namespace sbx::controller
