// The one retry decision for OpenAI Agents API calls (STYLE rule 10; reference §5 "SDK retry
// rules"), with delays from the engine's Backoff (no second backoff formula).
//
// Decision table, first match wins:
//   status OK or kCancelled                          → stop
//   attempts_made >= max_attempts                   → stop
//   `x-should-retry: false`                          → stop
//   retry hint (retry-after-ms / retry-after) > max_retry_after (120 s)
//                                                    → stop; the Status keeps retry_after so the
//                                                      caller can requeue after it
//   request certainly never sent (connect phase)     → retry (any call)
//   `x-should-retry: true`                           → retry (any call: the server vouches)
//   not idempotent (create session, send events)     → stop: the server may have acted on it and
//                                                      Idempotency-Key is not honoured on create
//   idempotent (GET, DELETE) and HTTP 408, 429 or ≥ 500, or a transport failure
//   (kUnavailable, kDeadlineExceeded)                → retry
//   anything else (4xx incl. 409)                    → stop; a 409 conflict_error is a state
//                                                      conflict a quick retry does not clear
// Delay: the hint when it is in (0, max_retry_after], else backoff.Delay(attempts_made); the
// call stops instead if elapsed + delay would exceed `budget`. Pure; thread-safe.
#pragma once

#include <chrono>
#include <optional>

#include "api/status.h"
#include "controller/engine/backoff.h"

namespace sbx::controller::openai {

struct RetryPolicy {
  int max_attempts = 3;  // the SDK default: 2 retries
  // The SDK's 0.5 s·2ⁿ capped at 8 s with 25 % jitter.
  BackoffPolicy backoff{std::chrono::milliseconds(500), std::chrono::seconds(8), 0.25};
  std::chrono::milliseconds budget{std::chrono::seconds(90)};  // since the first attempt began
  std::chrono::milliseconds max_retry_after{std::chrono::seconds(120)};
};

enum class Idempotency { kIdempotent, kNotIdempotent };

// A failed attempt.
struct AttemptFailure {
  api::Status status;      // the error, with retry_after when the server sent a hint
  int http_status = 0;     // 0: no HTTP response (transport failure)
  bool maybe_sent = true;  // false only if the request certainly did not reach the server
  std::optional<bool> should_retry{};  // x-should-retry
};

// The delay before the next attempt, or nullopt to give up and return `failure.status`.
// `attempts_made` >= 1; `elapsed` is the time since the first attempt started.
std::optional<std::chrono::milliseconds> NextRetryDelay(
    const RetryPolicy& policy, Idempotency idempotency, const AttemptFailure& failure,
    int attempts_made, std::chrono::milliseconds elapsed, const Backoff& backoff);

}  // namespace sbx::controller::openai
