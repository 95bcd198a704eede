#include "controller/base/classify_error.h"

#include <gtest/gtest.h>

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Status;
using api::StatusCode;

struct Row {
  StatusCode code;
  bool transient;
  const char* reason;
};

TEST(ClassifyErrorTest, MapsEveryCanonicalCode) {
  const Row rows[] = {
      {StatusCode::kUnavailable, true, "Unavailable"},
      {StatusCode::kDeadlineExceeded, true, "Timeout"},
      {StatusCode::kResourceExhausted, true, "RateLimited"},
      {StatusCode::kAborted, true, "Conflict"},
      {StatusCode::kInternal, true, "InternalError"},
      {StatusCode::kUnknown, true, "Unknown"},
      {StatusCode::kCancelled, true, "Cancelled"},
      {StatusCode::kDataLoss, true, "DataLoss"},
      {StatusCode::kInvalidArgument, false, "InvalidSpec"},
      {StatusCode::kOutOfRange, false, "InvalidSpec"},
      {StatusCode::kFailedPrecondition, false, "FailedPrecondition"},
      {StatusCode::kPermissionDenied, false, "PermissionDenied"},
      {StatusCode::kUnauthenticated, false, "Unauthenticated"},
      {StatusCode::kAlreadyExists, false, "AlreadyExists"},
      {StatusCode::kNotFound, false, "NotFound"},
      {StatusCode::kUnimplemented, false, "Unimplemented"},
  };
  for (const Row& row : rows) {
    const ErrorClass c = ClassifyError(Status(row.code, "boom"));
    SCOPED_TRACE(api::StatusCodeName(row.code));
    EXPECT_EQ(c.transient(), row.transient);
    EXPECT_EQ(c.reason, row.reason);
    EXPECT_FALSE(c.retry_after.has_value());
  }
}

TEST(ClassifyErrorTest, KeepsRetryAfterOfTransientErrors) {
  const ErrorClass limited =
      ClassifyError(api::ResourceExhaustedError("429 Too Many Requests").WithRetryAfter(20s));
  EXPECT_TRUE(limited.transient());
  EXPECT_EQ(limited.reason, "RateLimited");
  EXPECT_EQ(limited.retry_after, 20s);

  const ErrorClass unavailable = ClassifyError(api::UnavailableError("503").WithRetryAfter(3s));
  EXPECT_EQ(unavailable.retry_after, 3s);
}

TEST(ClassifyErrorTest, TerminalErrorsIgnoreRetryAfter) {
  const ErrorClass c = ClassifyError(api::PermissionDeniedError("403").WithRetryAfter(5s));
  EXPECT_FALSE(c.transient());
  EXPECT_FALSE(c.retry_after.has_value());
}

TEST(ClassifyErrorTest, OkIsNothingToRetry) {
  const ErrorClass c = ClassifyError(api::OkStatus());
  EXPECT_FALSE(c.transient());
  EXPECT_EQ(c.reason, "Ok");
}

TEST(IsTerminalReasonTest, KnowsEveryTerminalClassAndReconcilerReason) {
  for (api::StatusCode code :
       {api::StatusCode::kInvalidArgument, api::StatusCode::kFailedPrecondition,
        api::StatusCode::kPermissionDenied, api::StatusCode::kUnauthenticated,
        api::StatusCode::kAlreadyExists, api::StatusCode::kNotFound,
        api::StatusCode::kUnimplemented}) {
    const ErrorClass c = ClassifyError(api::Status(code, "x"));
    EXPECT_TRUE(IsTerminalReason(c.reason)) << c.reason;
  }
  for (api::StatusCode code : {api::StatusCode::kUnavailable, api::StatusCode::kResourceExhausted,
                               api::StatusCode::kAborted, api::StatusCode::kInternal}) {
    EXPECT_FALSE(IsTerminalReason(ClassifyError(api::Status(code, "x")).reason));
  }
  EXPECT_TRUE(IsTerminalReason("ImmutableFieldChanged"));
  EXPECT_TRUE(IsTerminalReason("SandboxIdConflict"));
  EXPECT_FALSE(IsTerminalReason("SetupFailed"));  // retried with backoff
  EXPECT_FALSE(IsTerminalReason(""));
}

TEST(ClassifyErrorTest, AReasonCarriedByTheStatusWinsButTheCodeDecidesRetrying) {
  const ErrorClass c = ClassifyError(
      api::FailedPreconditionError("host x needs credentials").WithReason("CredentialsMissing"));
  EXPECT_EQ(c.reason, "CredentialsMissing");
  EXPECT_FALSE(c.transient());
  EXPECT_TRUE(IsTerminalReason("CredentialsMissing"));
  EXPECT_TRUE(IsTerminalReason("SecretNotAllowed"));
  // Annotate keeps it.
  EXPECT_EQ(ClassifyError(api::UnavailableError("x").WithReason("Flaky").Annotate("GET /a")).reason,
            "Flaky");
}

// Every API error carries a fresh request id: the condition must not, or each failed attempt
// is a status change.
TEST(ConditionMessageTest, DropsRequestIdsSoRepeatedFailuresWriteTheSameCondition) {
  const api::Status first = api::UnauthenticatedError(
      "POST /api/2.0/sandboxes: HTTP 401 UNAUTHENTICATED: Invalid token (request_id 7f3a-1)");
  const api::Status second = api::UnauthenticatedError(
      "POST /api/2.0/sandboxes: HTTP 401 UNAUTHENTICATED: Invalid token (request_id 9c2e-2)");
  EXPECT_EQ(ConditionMessage(first), ConditionMessage(second));
  EXPECT_EQ(ConditionMessage(first),
            "POST /api/2.0/sandboxes: HTTP 401 UNAUTHENTICATED: Invalid token");
  EXPECT_EQ(ConditionMessage(api::InternalError("a (request_id x) b (request_id y)")), "a b");
  EXPECT_EQ(ConditionMessage(api::InternalError("no id (request_id")), "no id (request_id");
}

}  // namespace
}  // namespace sbx::controller

namespace sbx::controller {
namespace {

TEST(ClassifyErrorTest, ARetryScheduledKeepsItsCodesClassAndCarriesTheWait) {
  const api::Status scheduled =
      RetryScheduled(api::UnavailableError("HTTP 503"), std::chrono::milliseconds(1500));
  EXPECT_TRUE(IsRetryScheduled(scheduled));
  EXPECT_FALSE(IsRetryScheduled(api::UnavailableError("HTTP 503")));
  EXPECT_FALSE(IsRetryScheduled(api::OkStatus()));
  const ErrorClass c = ClassifyError(scheduled);
  EXPECT_TRUE(c.transient());
  EXPECT_EQ(c.reason, "RetryScheduled");
  EXPECT_EQ(c.retry_after, std::optional<std::chrono::milliseconds>(1500));
}

}  // namespace
}  // namespace sbx::controller
