// ClassifyError: THE retry policy (STYLE rule 10, DESIGN §3). Every error a reconciler returns
// goes through this one function; the worker loop (Manager) acts on its answer:
//
//   transient → requeue with per-key exponential backoff, never earlier than retry_after;
//   terminal  → no requeue: the reconciler has written a condition with `reason`, and the key is
//               looked at again only when the object or a dependency changes (or on resync).
//
// | code                | class     | reason              | note                                  |
// |---------------------|-----------|---------------------|---------------------------------------|
// | kUnavailable        | transient | Unavailable         | 503, connection refused, busy store   |
// | kDeadlineExceeded   | transient | Timeout             |                                       |
// | kResourceExhausted  | transient | RateLimited         | 429; honours the Retry-After hint     |
// | kAborted            | transient | Conflict            | resourceVersion CAS lost: re-read     |
// | kInternal           | transient | InternalError       | 500s, exceptions escaping reconcilers |
// | kUnknown            | transient | Unknown             |                                       |
// | kCancelled          | transient | Cancelled           | shutdown or timeout of a call         |
// | kDataLoss           | transient | DataLoss            | truncated / unparsable answer         |
// | kInvalidArgument    | terminal  | InvalidSpec         | the API rejected what the spec asks   |
// | kOutOfRange         | terminal  | InvalidSpec         |                                       |
// | kFailedPrecondition | terminal  | FailedPrecondition  | e.g. an immutable field changed       |
// | kPermissionDenied   | terminal  | PermissionDenied    | 403: missing scope or IP not allowed  |
// | kUnauthenticated    | terminal  | Unauthenticated     | 401: bad or expired credentials       |
// | kAlreadyExists      | terminal  | AlreadyExists       | 409 on something that is not ours     |
// | kNotFound           | terminal  | NotFound            | see below                             |
// | kUnimplemented      | terminal  | Unimplemented       |                                       |
//
// kNotFound is context-dependent: a 404 that a reconciler EXPECTS (GET of a sandbox not created
// yet, DELETE of one already gone, a deleted session) is part of its level logic and must be
// handled there, not returned. A NotFound that escapes a reconciler means something the spec
// refers to is missing (workspaceRef, a secret file or env var, a sandboxRef) — that waits for a
// spec or dependency change, so it is terminal; the dependency index re-enqueues the object when
// the missing one appears.
//
// A Status that carries a reason (Status::reason, e.g. "CredentialsMissing" from the cloud
// clients) keeps its code's class but reports that reason instead of the code's.
//
// Any transient error carrying Status::retry_after() keeps it in `retry_after`. A pure function;
// thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"

namespace sbx::controller {

struct ErrorClass {
  enum class Retry { kTransient, kTerminal };

  Retry retry = Retry::kTransient;
  std::string reason;  // CamelCase, usable as a condition reason
  // Server-requested minimum delay before the next attempt (transient only).
  std::optional<std::chrono::milliseconds> retry_after;

  bool transient() const { return retry == Retry::kTransient; }
};

// `status` must not be OK; an OK status classifies as terminal with reason "Ok" (nothing to
// retry).
ErrorClass ClassifyError(const api::Status& status);

// A call's failure whose retry was handed back to the work queue (inline_wait.h) instead of being
// waited inline on a reconcile thread: `failure` (its code, so its class) with retry_after =
// `wait` and reason RetryScheduled. It is not an observation: a reconciler that meets it keeps
// the conditions it last set and returns it, the skeleton records no outcome for it (Synced
// stays as it was), and the Manager requeues the key after the wait: for a server failure exactly
// then for the first WorkQueue::kHintedFailures failures in a row, and never sooner than the
// growing per-key backoff after that (for a 429, always), so a call that keeps failing is not
// retried every second forever.
api::Status RetryScheduled(const api::Status& failure, std::chrono::milliseconds wait);
// A needed call's wait for its pacing token, handed back the same way before anything was sent
// (EndpointPacing::TakeOrDefer): kUnavailable, retry_after = `wait`, reason Paced. It is no
// failure: the Manager requeues it exactly then without counting a failure of the key (its
// backoff does not grow), the metrics count it as result "paced" and sbxd logs it at debug.
api::Status PacingDeferred(const std::string& message, std::chrono::milliseconds wait);
bool IsPacingDeferred(const api::Status& status);
// A retry or a pacing wait handed back: either of the two above.
bool IsRetryScheduled(const api::Status& status);

// The message a condition shows for `status`: its message without per-request noise (the
// "(request_id …)" that the clients append), so that the same failure, repeated, writes the same
// condition — no status change, no store write, no watch event. Request ids stay in logs and
// events, which get the full message.
std::string ConditionMessage(const api::Status& status);

// Whether a condition reason means "stuck until the spec (or a dependency) changes": the
// terminal reasons of the table above, plus those reconcilers set without returning an error
// (ImmutableFieldChanged, SandboxIdConflict). `sbxctl wait` fails fast on these instead of
// waiting out its timeout.
bool IsTerminalReason(std::string_view reason);

}  // namespace sbx::controller
