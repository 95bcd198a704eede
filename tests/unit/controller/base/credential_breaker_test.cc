#include "controller/base/credential_breaker.h"

#include <gtest/gtest.h>

#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

TEST(CredentialBreakerTest, ARejectionStopsCallsForACoolDownThatDoubles) {
  testing::FakeClock clock;
  CredentialBreaker breaker(clock);
  EXPECT_FALSE(breaker.Check().has_value());
  const api::Status rejected = api::UnauthenticatedError("HTTP 401: invalid token");
  breaker.Rejected(rejected);
  ASSERT_TRUE(breaker.Check().has_value());
  EXPECT_EQ(*breaker.Check(), rejected);
  clock.Advance(29s);
  EXPECT_TRUE(breaker.Check().has_value());
  clock.Advance(1s);
  EXPECT_FALSE(breaker.Check().has_value());  // one call may go
  breaker.Rejected(rejected);                 // and is rejected again: 60 s now
  clock.Advance(59s);
  EXPECT_TRUE(breaker.Check().has_value());
  clock.Advance(1s);
  EXPECT_FALSE(breaker.Check().has_value());
}

TEST(CredentialBreakerTest, AnyOtherAnswerClosesItAndTheCoolDownCapsAtTenMinutes) {
  testing::FakeClock clock;
  CredentialBreaker breaker(clock);
  for (int i = 0; i < 10; ++i) {
    breaker.Rejected(api::UnauthenticatedError("401"));
  }
  clock.Advance(9min + 59s);
  EXPECT_TRUE(breaker.Check().has_value());
  clock.Advance(1s);
  EXPECT_FALSE(breaker.Check().has_value());
  breaker.Accepted();
  breaker.Rejected(api::UnauthenticatedError("401"));
  clock.Advance(30s);
  EXPECT_FALSE(breaker.Check().has_value());  // back to the first cool-down
}

}  // namespace
}  // namespace sbx::controller
