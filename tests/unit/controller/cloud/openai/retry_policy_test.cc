#include "controller/cloud/openai/retry_policy.h"

#include <gtest/gtest.h>

namespace sbx::controller::openai {
namespace {

using namespace std::chrono_literals;
using api::Status;
using api::StatusCode;

// Backoff with no jitter: Delay(n) = 500 ms · 2^(n-1), capped at 8 s.
const Backoff kBackoff(RetryPolicy{}.backoff, [] { return 0.5; });

AttemptFailure Http(int status, StatusCode code = StatusCode::kUnavailable) {
  return AttemptFailure{Status(code, "x"), status, true, std::nullopt};
}
AttemptFailure Transport(StatusCode code, bool maybe_sent) {
  return AttemptFailure{Status(code, "x"), 0, maybe_sent, std::nullopt};
}

std::optional<std::chrono::milliseconds> Decide(const AttemptFailure& f, Idempotency i,
                                                int attempts = 1,
                                                std::chrono::milliseconds elapsed = 0ms) {
  return NextRetryDelay(RetryPolicy{}, i, f, attempts, elapsed, kBackoff);
}

constexpr Idempotency kIdem = Idempotency::kIdempotent;
constexpr Idempotency kNonIdem = Idempotency::kNotIdempotent;

TEST(OpenAiRetryPolicyTest, IdempotentCallsRetryTransientHttpStatuses) {
  for (int http : {408, 429, 500, 502, 503, 504}) {
    EXPECT_EQ(Decide(Http(http), kIdem), 500ms) << http;
  }
  for (int http : {400, 401, 403, 404, 409, 422}) {
    EXPECT_EQ(Decide(Http(http), kIdem), std::nullopt) << http;
  }
}

TEST(OpenAiRetryPolicyTest, IdempotentCallsRetryTransportFailures) {
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, true), kIdem), 500ms);
  EXPECT_EQ(Decide(Transport(StatusCode::kDeadlineExceeded, true), kIdem), 500ms);
  EXPECT_EQ(Decide(Transport(StatusCode::kInternal, true), kIdem), std::nullopt);
}

TEST(OpenAiRetryPolicyTest, NonIdempotentCallsRetryOnlyWhenNothingWasSent) {
  for (int http : {408, 429, 500, 503}) {
    EXPECT_EQ(Decide(Http(http), kNonIdem), std::nullopt) << http;
  }
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, true), kNonIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kDeadlineExceeded, true), kNonIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, false), kNonIdem), 500ms);
}

TEST(OpenAiRetryPolicyTest, ShouldRetryHeaderOverrides) {
  AttemptFailure yes = Http(400, StatusCode::kInvalidArgument);
  yes.should_retry = true;
  EXPECT_EQ(Decide(yes, kIdem), 500ms);
  AttemptFailure yes_post = Http(500, StatusCode::kInternal);
  yes_post.should_retry = true;
  EXPECT_EQ(Decide(yes_post, kNonIdem), 500ms);
  AttemptFailure no = Http(503);
  no.should_retry = false;
  EXPECT_EQ(Decide(no, kIdem), std::nullopt);
}

TEST(OpenAiRetryPolicyTest, HonoursRetryHintUpTo120Seconds) {
  AttemptFailure f = Http(429, StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(1500ms);
  EXPECT_EQ(Decide(f, kIdem), 1500ms);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_EQ(Decide(f, kIdem), std::nullopt) << "120 s exceeds the 90 s budget";
  f.status = f.status.WithRetryAfter(121s);
  EXPECT_EQ(NextRetryDelay(RetryPolicy{.budget = 1h}, kIdem, f, 1, 0ms, kBackoff), std::nullopt);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_EQ(NextRetryDelay(RetryPolicy{.budget = 1h}, kIdem, f, 1, 0ms, kBackoff), 120s);
}

TEST(OpenAiRetryPolicyTest, ZeroHintFallsBackToBackoff) {
  AttemptFailure f = Http(503);
  f.status = f.status.WithRetryAfter(0ms);
  EXPECT_EQ(Decide(f, kIdem, 2), 1000ms);
}

TEST(OpenAiRetryPolicyTest, BackoffGrowsAndIsCapped) {
  EXPECT_EQ(Decide(Http(503), kIdem, 1), 500ms);
  EXPECT_EQ(Decide(Http(503), kIdem, 2), 1000ms);
  const RetryPolicy many{.max_attempts = 20, .budget = 1h};
  EXPECT_EQ(NextRetryDelay(many, kIdem, Http(503), 10, 0ms, kBackoff), 8s);
}

TEST(OpenAiRetryPolicyTest, StopsAfterMaxAttemptsOrBudget) {
  EXPECT_EQ(Decide(Http(503), kIdem, 3), std::nullopt);
  EXPECT_EQ(Decide(Http(503), kIdem, 1, 89'600ms), std::nullopt);
  EXPECT_EQ(Decide(Http(503), kIdem, 1, 89'500ms), 500ms);
}

TEST(OpenAiRetryPolicyTest, NeverRetriesSuccessOrCancellation) {
  EXPECT_EQ(Decide(AttemptFailure{}, kIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kCancelled, false), kIdem), std::nullopt);
}

}  // namespace
}  // namespace sbx::controller::openai
