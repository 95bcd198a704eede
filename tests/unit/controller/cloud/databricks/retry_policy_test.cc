#include "controller/cloud/databricks/retry_policy.h"

#include <gtest/gtest.h>

namespace sbx::controller::databricks {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

AttemptFailure Http(int status, api::StatusCode code) {
  return AttemptFailure{api::Status(code, "x"), status, true};
}

TEST(RetryPolicyTest, BackoffDoublesFromHalfASecondAndCapsAtTen) {
  RetryPolicy p;
  EXPECT_EQ(BackoffDelay(p, 1, 1.0), 500ms);
  EXPECT_EQ(BackoffDelay(p, 2, 1.0), 1000ms);
  EXPECT_EQ(BackoffDelay(p, 3, 1.0), 2000ms);
  EXPECT_EQ(BackoffDelay(p, 6, 1.0), 10000ms);
  EXPECT_EQ(BackoffDelay(p, 40, 1.0), 10000ms);
  // Jitter spreads each step over [base/2, base].
  EXPECT_EQ(BackoffDelay(p, 1, 0.0), 250ms);
  EXPECT_EQ(BackoffDelay(p, 2, 0.5), 750ms);
}

TEST(RetryPolicyTest, IdempotentCallsRetry429And503AndConnectionFailures) {
  RetryPolicy p;
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kIdempotent,
                             Http(429, api::StatusCode::kResourceExhausted), 1, 0ms, 0.5));
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kIdempotent, Http(503, api::StatusCode::kUnavailable),
                             1, 0ms, 0.5));
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kIdempotent, Http(0, api::StatusCode::kUnavailable), 1,
                             0ms, 0.5));
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kIdempotent,
                             Http(0, api::StatusCode::kDeadlineExceeded), 1, 0ms, 0.5));
}

TEST(RetryPolicyTest, OtherErrorsAreNotRetried) {
  RetryPolicy p;
  for (auto [http, code] :
       {std::pair{400, api::StatusCode::kInvalidArgument},
        std::pair{404, api::StatusCode::kNotFound}, std::pair{409, api::StatusCode::kAlreadyExists},
        std::pair{500, api::StatusCode::kInternal},
        std::pair{504, api::StatusCode::kDeadlineExceeded}}) {
    EXPECT_FALSE(NextRetryDelay(p, Idempotency::kIdempotent, Http(http, code), 1, 0ms, 0.5))
        << http;
  }
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kIdempotent, Http(0, api::StatusCode::kCancelled), 1,
                              0ms, 0.5));
}

TEST(RetryPolicyTest, NonIdempotentOnlyRetriesWhatNeverLeft) {
  RetryPolicy p;
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kNotIdempotent,
                              Http(503, api::StatusCode::kUnavailable), 1, 0ms, 0.5));
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kNotIdempotent,
                              Http(429, api::StatusCode::kResourceExhausted), 1, 0ms, 0.5));
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kNotIdempotent,
                              Http(0, api::StatusCode::kUnavailable), 1, 0ms, 0.5));
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kNotIdempotent,
                              Http(0, api::StatusCode::kDeadlineExceeded), 1, 0ms, 0.5));
  AttemptFailure refused{api::UnavailableError("connection refused"), 0, false};
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kNotIdempotent, refused, 1, 0ms, 0.5));
}

TEST(RetryPolicyTest, RetryAfterIsHonouredWithSmallJitter) {
  RetryPolicy p;
  AttemptFailure f = Http(429, api::StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(3s);
  EXPECT_EQ(NextRetryDelay(p, Idempotency::kIdempotent, f, 1, 0ms, 0.0), 3000ms);
  EXPECT_EQ(NextRetryDelay(p, Idempotency::kIdempotent, f, 1, 0ms, 1.0), 3250ms);
}

TEST(RetryPolicyTest, LongRetryAfterIsLeftToTheCaller) {
  RetryPolicy p;
  AttemptFailure f = Http(429, api::StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kIdempotent, f, 1, 0ms, 0.5));
}

TEST(RetryPolicyTest, AttemptsAndBudgetAreBounded) {
  RetryPolicy p;
  p.max_attempts = 3;
  p.budget = 5s;
  const AttemptFailure f = Http(503, api::StatusCode::kUnavailable);
  EXPECT_TRUE(NextRetryDelay(p, Idempotency::kIdempotent, f, 2, 0ms, 0.5));
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kIdempotent, f, 3, 0ms, 0.5));
  EXPECT_FALSE(NextRetryDelay(p, Idempotency::kIdempotent, f, 1, 4900ms, 0.5));
}

}  // namespace
}  // namespace sbx::controller::databricks
