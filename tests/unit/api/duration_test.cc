#include "api/duration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

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
  EXPECT_EQ(ParseDuration("30m1h").status().message(),
            "invalid duration \"30m1h\": units must appear once each, in the order h, m, s "
            "(expected e.g. 90s, 15m, 1h30m)");
  for (const char* bad : {"h", "m5", " 5m", "5m ", "5 m", "5ms", "1d", "abc", "5M"}) {
    EXPECT_EQ(ParseDuration(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// Review #10, finding 5: 99999999999h parsed (3.6e14 s) and overflowed where it was turned
// into nanoseconds. Values up to kMaxDuration parse; anything above fails with one message,
// however far above (no int64 wrap-around in between).
TEST(DurationTest, RefusesValuesAboveTheMaximum) {
  EXPECT_EQ(kMaxDuration, std::chrono::hours(876000));
  EXPECT_EQ(*ParseDuration("876000h"), kMaxDuration);
  EXPECT_EQ(*ParseDuration("875999h59m59s"), kMaxDuration - seconds(1));
  EXPECT_EQ(*ParseDuration("3153600000s"), kMaxDuration);
  EXPECT_EQ(*ParseDuration("52560000m"), kMaxDuration);
  EXPECT_EQ(ParseDuration("99999999999h").status().message(),
            "invalid duration \"99999999999h\": more than the maximum of 876000h (100 years)");
  for (const char* big :
       {"876000h1s", "876001h", "3153600001s", "52560001m", "876000h0m1s", "9223372036854775807h",
        "99999999999999999999h", "2562048h", "153722867280912930m", "9223372036854775807s"}) {
    const StatusOr<seconds> d = ParseDuration(big);
    ASSERT_FALSE(d.ok()) << big << " parsed as " << d->count() << "s";
    EXPECT_EQ(d.status().message(), "invalid duration \"" + std::string(big) +
                                        "\": more than the maximum of 876000h (100 years)");
  }
  // The maximum is safe for every consumer: in nanoseconds, and added to the system clock.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::nanoseconds>(kMaxDuration).count(),
            std::numeric_limits<int64_t>::max() / 2);
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
