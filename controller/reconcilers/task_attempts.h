// Retries of an AgentTask (DESIGN §8.1): what an ended attempt counts as for spec.retryOn,
// whether another attempt follows, its Idempotency-Key and its delay. Used by the AgentTask
// reconciler (it ends attempts) and by the pool's bookkeeping (a task waiting out its delay is
// neither queued demand nor ahead of anybody).
//
// Failure kinds:
//   InfrastructureFailure: turn.failed with one of the service's infrastructure codes
//     (connection_failed, server_error, internal_error, server_overloaded, rate_limit_exceeded,
//     sandbox_error, request_timeout: reference §2.3), or one of sbx's own:
//       WorkerLost      the worker (or its sandbox) was deleted while the attempt ran;
//       InputPostFailed the attempt reached its timeout with no turn, its last input POST having
//                       failed with a 5xx or a connection failure (re-POSTs within the attempt
//                       use the same key, so a POST that did arrive starts one turn only).
//   Failed: any other failed turn or refused input, unknown codes included (the agent's own).
//   TimedOut: spec.timeout passed (no infrastructure error recorded).
//   Succeeded and Cancelled are never retried.
//
// Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "controller/base/clock.h"

namespace sbx::controller {

// sbx's own attempt error codes (TaskError.code), both infrastructure failures.
inline constexpr std::string_view kWorkerLost = "WorkerLost";
inline constexpr std::string_view kInputPostFailed = "InputPostFailed";

// Whether a turn.failed code (or one of sbx's above) is an infrastructure failure.
bool IsInfrastructureCode(std::string_view code);

// What an attempt that ended in `phase` with `error_code` counts as; nullopt for Succeeded and
// Cancelled (and the unfinished phases).
std::optional<api::RetryOn> FailureKind(api::TaskPhase phase, std::string_view error_code);

// Whether the attempt that just ended (number `attempt`, from 1) is followed by another.
bool ShouldRetry(const api::AgentTaskSpec& spec, int attempt, api::TaskPhase phase,
                 std::string_view error_code);

// The Idempotency-Key of attempt n: the uid for the first (what §7.1 always sent, so a task
// submitted before an upgrade is never submitted twice), "<uid>-<n>" after.
std::string AttemptKey(const std::string& uid, int attempt);

// The wait before retry n (n ≥ 1, after attempt n): 10 s doubling, at most 1 h, and never
// shorter than `retry_after`.
std::chrono::milliseconds RetryDelay(int retry, std::chrono::milliseconds retry_after);

// Says why a task between attempts waits: "attempt 1 of 3 ended Failed (connection_failed:
// …); attempt 2 at <nextAttemptAt>".
std::string RetryMessage(const api::AgentTaskSpec& spec, const api::AgentTaskStatus& status);

// Whether the task is Queued between attempts and its next one is not due yet at `now`.
bool AwaitingRetry(const api::Object& task, Clock::WallTime now);

}  // namespace sbx::controller
