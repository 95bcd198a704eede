// The one retry decision of the cloud clients (STYLE rule 10), parameterised by each API's error
// table, with delays from the engine's Backoff (no second backoff formula).
//
// An ErrorTable says, per API, what a non-2xx reply means (its Status, the server's retry hint
// and verdict) and which failures may be retried for a call of a given idempotency. Everything
// else is common:
//   status OK or kCancelled                        → stop
//   attempts_made >= max_attempts                  → stop
//   the table says not retryable                   → stop
//   retry hint > max_retry_after                   → stop; the Status keeps retry_after so the
//                                                    caller can requeue after it
//   otherwise wait: the hint plus U(0, retry_after_jitter) when the hint is > 0, else
//   backoff.Delay(attempts_made); stop instead if elapsed + delay would exceed `budget`.
// Pure; thread-safe.
#pragma once

#include <chrono>
#include <optional>

#include "api/status.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/cloud/http/http_transport.h"

namespace sbx::controller::http {

// Each API states its own (DefaultRetryPolicy() in its http_errors.h); these defaults are the
// OpenAI SDKs'.
struct RetryPolicy {
  int max_attempts = 3;
  BackoffPolicy backoff{std::chrono::milliseconds(500), std::chrono::seconds(8), 0.25};
  std::chrono::milliseconds budget{std::chrono::seconds(90)};  // since the first attempt began
  std::chrono::milliseconds max_retry_after{std::chrono::seconds(120)};  // longer: left to caller
  std::chrono::milliseconds retry_after_jitter{0};  // added to a hint, times U(0, 1)
};

enum class Idempotency { kIdempotent, kNotIdempotent };

// A failed attempt.
struct AttemptFailure {
  api::Status status;      // the error, with retry_after when the server sent a hint
  int http_status = 0;     // 0: no HTTP response (transport failure, no credentials)
  bool maybe_sent = true;  // false only if the request certainly did not reach the server
  std::optional<bool> should_retry{};  // the server's own verdict, where the API has one
};

// One API's error mapping. Implementations are stateless and thread-safe.
class ErrorTable {
 public:
  virtual ~ErrorTable() = default;
  // The failure for a non-2xx `response`: its Status (with retry_after from the server's hints,
  // relative to `now`), http_status and should_retry.
  virtual AttemptFailure FromResponse(const HttpResponse& response, Clock::WallTime now) const = 0;
  // Whether `failure` may be retried at all for a call of `idempotency` (attempts, budget and
  // hints are NextRetryDelay's business).
  virtual bool Retryable(const AttemptFailure& failure, Idempotency idempotency) const = 0;
};

// The delay before the next attempt, or nullopt to give up and return `failure.status`.
// `attempts_made` >= 1; `elapsed` is the time since the first attempt started; `backoff` is
// built from policy.backoff (its randomness is the jitter).
std::optional<std::chrono::milliseconds> NextRetryDelay(
    const RetryPolicy& policy, const ErrorTable& errors, Idempotency idempotency,
    const AttemptFailure& failure, int attempts_made, std::chrono::milliseconds elapsed,
    const Backoff& backoff);

}  // namespace sbx::controller::http
