#include "api/duration.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

using std::chrono::seconds;

TEST(DurationTest, ParsesGoStyleSubset) {
  EXPECT_EQ(*ParseDuration("90s"), seconds(90));
  EXPECT_EQ(*ParseDuration("15m"), seconds(900));
  EXPECT_EQ(*ParseDuration("1h30m"), seconds(5400));
  EXPECT_EQ(*ParseDuration("2h"), seconds(7200));
  EXPECT_EQ(*ParseDuration("0s"), seconds(0));
  EXPECT_EQ(*ParseDuration("0"), seconds(0));
  EXPECT_EQ(*ParseDuration("1h2m3s"), seconds(3723));
  EXPECT_EQ(*ParseDuration("90m"), seconds(5400));
}

TEST(DurationTest, RejectsBadInputWithOneLineMessages) {
  EXPECT_EQ(ParseDuration("15x").status().message(),
            "invalid duration \"15x\" (expected e.g. 90s, 15m, 1h30m)");
  EXPECT_EQ(ParseDuration("").status().message(),
            "invalid duration \"\": empty (expected e.g. 90s, 15m, 1h30m)");
  EXPECT_EQ(ParseDuration("-5m").status().message(),
            "invalid duration \"-5m\": must not be negative (expected e.g. 90s, 15m, 1h30m)");
  EXPECT_EQ(ParseDuration("15").status().message(),
            "invalid duration \"15\": missing unit (expected e.g. 90s, 15m, 1h30m)");
  EXPECT_EQ(ParseDuration("1.5h").status().message(),
            "invalid duration \"1.5h\": fractions are not supported (expected e.g. 90s, 15m, "
            "1h30m)");
  EXPECT_EQ(ParseDuration("99999999999999999999h").status().message(),
            "invalid duration \"99999999999999999999h\": too large (expected e.g. 90s, 15m, "
            "1h30m)");
  EXPECT_EQ(ParseDuration("9223372036854775807h").status().message(),
            "invalid duration \"9223372036854775807h\": too large (expected e.g. 90s, 15m, "
            "1h30m)");
  EXPECT_EQ(ParseDuration("30m1h").status().message(),
            "invalid duration \"30m1h\": units must appear once each, in the order h, m, s "
            "(expected e.g. 90s, 15m, 1h30m)");
  for (const char* bad : {"h", "m5", " 5m", "5m ", "5 m", "5ms", "1d", "abc", "5M"}) {
    EXPECT_EQ(ParseDuration(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DurationTest, FormatsCanonically) {
  EXPECT_EQ(FormatDuration(seconds(900)), "15m");
  EXPECT_EQ(FormatDuration(seconds(5400)), "1h30m");
  EXPECT_EQ(FormatDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(seconds(0)), "0s");
  EXPECT_EQ(FormatDuration(seconds(7200)), "2h");
  EXPECT_EQ(FormatDuration(seconds(3723)), "1h2m3s");
  EXPECT_EQ(FormatDuration(seconds(-5)), "0s");
}

TEST(DurationTest, FormatThenParseIsIdentity) {
  for (int64_t s : {0, 1, 59, 60, 61, 3599, 3600, 3601, 86400, 123456789}) {
    EXPECT_EQ(*ParseDuration(FormatDuration(seconds(s))), seconds(s)) << s;
  }
}

}  // namespace
}  // namespace sbx::api
