// Status and StatusOr<T>: the error currency of every sbx module (abseil-style).
//
// A Status is a canonical code plus a message a user can act on. It may carry a retry hint
// (from a server's Retry-After) and a condition reason (a CamelCase word more precise than the
// code's, e.g. "CredentialsMissing") that the one retry policy, controller ClassifyError, reads.
// Values are immutable after construction and cheap to copy; thread-compatible.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sbx::api {

enum class StatusCode {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "NOT_FOUND", "INVALID_ARGUMENT", … (the canonical upper-snake names).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Server-provided delay before a retry makes sense (HTTP Retry-After), if any.
  std::optional<std::chrono::milliseconds> retry_after() const { return retry_after_; }
  Status WithRetryAfter(std::chrono::milliseconds delay) const {
    Status s = *this;
    s.retry_after_ = delay;
    return s;
  }
  // A condition reason that names this error more precisely than its code does (ClassifyError
  // uses it instead of the code's reason; the code still decides transient vs terminal).
  const std::string& reason() const { return reason_; }
  Status WithReason(std::string reason) const {
    Status s = *this;
    s.reason_ = std::move(reason);
    return s;
  }
  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK. Keeps the retry hint
  // and the reason.
  Status Annotate(std::string_view prefix) const;

  // "NOT_FOUND: sandbox x not found", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::optional<std::chrono::milliseconds> retry_after_;
  std::string reason_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status AbortedError(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status DeadlineExceededError(std::string m) {
  return Status(StatusCode::kDeadlineExceeded, std::move(m));
}
inline Status UnauthenticatedError(std::string m) {
  return Status(StatusCode::kUnauthenticated, std::move(m));
}
inline Status PermissionDeniedError(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status CancelledError(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
inline Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}

// Either a value or a non-OK Status. Accessing value() of an error aborts (a bug, not input).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { CheckNotOk(); }        // NOLINT: implicit by design
  StatusOr(Status&& status) : v_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(const T& value) : v_(value) {}                              // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}                        // NOLINT

  bool ok() const { return v_.index() == 1; }
  Status status() const { return ok() ? Status() : std::get<0>(v_); }

  const T& value() const& {
    CheckOk();
    return std::get<1>(v_);
  }
  T& value() & {
    CheckOk();
    return std::get<1>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<1>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckNotOk() const;
  void CheckOk() const;
  std::variant<Status, T> v_;
};

namespace internal {
[[noreturn]] void DieBecauseOf(const char* what, const Status& status);
}  // namespace internal

template <typename T>
void StatusOr<T>::CheckNotOk() const {
  if (std::get<0>(v_).ok()) {
    internal::DieBecauseOf("StatusOr constructed from an OK Status", std::get<0>(v_));
  }
}
template <typename T>
void StatusOr<T>::CheckOk() const {
  if (!ok()) {
    internal::DieBecauseOf("StatusOr::value() on an error", std::get<0>(v_));
  }
}

}  // namespace sbx::api

#define SBX_STATUS_CONCAT_INNER_(a, b) a##b
#define SBX_STATUS_CONCAT_(a, b) SBX_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::sbx::api::Status sbx_status_tmp_ = (expr); \
    if (!sbx_status_tmp_.ok()) {                 \
      return sbx_status_tmp_;                    \
    }                                            \
  } while (0)

// ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define ASSIGN_OR_RETURN(lhs, expr) \
  SBX_ASSIGN_OR_RETURN_IMPL_(SBX_STATUS_CONCAT_(sbx_statusor_, __LINE__), lhs, expr)
// `tmp` is an identifier and `lhs` may be a declaration ("auto x"): neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SBX_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) {                                 \
    return tmp.status();                           \
  }                                                \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
