#include "api/rfc3339.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

const WallTime kNoon(seconds(1788264000));  // 2026-09-01T12:00:00Z

TEST(FormatRfc3339Test, WritesUtcWithSecondPrecision) {
  EXPECT_EQ(FormatRfc3339(kNoon), "2026-09-01T12:00:00Z");
  EXPECT_EQ(FormatRfc3339(kNoon + milliseconds(999)), "2026-09-01T12:00:00Z");
  EXPECT_EQ(FormatRfc3339(WallTime{}), "1970-01-01T00:00:00Z");
}

TEST(ParseRfc3339Test, ReadsWhatFormatWrites) {
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(kNoon)), kNoon);
  EXPECT_EQ(ParseRfc3339("2026-09-02T12:00:00Z"), kNoon + hours(24));
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00z"), kNoon);
}

TEST(ParseRfc3339Test, KeepsFractionsOfAnyLength) {
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00.5Z"), kNoon + milliseconds(500));
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00.500Z"), kNoon + milliseconds(500));
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00.000000001Z"), kNoon + nanoseconds(1));
  // Digits beyond nanoseconds are dropped, not rounded.
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00.1234567899Z"), kNoon + nanoseconds(123456789));
}

TEST(ParseRfc3339Test, AppliesNumericOffsets) {
  EXPECT_EQ(ParseRfc3339("2026-09-01T14:00:00+02:00"), kNoon);
  EXPECT_EQ(ParseRfc3339("2026-09-01T10:30:00-01:30"), kNoon);
  EXPECT_EQ(ParseRfc3339("2026-09-01T12:00:00+00:00"), kNoon);
  EXPECT_EQ(ParseRfc3339("2026-09-02T02:00:00.25+14:00"), kNoon + milliseconds(250));
}

TEST(ParseRfc3339Test, ChecksTheCalendar) {
  EXPECT_EQ(ParseRfc3339("2028-02-29T00:00:00Z").has_value(), true);  // leap year
  EXPECT_FALSE(ParseRfc3339("2026-02-29T00:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-02-30T00:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-13-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-00-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-00T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T24:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:60:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:61Z").has_value());
  EXPECT_EQ(ParseRfc3339("2026-09-01T11:59:60Z"), kNoon);  // leap second
}

TEST(ParseRfc3339Test, RejectsMalformedText) {
  EXPECT_FALSE(ParseRfc3339("").has_value());
  EXPECT_FALSE(ParseRfc3339("yesterday").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00").has_value());  // no zone
  EXPECT_FALSE(ParseRfc3339("2026-09-01 12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00Zjunk").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00.Z").has_value());  // empty fraction
  EXPECT_FALSE(ParseRfc3339("26-09-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-9-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00+0200").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00+2:00").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00+02:0").has_value());
  EXPECT_FALSE(ParseRfc3339("2026-09-01T12:00:00+24:00").has_value());
  EXPECT_FALSE(ParseRfc3339(" 2026-09-01T12:00:00Z").has_value());
  EXPECT_FALSE(ParseRfc3339("+026-09-01T12:00:00Z").has_value());
}

TEST(UnixMillisTest, CountsFromTheEpochAndRoundTrips) {
  EXPECT_EQ(UnixMillis(*ParseRfc3339("1970-01-01T00:00:01.5Z")), 1500);
  EXPECT_EQ(UnixMillis(*ParseRfc3339("2026-09-01T12:00:00.250Z")), 1788264000250);
  EXPECT_EQ(FormatRfc3339Millis(FromUnixMillis(1788264000250)), "2026-09-01T12:00:00.250Z");
  // Before the epoch it rounds down, like the time it stands for.
  EXPECT_EQ(UnixMillis(FromUnixMillis(0) - std::chrono::microseconds(1)), -1);
}

}  // namespace
}  // namespace sbx::api
