#include "controller/cloud/openai/http_errors.h"

#include <gtest/gtest.h>

namespace sbx::controller::openai {
namespace {

using api::Status;
using api::StatusCode;
using http::HttpResponse;
using namespace std::chrono_literals;

TEST(OpenAiHttpErrorsTest, MapsHttpStatusToCanonicalCode) {
  const std::pair<int, StatusCode> table[] = {
      {400, StatusCode::kInvalidArgument},  {401, StatusCode::kUnauthenticated},
      {403, StatusCode::kPermissionDenied}, {404, StatusCode::kNotFound},
      {408, StatusCode::kDeadlineExceeded}, {409, StatusCode::kAborted},
      {422, StatusCode::kInvalidArgument},  {429, StatusCode::kResourceExhausted},
      {500, StatusCode::kInternal},         {502, StatusCode::kUnavailable},
      {503, StatusCode::kUnavailable},      {504, StatusCode::kUnavailable},
      {418, StatusCode::kInvalidArgument},  {599, StatusCode::kInternal},
  };
  for (const auto& [http, code] : table) {
    EXPECT_EQ(StatusCodeForHttp(http, ""), code) << http;
  }
  EXPECT_EQ(StatusCodeForHttp(409, "conflict_error"), StatusCode::kAborted);
  EXPECT_EQ(StatusCodeForHttp(409, "resource_already_exists"), StatusCode::kAlreadyExists);
}

TEST(OpenAiHttpErrorsTest, KeepsMessageTypeCodeParamAndRequestId) {
  const auto s = StatusFromHttpError(
      404, "Not Found",
      R"({"error":{"message":"Session sess_x not found","type":"not_found_error",
          "param":null,"code":"not_found_error"}})",
      "req_abc");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "HTTP 404 not_found_error: Session sess_x not found (request_id req_abc)");
  const auto p = StatusFromHttpError(
      400, "", R"({"error":{"message":"bad","type":"invalid_request_error","param":"agent.model",
          "code":"missing"}})",
      "");
  EXPECT_EQ(p.message(), "HTTP 400 invalid_request_error/missing: bad (param agent.model)");
}

TEST(OpenAiHttpErrorsTest, HandlesNullCodeAndNonJsonBodies) {
  const auto auth = StatusFromHttpError(
      401, "Unauthorized",
      R"({"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":null}})",
      "");
  EXPECT_EQ(auth.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.message(), "HTTP 401 invalid_request_error: Incorrect API key provided");
  const auto html = StatusFromHttpError(502, "Bad Gateway", "<html>upstream down</html>", "r1");
  EXPECT_EQ(html.code(), StatusCode::kUnavailable);
  EXPECT_EQ(html.message(), "HTTP 502: <html>upstream down</html> (request_id r1)");
  const auto empty = StatusFromHttpError(503, "Service Unavailable", "", "");
  EXPECT_EQ(empty.message(), "HTTP 503: Service Unavailable");
  const auto conflict =
      StatusFromHttpError(409, "", R"({"error":{"message":"session has no durably bound CCA root",
          "type":"conflict_error","code":"conflict_error"}})",
                          "");
  EXPECT_EQ(conflict.code(), StatusCode::kAborted);
}

HttpResponse WithHeaders(std::map<std::string, std::string> headers) {
  HttpResponse r;
  r.status = 429;
  r.headers = std::move(headers);
  return r;
}

TEST(OpenAiHttpErrorsTest, RetryHintPrefersMillisecondsHeader) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after-ms", "1500"}, {"retry-after", "9"}}), now),
            1500ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after-ms", "250.4"}}), now), 250ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after-ms", "soon"}, {"retry-after", "2"}}), now),
            2000ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after-ms", "-5"}}), now), std::nullopt);
}

TEST(OpenAiHttpErrorsTest, RetryHintReadsSecondsAndHttpDates) {
  const auto now = std::chrono::system_clock::from_time_t(1788264000);  // 2026-09-01T12:00:00Z
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after", "3"}}), now), 3000ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after", "0.5"}}), now), 500ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after", "Tue, 01 Sep 2026 12:00:30 GMT"}}), now),
            30000ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after", "Tue, 01 Sep 2026 11:00:00 GMT"}}), now), 0ms);
  EXPECT_EQ(RetryHint(WithHeaders({{"retry-after", "whenever"}}), now), std::nullopt);
  EXPECT_EQ(RetryHint(WithHeaders({}), now), std::nullopt);
}

TEST(OpenAiHttpErrorsTest, ShouldRetryHeader) {
  EXPECT_EQ(ShouldRetryHeader(WithHeaders({{"x-should-retry", "true"}})), true);
  EXPECT_EQ(ShouldRetryHeader(WithHeaders({{"x-should-retry", " FALSE "}})), false);
  EXPECT_EQ(ShouldRetryHeader(WithHeaders({{"x-should-retry", "maybe"}})), std::nullopt);
  EXPECT_EQ(ShouldRetryHeader(WithHeaders({})), std::nullopt);
}

// Backoff with no jitter: Delay(n) = 500 ms · 2^(n-1), capped at 8 s.
const Backoff kBackoff(DefaultRetryPolicy().backoff, [] { return 0.5; });

http::AttemptFailure Http(int status, StatusCode code = StatusCode::kUnavailable) {
  return http::AttemptFailure{Status(code, "x"), status, true, std::nullopt};
}
http::AttemptFailure Transport(StatusCode code, bool maybe_sent) {
  return http::AttemptFailure{Status(code, "x"), 0, maybe_sent, std::nullopt};
}

std::optional<std::chrono::milliseconds> Decide(const http::AttemptFailure& f, http::Idempotency i,
                                                int attempts = 1,
                                                std::chrono::milliseconds elapsed = 0ms) {
  return http::NextRetryDelay(DefaultRetryPolicy(), ErrorTable{}, i, f, attempts, elapsed,
                              kBackoff);
}

http::RetryPolicy WithBudget(std::chrono::milliseconds budget) {
  http::RetryPolicy p = DefaultRetryPolicy();
  p.budget = budget;
  return p;
}
std::optional<std::chrono::milliseconds> Decide(const http::RetryPolicy& p, http::Idempotency i,
                                                const http::AttemptFailure& f, int attempts,
                                                std::chrono::milliseconds elapsed) {
  return http::NextRetryDelay(p, ErrorTable{}, i, f, attempts, elapsed, kBackoff);
}

constexpr http::Idempotency kIdem = http::Idempotency::kIdempotent;
constexpr http::Idempotency kNonIdem = http::Idempotency::kNotIdempotent;

TEST(OpenAiRetryTableTest, IdempotentCallsRetryTransientHttpStatuses) {
  for (int http : {408, 429, 500, 502, 503, 504}) {
    EXPECT_EQ(Decide(Http(http), kIdem), 500ms) << http;
  }
  for (int http : {400, 401, 403, 404, 409, 422}) {
    EXPECT_EQ(Decide(Http(http), kIdem), std::nullopt) << http;
  }
}

TEST(OpenAiRetryTableTest, IdempotentCallsRetryTransportFailures) {
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, true), kIdem), 500ms);
  EXPECT_EQ(Decide(Transport(StatusCode::kDeadlineExceeded, true), kIdem), 500ms);
  EXPECT_EQ(Decide(Transport(StatusCode::kInternal, true), kIdem), std::nullopt);
}

TEST(OpenAiRetryTableTest, NonIdempotentCallsRetryOnlyWhenNothingWasSent) {
  for (int http : {408, 429, 500, 503}) {
    EXPECT_EQ(Decide(Http(http), kNonIdem), std::nullopt) << http;
  }
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, true), kNonIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kDeadlineExceeded, true), kNonIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kUnavailable, false), kNonIdem), 500ms);
}

TEST(OpenAiRetryTableTest, ShouldRetryHeaderOverrides) {
  http::AttemptFailure yes = Http(400, StatusCode::kInvalidArgument);
  yes.should_retry = true;
  EXPECT_EQ(Decide(yes, kIdem), 500ms);
  http::AttemptFailure yes_post = Http(500, StatusCode::kInternal);
  yes_post.should_retry = true;
  EXPECT_EQ(Decide(yes_post, kNonIdem), 500ms);
  http::AttemptFailure no = Http(503);
  no.should_retry = false;
  EXPECT_EQ(Decide(no, kIdem), std::nullopt);
}

TEST(OpenAiRetryTableTest, HonoursRetryHintUpTo120Seconds) {
  http::AttemptFailure f = Http(429, StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(1500ms);
  EXPECT_EQ(Decide(f, kIdem), 1500ms);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_EQ(Decide(f, kIdem), std::nullopt) << "120 s exceeds the 90 s budget";
  f.status = f.status.WithRetryAfter(121s);
  EXPECT_EQ(Decide(WithBudget(1h), kIdem, f, 1, 0ms), std::nullopt);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_EQ(Decide(WithBudget(1h), kIdem, f, 1, 0ms), 120s);
}

TEST(OpenAiRetryTableTest, ZeroHintFallsBackToBackoff) {
  http::AttemptFailure f = Http(503);
  f.status = f.status.WithRetryAfter(0ms);
  EXPECT_EQ(Decide(f, kIdem, 2), 1000ms);
}

TEST(OpenAiRetryTableTest, BackoffGrowsAndIsCapped) {
  EXPECT_EQ(Decide(Http(503), kIdem, 1), 500ms);
  EXPECT_EQ(Decide(Http(503), kIdem, 2), 1000ms);
  http::RetryPolicy many = WithBudget(1h);
  many.max_attempts = 20;
  EXPECT_EQ(Decide(many, kIdem, Http(503), 10, 0ms), 8s);
}

TEST(OpenAiRetryTableTest, StopsAfterMaxAttemptsOrBudget) {
  EXPECT_EQ(Decide(Http(503), kIdem, 3), std::nullopt);
  EXPECT_EQ(Decide(Http(503), kIdem, 1, 89'600ms), std::nullopt);
  EXPECT_EQ(Decide(Http(503), kIdem, 1, 89'500ms), 500ms);
}

TEST(OpenAiRetryTableTest, NeverRetriesSuccessOrCancellation) {
  EXPECT_EQ(Decide(http::AttemptFailure{}, kIdem), std::nullopt);
  EXPECT_EQ(Decide(Transport(StatusCode::kCancelled, false), kIdem), std::nullopt);
}

}  // namespace
}  // namespace sbx::controller::openai
