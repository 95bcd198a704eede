#include "controller/cloud/http/retry_policy.h"

namespace sbx::controller::http {

using std::chrono::milliseconds;

std::optional<milliseconds> NextRetryDelay(const RetryPolicy& policy, const ErrorTable& errors,
                                           Idempotency idempotency, const AttemptFailure& failure,
                                           int attempts_made, milliseconds elapsed,
                                           const Backoff& backoff) {
  if (failure.status.ok() || failure.status.code() == api::StatusCode::kCancelled) {
    return std::nullopt;
  }
  if (attempts_made >= policy.max_attempts) {
    return std::nullopt;
  }
  if (!errors.Retryable(failure, idempotency)) {
    return std::nullopt;
  }
  const std::optional<milliseconds> hint = failure.status.retry_after();
  if (hint && *hint > policy.max_retry_after) {
    return std::nullopt;
  }
  // Jittered(d, 1) is uniform in [0, 2d]: the hint gets U(0, retry_after_jitter) added.
  const milliseconds delay = hint && hint->count() > 0
                                 ? *hint + backoff.Jittered(policy.retry_after_jitter / 2, 1.0)
                                 : backoff.Delay(attempts_made);
  if (elapsed + delay > policy.budget) {
    return std::nullopt;
  }
  return delay;
}

}  // namespace sbx::controller::http
