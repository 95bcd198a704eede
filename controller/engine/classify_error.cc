#include "controller/engine/classify_error.h"

#include <algorithm>
#include <array>

namespace sbx::controller {
namespace {

// The table of the header, by code alone.
ErrorClass ClassifyCode(const api::Status& status) {
  using api::StatusCode;
  using R = ErrorClass::Retry;
  auto transient = [&](const char* reason) {
    return ErrorClass{R::kTransient, reason, status.retry_after()};
  };
  auto terminal = [](const char* reason) { return ErrorClass{R::kTerminal, reason, std::nullopt}; };

  switch (status.code()) {
    case StatusCode::kOk:
      return terminal("Ok");
    case StatusCode::kUnavailable:
      return transient("Unavailable");
    case StatusCode::kDeadlineExceeded:
      return transient("Timeout");
    case StatusCode::kResourceExhausted:
      return transient("RateLimited");
    case StatusCode::kAborted:
      return transient("Conflict");
    case StatusCode::kInternal:
      return transient("InternalError");
    case StatusCode::kUnknown:
      return transient("Unknown");
    case StatusCode::kCancelled:
      return transient("Cancelled");
    case StatusCode::kDataLoss:
      return transient("DataLoss");
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return terminal("InvalidSpec");
    case StatusCode::kFailedPrecondition:
      return terminal("FailedPrecondition");
    case StatusCode::kPermissionDenied:
      return terminal("PermissionDenied");
    case StatusCode::kUnauthenticated:
      return terminal("Unauthenticated");
    case StatusCode::kAlreadyExists:
      return terminal("AlreadyExists");
    case StatusCode::kNotFound:
      return terminal("NotFound");
    case StatusCode::kUnimplemented:
      return terminal("Unimplemented");
  }
  // A code outside the enum is a bug in whoever built the Status; retrying is the safe answer.
  return transient("Unknown");
}

}  // namespace

ErrorClass ClassifyError(const api::Status& status) {
  ErrorClass error = ClassifyCode(status);
  if (!status.ok() && !status.reason().empty()) {
    error.reason = status.reason();  // more precise than the code's; the code decides retrying
  }
  return error;
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

bool IsTerminalReason(std::string_view reason) {
  static constexpr std::array<std::string_view, 11> kTerminal = {
      // ClassifyError's terminal classes …
      "InvalidSpec", "FailedPrecondition", "PermissionDenied", "Unauthenticated", "AlreadyExists",
      "NotFound", "Unimplemented",
      // … the reasons terminal errors carry (Status::reason) …
      "CredentialsMissing", "SecretNotAllowed",
      // … and what reconcilers report without an error.
      "ImmutableFieldChanged", "SandboxIdConflict"};
  return std::find(kTerminal.begin(), kTerminal.end(), reason) != kTerminal.end();
}

}  // namespace sbx::controller
