// OpenAI error responses (reference/openai-agents-api.md §5) as Status, and the server's retry
// hints. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"
#include "controller/cloud/databricks/http_transport.h"

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
std::optional<std::chrono::milliseconds> RetryHint(const databricks::HttpResponse& response,
                                                   std::chrono::system_clock::time_point now);

// `x-should-retry: true|false`, nullopt when absent or anything else.
std::optional<bool> ShouldRetryHeader(const databricks::HttpResponse& response);

}  // namespace sbx::controller::openai
