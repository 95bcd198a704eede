#include "controller/cloud/http/retry_after.h"

#include <gtest/gtest.h>

namespace sbx::controller::http {
namespace {

using namespace std::chrono_literals;

TEST(RetryAfterTest, RetryAfterSeconds) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(ParseRetryAfter("3", now), 3000ms);
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), 0ms);
  EXPECT_EQ(ParseRetryAfter("1.5", now), 1500ms);
  EXPECT_FALSE(ParseRetryAfter("", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("soon", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("-1", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("3s", now).has_value());
}

TEST(RetryAfterTest, RetryAfterHttpDate) {
  // 2026-09-01T12:00:00Z
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1788264000));
  EXPECT_EQ(ParseRetryAfter("Tue, 01 Sep 2026 12:00:07 GMT", now), 7000ms);
  EXPECT_EQ(ParseRetryAfter("Tue, 01 Sep 2026 11:00:00 GMT", now), 0ms);
  EXPECT_FALSE(ParseRetryAfter("Tue, 01 Sep 2026 12:00:07 PST", now).has_value());
}

}  // namespace
}  // namespace sbx::controller::http
