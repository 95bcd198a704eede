#include "controller/cloud/databricks/http_errors.h"

#include <gtest/gtest.h>

namespace sbx::controller::databricks {
namespace {

using api::StatusCode;
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

TEST(HttpErrorsTest, RetryAfterSeconds) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(ParseRetryAfter("3", now), 3000ms);
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), 0ms);
  EXPECT_EQ(ParseRetryAfter("1.5", now), 1500ms);
  EXPECT_FALSE(ParseRetryAfter("", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("soon", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("-1", now).has_value());
  EXPECT_FALSE(ParseRetryAfter("3s", now).has_value());
}

TEST(HttpErrorsTest, RetryAfterHttpDate) {
  // 2026-09-01T12:00:00Z
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1788264000));
  EXPECT_EQ(ParseRetryAfter("Tue, 01 Sep 2026 12:00:07 GMT", now), 7000ms);
  EXPECT_EQ(ParseRetryAfter("Tue, 01 Sep 2026 11:00:00 GMT", now), 0ms);
  EXPECT_FALSE(ParseRetryAfter("Tue, 01 Sep 2026 12:00:07 PST", now).has_value());
}

}  // namespace
}  // namespace sbx::controller::databricks
