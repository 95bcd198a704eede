// Databricks REST error responses (reference/databricks-sandbox-api.md §8.1, §8.2) as Status:
// the body's `error_code` wins when it is one of the codes in the §8.2 table, otherwise the HTTP
// status decides. The message keeps the server's message and `details[].request_id`. Also
// parses Retry-After. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"

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
// retry_after. `reason` (e.g. "Not Found") stands in for an empty body.
api::Status StatusFromHttpError(int http_status, std::string_view reason, std::string_view body);

// Retry-After: delta-seconds ("3", leniently "1.5") or an HTTP date
// ("Wed, 21 Oct 2026 07:28:00 GMT"), relative to `now`. A date in the past is 0. nullopt when
// absent or unreadable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view header,
                                                         std::chrono::system_clock::time_point now);

}  // namespace sbx::controller::databricks
