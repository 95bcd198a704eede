#include "controller/cloud/databricks/retry_policy.h"

#include <algorithm>

namespace sbx::controller::databricks {

using api::CancelledError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::UnauthenticatedError;

using std::chrono::milliseconds;

milliseconds BackoffDelay(const RetryPolicy& policy, int attempts_made, double jitter01) {
  const int shift = std::clamp(attempts_made - 1, 0, 30);
  const long long base_ms =
      std::min<long long>(policy.initial_backoff.count() << shift, policy.max_backoff.count());
  const double j = std::clamp(jitter01, 0.0, 1.0);
  return milliseconds(static_cast<long long>(base_ms * (0.5 + 0.5 * j)));
}

std::optional<milliseconds> NextRetryDelay(const RetryPolicy& policy, Idempotency idempotency,
                                           const AttemptFailure& failure, int attempts_made,
                                           milliseconds elapsed, double jitter01) {
  const api::StatusCode code = failure.status.code();
  if (failure.status.ok() || code == api::StatusCode::kCancelled) {
    return std::nullopt;
  }
  if (attempts_made >= policy.max_attempts) {
    return std::nullopt;
  }
  bool retryable = false;
  if (!failure.maybe_sent) {
    // Nothing reached the server: safe even for exec-sync.
    retryable =
        code == api::StatusCode::kUnavailable || code == api::StatusCode::kResourceExhausted;
  } else if (idempotency == Idempotency::kIdempotent) {
    if (failure.http_status == 429 || failure.http_status == 503) {
      retryable = true;
    } else if (failure.http_status == 0) {
      retryable =
          code == api::StatusCode::kUnavailable || code == api::StatusCode::kDeadlineExceeded;
    }
  }
  if (!retryable) {
    return std::nullopt;
  }
  milliseconds delay;
  if (auto hint = failure.status.retry_after()) {
    if (*hint > policy.max_retry_after) {
      return std::nullopt;
    }
    delay = *hint + milliseconds(static_cast<long long>(policy.retry_after_jitter.count() *
                                                        std::clamp(jitter01, 0.0, 1.0)));
  } else {
    delay = BackoffDelay(policy, attempts_made, jitter01);
  }
  if (elapsed + delay > policy.budget) {
    return std::nullopt;
  }
  return delay;
}

}  // namespace sbx::controller::databricks
