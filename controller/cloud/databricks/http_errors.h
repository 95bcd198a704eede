// Databricks REST error responses (reference/databricks-sandbox-api.md §8.1, §8.2) as Status:
// the body's `error_code` wins when it is one of the codes in the §8.2 table, otherwise the HTTP
// status decides. The message keeps the server's message and `details[].request_id`.
// ErrorTable is what the shared http::RetryingCaller needs of this API: that mapping plus
// Retry-After, and which failures a retry may clear. Pure; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"
#include "controller/cloud/http/retry_policy.h"

namespace sbx::controller::databricks {

// The canonical code for an HTTP status and (possibly empty) body error_code:
// 400 → kInvalidArgument, 401 → kUnauthenticated, 403 → kPermissionDenied, 404 → kNotFound,
// 409 → kAborted (kAlreadyExists for ALREADY_EXISTS/RESOURCE_ALREADY_EXISTS), 429 →
// kResourceExhausted, 499 → kCancelled, 500 → kInternal, 501 → kUnimplemented, 502/503 →
// kUnavailable, 504 → kDeadlineExceeded; other 4xx → kInvalidArgument, other 5xx → kInternal.
api::StatusCode StatusCodeForHttp(int http_status, std::string_view error_code);

// A Status for a non-2xx response. Understands the standard body
// {"error_code","message","details":[{"@type":"…RequestInfo","request_id"}, …]}, the legacy
// {"error": "…"} and SCIM {"detail": "…"} shapes, plain text and HTML. The message looks like
// "HTTP 404 NOT_FOUND: Sandbox not found (request_id abc)". A RetryInfo detail becomes
// retry_after. A QuotaFailure detail (a 429 RESOURCE_EXHAUSTED for the per-user or workspace
// sandbox quota) gives Status::reason "QuotaExceeded". `reason` (e.g. "Not Found") stands in for
// an empty body.
api::Status StatusFromHttpError(int http_status, std::string_view reason, std::string_view body);

// Databricks' retry bounds (reference §8.3): 6 attempts within 60 s; backoff delays of
// 250–500 ms doubling up to 10 s; a Retry-After longer than 30 s ends the call at once so the
// controller can requeue it instead of blocking a worker; a Retry-After gets up to 250 ms of
// jitter.
http::RetryPolicy DefaultRetryPolicy();

// The Databricks retry table (reference §8.3). Idempotent calls (GET, LIST, PATCH, DELETE,
// start, stop, and create, which is idempotent by its deterministic sandbox_id) are retried on
// 429, 503, connection failures and timeouts. A non-idempotent call (exec-sync) is retried only
// when the request cannot have reached the server (connect-phase failure, or no credentials yet:
// kUnavailable or kResourceExhausted). A quota refusal (reason QuotaExceeded) is never retried
// in the call: waiting does not free a slot. A response's Status carries the body's RetryInfo, or
// the Retry-After header when there is one, as retry_after.
class ErrorTable final : public http::ErrorTable {
 public:
  http::AttemptFailure FromResponse(const http::HttpResponse& response,
                                    Clock::WallTime now) const override;
  bool Retryable(const http::AttemptFailure& failure, http::Idempotency idempotency) const override;
};

}  // namespace sbx::controller::databricks
