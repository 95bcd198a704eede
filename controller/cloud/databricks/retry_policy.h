// The one retry decision for Databricks calls (reference §8.3; STYLE rule 10).
//
// Idempotent calls (GET, LIST, PATCH, DELETE, start, stop, and create, which is idempotent by its
// deterministic sandbox_id) are retried on 429, 503, connection failures and timeouts, with
// jittered exponential backoff or the server's Retry-After. A non-idempotent call (exec-sync) is
// retried only when the request cannot have reached the server (connect-phase failure, or no
// credentials yet). Attempts and total time are bounded; a Retry-After longer than
// `max_retry_after` ends the call at once so the controller can requeue it instead of blocking a
// worker. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>

#include "api/status.h"

namespace sbx::controller::databricks {

struct RetryPolicy {
  int max_attempts = 6;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{10'000};
  std::chrono::milliseconds budget{60'000};           // from the first attempt's start
  std::chrono::milliseconds max_retry_after{30'000};  // longer hints are left to the caller
  std::chrono::milliseconds retry_after_jitter{250};  // added to a Retry-After, times U(0,1)
};

enum class Idempotency { kIdempotent, kNotIdempotent };

// A failed attempt.
struct AttemptFailure {
  api::Status status;      // the error, with retry_after when the server sent one
  int http_status = 0;     // 0: no HTTP response (transport failure)
  bool maybe_sent = true;  // false only if the request certainly did not reach the server
};

// Backoff after `attempts_made` (>= 1) failed attempts: base = initial·2^(n-1) capped at
// max_backoff, returned as base·(0.5 + 0.5·jitter01).
std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int attempts_made,
                                       double jitter01);

// The delay before the next attempt, or nullopt to give up and return `failure.status`.
// `elapsed` is the time since the first attempt started; jitter01 is uniform in [0, 1).
std::optional<std::chrono::milliseconds> NextRetryDelay(
    const RetryPolicy& policy, Idempotency idempotency, const AttemptFailure& failure,
    int attempts_made, std::chrono::milliseconds elapsed, double jitter01);

}  // namespace sbx::controller::databricks
