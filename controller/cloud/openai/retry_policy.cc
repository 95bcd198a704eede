#include "controller/cloud/openai/retry_policy.h"

namespace sbx::controller::openai {

using api::StatusCode;
using std::chrono::milliseconds;

std::optional<milliseconds> NextRetryDelay(const RetryPolicy& policy, Idempotency idempotency,
                                           const AttemptFailure& failure, int attempts_made,
                                           milliseconds elapsed, const Backoff& backoff) {
  const StatusCode code = failure.status.code();
  if (failure.status.ok() || code == StatusCode::kCancelled) {
    return std::nullopt;
  }
  if (attempts_made >= policy.max_attempts) {
    return std::nullopt;
  }
  if (failure.should_retry == false) {
    return std::nullopt;
  }
  const std::optional<milliseconds> hint = failure.status.retry_after();
  if (hint && *hint > policy.max_retry_after) {
    return std::nullopt;
  }
  bool retryable = false;
  if (!failure.maybe_sent) {
    retryable = true;
  } else if (failure.should_retry == true) {
    retryable = true;
  } else if (idempotency == Idempotency::kIdempotent) {
    const int http = failure.http_status;
    if (http == 0) {
      retryable = code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded;
    } else {
      retryable = http == 408 || http == 429 || http >= 500;
    }
  }
  if (!retryable) {
    return std::nullopt;
  }
  const milliseconds delay = hint && hint->count() > 0 ? *hint : backoff.Delay(attempts_made);
  if (elapsed + delay > policy.budget) {
    return std::nullopt;
  }
  return delay;
}

}  // namespace sbx::controller::openai
