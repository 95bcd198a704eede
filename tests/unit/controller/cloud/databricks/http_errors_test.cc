#include "controller/cloud/databricks/http_errors.h"

#include <gtest/gtest.h>

namespace sbx::controller::databricks {
namespace {

using api::StatusCode;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

TEST(HttpErrorsTest, StatusDecidesWhenErrorCodeIsNotInTheTable) {
  const struct {
    int http;
    StatusCode want;
  } cases[] = {
      {400, StatusCode::kInvalidArgument},  {401, StatusCode::kUnauthenticated},
      {403, StatusCode::kPermissionDenied}, {404, StatusCode::kNotFound},
      {409, StatusCode::kAborted},          {429, StatusCode::kResourceExhausted},
      {499, StatusCode::kCancelled},        {500, StatusCode::kInternal},
      {501, StatusCode::kUnimplemented},    {502, StatusCode::kUnavailable},
      {503, StatusCode::kUnavailable},      {504, StatusCode::kDeadlineExceeded},
      {418, StatusCode::kInvalidArgument},  {599, StatusCode::kInternal},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(StatusCodeForHttp(c.http, ""), c.want) << c.http;
    // NOT_FOUND and TEMPORARILY_UNAVAILABLE are not in the override table: status decides.
    EXPECT_EQ(StatusCodeForHttp(c.http, "NOT_FOUND"), c.want) << c.http;
    EXPECT_EQ(StatusCodeForHttp(c.http, "TEMPORARILY_UNAVAILABLE"), c.want) << c.http;
  }
}

TEST(HttpErrorsTest, ErrorCodeInTheTableBeatsTheStatus) {
  const struct {
    const char* code;
    StatusCode want;
  } cases[] = {
      {"INVALID_PARAMETER_VALUE", StatusCode::kInvalidArgument},
      {"INVALID_STATE", StatusCode::kInvalidArgument},
      {"RESOURCE_DOES_NOT_EXIST", StatusCode::kNotFound},
      {"ABORTED", StatusCode::kAborted},
      {"ALREADY_EXISTS", StatusCode::kAlreadyExists},
      {"RESOURCE_ALREADY_EXISTS", StatusCode::kAlreadyExists},
      {"RESOURCE_EXHAUSTED", StatusCode::kResourceExhausted},
      {"REQUEST_LIMIT_EXCEEDED", StatusCode::kResourceExhausted},
      {"UNKNOWN", StatusCode::kInternal},
      {"DATA_LOSS", StatusCode::kInternal},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(StatusCodeForHttp(500, c.code), c.want) << c.code;
    EXPECT_EQ(StatusCodeForHttp(400, c.code), c.want) << c.code;
  }
  EXPECT_EQ(StatusCodeForHttp(409, "RESOURCE_ALREADY_EXISTS"), StatusCode::kAlreadyExists);
}

TEST(HttpErrorsTest, StandardBodyKeepsMessageAndRequestId) {
  auto s = StatusFromHttpError(404, "Not Found", R"({"error_code":"NOT_FOUND",
      "message":"Sandbox not found",
      "details":[{"@type":"type.googleapis.com/google.rpc.RequestInfo","request_id":"req-42",
                  "serving_data":""}]})");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "HTTP 404 NOT_FOUND: Sandbox not found (request_id req-42)");
}

TEST(HttpErrorsTest, RetryInfoDetailBecomesRetryAfter) {
  auto s = StatusFromHttpError(429, "Too Many Requests", R"({"error_code":"REQUEST_LIMIT_EXCEEDED",
      "message":"slow down",
      "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retry_delay":"2.5s"}]})");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(s.retry_after().has_value());
  EXPECT_EQ(*s.retry_after(), 3000ms);  // durations round to whole seconds
}

// §1 quotas refused as §8.2's TooManyRequests class with a §8.1 QuotaFailure detail: a quota,
// not a rate limit, so it carries reason QuotaExceeded and is never retried inside the call.
TEST(HttpErrorsTest, QuotaFailureDetailIsAQuotaNotARateLimit) {
  auto s = StatusFromHttpError(429, "Too Many Requests", R"({"error_code":"RESOURCE_EXHAUSTED",
      "message":"Per-user sandbox quota of 40 reached; delete a sandbox to create another",
      "details":[{"@type":"type.googleapis.com/google.rpc.RequestInfo","request_id":"r1"},
                 {"@type":"type.googleapis.com/google.rpc.QuotaFailure",
                  "violations":[{"subject":"user","description":"…"}]}]})");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.reason(), "QuotaExceeded");
  EXPECT_EQ(s.message(),
            "HTTP 429 RESOURCE_EXHAUSTED: Per-user sandbox quota of 40 reached; delete a sandbox "
            "to create another (request_id r1)");
  EXPECT_FALSE(
      ErrorTable{}.Retryable(http::AttemptFailure{s, 429, true}, http::Idempotency::kIdempotent));
  // The rate limit (no QuotaFailure) keeps being retried.
  auto limited = StatusFromHttpError(429, "Too Many Requests",
                                     R"({"error_code":"REQUEST_LIMIT_EXCEEDED","message":"x"})");
  EXPECT_EQ(limited.reason(), "");
  EXPECT_TRUE(ErrorTable{}.Retryable(http::AttemptFailure{limited, 429, true},
                                     http::Idempotency::kIdempotent));
}

TEST(HttpErrorsTest, LegacyShapesAreUnderstood) {
  EXPECT_EQ(StatusFromHttpError(400, "Bad Request", R"({"error":"bad thing"})").message(),
            "HTTP 400: bad thing");
  EXPECT_EQ(StatusFromHttpError(403, "Forbidden", R"({"detail":"no","status":"403"})").message(),
            "HTTP 403: no");
  auto text = StatusFromHttpError(400, "Bad Request", "INVALID_PARAMETER_VALUE: nope");
  EXPECT_EQ(text.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(text.message(), "HTTP 400 INVALID_PARAMETER_VALUE: nope");
  auto html = StatusFromHttpError(500, "Internal Server Error",
                                  "<html><body><pre>java.lang.NPE</pre></body></html>");
  EXPECT_EQ(html.message(), "HTTP 500: java.lang.NPE");
  EXPECT_EQ(StatusFromHttpError(503, "Service Unavailable", "").message(),
            "HTTP 503: Service Unavailable");
}

TEST(HttpErrorsTest, GarbageBodyGivesAShortExcerpt) {
  const std::string garbage = "{not json" + std::string(5000, '#');
  auto s = StatusFromHttpError(500, "Internal Server Error", garbage);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_LT(s.message().size(), 300u);
  EXPECT_NE(s.message().find("{not json"), std::string::npos);
}

http::AttemptFailure Http(int status, StatusCode code) {
  return http::AttemptFailure{api::Status(code, "x"), status, true};
}

// The shared retry decision under this API's table, with the Backoff's jitter pinned.
std::optional<std::chrono::milliseconds> Decide(const http::RetryPolicy& p,
                                                http::Idempotency idempotency,
                                                const http::AttemptFailure& f, int attempts,
                                                std::chrono::milliseconds elapsed, double jitter) {
  const Backoff backoff(p.backoff, [jitter] { return jitter; });
  return http::NextRetryDelay(p, ErrorTable{}, idempotency, f, attempts, elapsed, backoff);
}
std::optional<std::chrono::milliseconds> Next(const http::AttemptFailure& f, int attempts,
                                              std::chrono::milliseconds elapsed, double jitter,
                                              const http::RetryPolicy& p = DefaultRetryPolicy()) {
  return Decide(p, http::Idempotency::kIdempotent, f, attempts, elapsed, jitter);
}

TEST(RetryTableTest, BackoffDoublesFromAQuarterToHalfASecondAndCapsAtTen) {
  // The engine's Backoff under DefaultRetryPolicy: at jitter 1 the upper end, at 0 the lower.
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 1, 0ms, 1.0), 500ms);
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 2, 0ms, 1.0), 1000ms);
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 3, 0ms, 1.0), 2000ms);
  http::RetryPolicy many = DefaultRetryPolicy();
  many.max_attempts = 50;
  many.budget = 1h;
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 6, 0ms, 1.0, many), 10000ms);
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 40, 0ms, 1.0, many), 10000ms);
  // Jitter spreads each step over [base/2, base].
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 1, 0ms, 0.0), 250ms);
  EXPECT_EQ(Next(Http(503, StatusCode::kUnavailable), 2, 0ms, 0.5), 750ms);
}

TEST(RetryTableTest, IdempotentCallsRetry429And503AndConnectionFailures) {
  http::RetryPolicy p = DefaultRetryPolicy();
  EXPECT_TRUE(Decide(p, http::Idempotency::kIdempotent, Http(429, StatusCode::kResourceExhausted),
                     1, 0ms, 0.5));
  EXPECT_TRUE(
      Decide(p, http::Idempotency::kIdempotent, Http(503, StatusCode::kUnavailable), 1, 0ms, 0.5));
  EXPECT_TRUE(
      Decide(p, http::Idempotency::kIdempotent, Http(0, StatusCode::kUnavailable), 1, 0ms, 0.5));
  EXPECT_TRUE(Decide(p, http::Idempotency::kIdempotent, Http(0, StatusCode::kDeadlineExceeded), 1,
                     0ms, 0.5));
}

TEST(RetryTableTest, OtherErrorsAreNotRetried) {
  http::RetryPolicy p = DefaultRetryPolicy();
  for (auto [http, code] :
       {std::pair{400, StatusCode::kInvalidArgument}, std::pair{404, StatusCode::kNotFound},
        std::pair{409, StatusCode::kAlreadyExists}, std::pair{500, StatusCode::kInternal},
        std::pair{504, StatusCode::kDeadlineExceeded}}) {
    EXPECT_FALSE(Decide(p, http::Idempotency::kIdempotent, Http(http, code), 1, 0ms, 0.5)) << http;
  }
  EXPECT_FALSE(
      Decide(p, http::Idempotency::kIdempotent, Http(0, StatusCode::kCancelled), 1, 0ms, 0.5));
}

TEST(RetryTableTest, NonIdempotentOnlyRetriesWhatNeverLeft) {
  http::RetryPolicy p = DefaultRetryPolicy();
  EXPECT_FALSE(Decide(p, http::Idempotency::kNotIdempotent, Http(503, StatusCode::kUnavailable), 1,
                      0ms, 0.5));
  EXPECT_FALSE(Decide(p, http::Idempotency::kNotIdempotent,
                      Http(429, StatusCode::kResourceExhausted), 1, 0ms, 0.5));
  EXPECT_FALSE(
      Decide(p, http::Idempotency::kNotIdempotent, Http(0, StatusCode::kUnavailable), 1, 0ms, 0.5));
  EXPECT_FALSE(Decide(p, http::Idempotency::kNotIdempotent, Http(0, StatusCode::kDeadlineExceeded),
                      1, 0ms, 0.5));
  http::AttemptFailure refused{api::UnavailableError("connection refused"), 0, false};
  EXPECT_TRUE(Decide(p, http::Idempotency::kNotIdempotent, refused, 1, 0ms, 0.5));
}

TEST(RetryTableTest, RetryAfterIsHonouredWithSmallJitter) {
  http::RetryPolicy p = DefaultRetryPolicy();
  http::AttemptFailure f = Http(429, StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(3s);
  EXPECT_EQ(Decide(p, http::Idempotency::kIdempotent, f, 1, 0ms, 0.0), 3000ms);
  EXPECT_EQ(Decide(p, http::Idempotency::kIdempotent, f, 1, 0ms, 1.0), 3250ms);
}

TEST(RetryTableTest, LongRetryAfterIsLeftToTheCaller) {
  http::RetryPolicy p = DefaultRetryPolicy();
  http::AttemptFailure f = Http(429, StatusCode::kResourceExhausted);
  f.status = f.status.WithRetryAfter(120s);
  EXPECT_FALSE(Decide(p, http::Idempotency::kIdempotent, f, 1, 0ms, 0.5));
}

TEST(RetryTableTest, AttemptsAndBudgetAreBounded) {
  http::RetryPolicy p = DefaultRetryPolicy();
  p.max_attempts = 3;
  p.budget = 5s;
  const http::AttemptFailure f = Http(503, StatusCode::kUnavailable);
  EXPECT_TRUE(Decide(p, http::Idempotency::kIdempotent, f, 2, 0ms, 0.5));
  EXPECT_FALSE(Decide(p, http::Idempotency::kIdempotent, f, 3, 0ms, 0.5));
  EXPECT_FALSE(Decide(p, http::Idempotency::kIdempotent, f, 1, 4900ms, 0.5));
}

}  // namespace
}  // namespace sbx::controller::databricks
