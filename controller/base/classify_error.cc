#include "controller/base/classify_error.h"

#include <algorithm>
#include <array>

#include "api/conditions.h"

namespace sbx::controller {
namespace {

namespace reason = api::reason;

// The table of the header, by code alone.
ErrorClass ClassifyCode(const api::Status& status) {
  using api::StatusCode;
  using R = ErrorClass::Retry;
  auto transient = [&](std::string_view reason) {
    return ErrorClass{R::kTransient, std::string(reason), status.retry_after()};
  };
  auto terminal = [](std::string_view reason) {
    return ErrorClass{R::kTerminal, std::string(reason), std::nullopt};
  };

  switch (status.code()) {
    case StatusCode::kOk:
      return terminal(reason::kOk);
    case StatusCode::kUnavailable:
      return transient(reason::kUnavailable);
    case StatusCode::kDeadlineExceeded:
      return transient(reason::kTimeout);
    case StatusCode::kResourceExhausted:
      return transient(reason::kRateLimited);
    case StatusCode::kAborted:
      return transient(reason::kConflict);
    case StatusCode::kInternal:
      return transient(reason::kInternalError);
    case StatusCode::kUnknown:
      return transient(reason::kUnknown);
    case StatusCode::kCancelled:
      return transient(reason::kCancelled);
    case StatusCode::kDataLoss:
      return transient(reason::kDataLoss);
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return terminal(reason::kInvalidSpec);
    case StatusCode::kFailedPrecondition:
      return terminal(reason::kFailedPrecondition);
    case StatusCode::kPermissionDenied:
      return terminal(reason::kPermissionDenied);
    case StatusCode::kUnauthenticated:
      return terminal(reason::kUnauthenticated);
    case StatusCode::kAlreadyExists:
      return terminal(reason::kAlreadyExists);
    case StatusCode::kNotFound:
      return terminal(reason::kNotFound);
    case StatusCode::kUnimplemented:
      return terminal(reason::kUnimplemented);
  }
  // A code outside the enum is a bug in whoever built the Status; retrying is the safe answer.
  return transient(reason::kUnknown);
}

}  // namespace

ErrorClass ClassifyError(const api::Status& status) {
  ErrorClass error = ClassifyCode(status);
  if (!status.ok() && !status.reason().empty()) {
    error.reason = status.reason();  // more precise than the code's; the code decides retrying
  }
  return error;
}

api::Status RetryScheduled(const api::Status& failure, std::chrono::milliseconds wait) {
  return failure.WithRetryAfter(wait).WithReason(std::string(reason::kRetryScheduled));
}

namespace {
constexpr std::string_view kPaced = "Paced";
}  // namespace

api::Status PacingDeferred(const std::string& message, std::chrono::milliseconds wait) {
  return api::UnavailableError(message).WithRetryAfter(wait).WithReason(std::string(kPaced));
}

bool IsPacingDeferred(const api::Status& status) {
  return !status.ok() && status.reason() == kPaced;
}

bool IsRetryScheduled(const api::Status& status) {
  return !status.ok() && (status.reason() == reason::kRetryScheduled || IsPacingDeferred(status));
}

std::string ConditionMessage(const api::Status& status) {
  static constexpr std::string_view kMarker = " (request_id ";
  std::string message = status.message();
  for (size_t at = message.find(kMarker); at != std::string::npos; at = message.find(kMarker, at)) {
    const size_t close = message.find(')', at + kMarker.size());
    if (close == std::string::npos) {
      break;
    }
    message.erase(at, close + 1 - at);
  }
  return message;
}

bool IsTerminalReason(std::string_view condition_reason) {
  static constexpr std::array<std::string_view, 11> kTerminal = {
      // ClassifyError's terminal classes …
      reason::kInvalidSpec, reason::kFailedPrecondition, reason::kPermissionDenied,
      reason::kUnauthenticated, reason::kAlreadyExists, reason::kNotFound, reason::kUnimplemented,
      // … the reasons terminal errors carry (Status::reason) …
      reason::kCredentialsMissing, reason::kSecretNotAllowed,
      // … and what reconcilers report without an error.
      reason::kImmutableFieldChanged, reason::kSandboxIdConflict};
  return std::find(kTerminal.begin(), kTerminal.end(), condition_reason) != kTerminal.end();
}

}  // namespace sbx::controller
