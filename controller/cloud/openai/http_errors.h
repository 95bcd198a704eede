// OpenAI error responses (reference/openai-agents-api.md §5) as Status, the server's retry
// hints, and the ErrorTable the shared http::RetryingCaller uses for this API. Pure; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/retry_policy.h"

namespace sbx::controller::openai {

// 400 → kInvalidArgument, 401 → kUnauthenticated, 403 → kPermissionDenied, 404 → kNotFound,
// 408 → kDeadlineExceeded, 409 → kAborted (kAlreadyExists when `error_code` contains
// "already_exists"), 422 → kInvalidArgument, 429 → kResourceExhausted, 500 → kInternal,
// 502/503/504 → kUnavailable; other 4xx → kInvalidArgument, other 5xx → kInternal.
api::StatusCode StatusCodeForHttp(int http_status, std::string_view error_code);

// A Status for a non-2xx response with body {"error":{"message","type","param","code"}} (or
// plain text / HTML, quoted briefly). Message: "HTTP 404 not_found_error: Session not found
// (request_id req_1)"; `param` is appended when set. `reason` stands in for an empty body.
api::Status StatusFromHttpError(int http_status, std::string_view reason, std::string_view body,
                                std::string_view request_id);

// The server's delay hint, as the OpenAI SDKs read it: `retry-after-ms` (milliseconds, may be
// fractional) first, then `retry-after` (seconds, may be fractional, or an HTTP date relative to
// `now`). nullopt when absent or unreadable; negative values are unreadable.
std::optional<std::chrono::milliseconds> RetryHint(const http::HttpResponse& response,
                                                   std::chrono::system_clock::time_point now);

// `x-should-retry: true|false`, nullopt when absent or anything else.
std::optional<bool> ShouldRetryHeader(const http::HttpResponse& response);

// The SDK's retry bounds: 3 attempts (2 retries), 0.5 s·2ⁿ capped at 8 s with 25 % jitter,
// within 90 s; hints up to 120 s are waited for, longer ones end the call at once.
http::RetryPolicy DefaultRetryPolicy();

// The OpenAI retry table (reference §5 "SDK retry rules"), first match wins:
//   `x-should-retry: false`                          → no
//   request certainly never sent (connect phase)     → yes (any call)
//   `x-should-retry: true`                           → yes (any call: the server vouches)
//   not idempotent (create session, send events)     → no: the server may have acted on it and
//                                                      Idempotency-Key is not honoured on create
//   idempotent (GET, DELETE) and HTTP 408, 429 or ≥ 500, or a transport failure
//   (kUnavailable, kDeadlineExceeded)                → yes
//   anything else (4xx incl. 409)                    → no; a 409 conflict_error is a state
//                                                      conflict a quick retry does not clear
// A response's Status names x-request-id and carries RetryHint as retry_after.
class ErrorTable final : public http::ErrorTable {
 public:
  http::AttemptFailure FromResponse(const http::HttpResponse& response,
                                    Clock::WallTime now) const override;
  bool Retryable(const http::AttemptFailure& failure, http::Idempotency idempotency) const override;
};

}  // namespace sbx::controller::openai
