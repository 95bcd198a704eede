#include "controller/cloud/databricks/http_errors.h"

#include <nlohmann/json.hpp>

#include "api/conditions.h"
#include "api/text.h"
#include "controller/cloud/databricks/wire_format.h"
#include "controller/cloud/http/retry_after.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::databricks {

using api::Status;
using api::StatusCode;
using api::Trim;
using http::BodyExcerpt;

namespace {

using json = nlohmann::json;

bool IsErrorCodeToken(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

struct ParsedError {
  std::string error_code;
  std::string message;
  std::string request_id;
  std::optional<std::chrono::milliseconds> retry_delay;
  bool quota_failure = false;  // a google.rpc.QuotaFailure detail (§8.1)
};

ParsedError ParseBody(std::string_view reason, std::string_view body) {
  ParsedError e;
  const std::string_view trimmed = Trim(body);
  if (trimmed.empty()) {
    e.message = std::string(reason);
    return e;
  }
  if (trimmed.front() == '{') {
    try {
      const json j = json::parse(trimmed);
      auto str = [&](const char* key) -> std::string {
        auto it = j.find(key);
        return (it != j.end() && it->is_string()) ? it->get<std::string>() : "";
      };
      e.error_code = str("error_code");
      e.message = str("message");
      if (e.message.empty()) {
        e.message = str("error");  // API 1.2
      }
      if (e.message.empty()) {
        e.message = str("detail");  // SCIM
      }
      if (auto it = j.find("details"); it != j.end() && it->is_array()) {
        for (const auto& d : *it) {
          if (!d.is_object()) {
            continue;
          }
          if (auto t = d.find("@type");
              t != d.end() && t->is_string() &&
              t->get<std::string>().ends_with("google.rpc.QuotaFailure")) {
            e.quota_failure = true;
          }
          if (auto r = d.find("request_id"); r != d.end() && r->is_string()) {
            e.request_id = r->get<std::string>();
          }
          if (auto r = d.find("retry_delay"); r != d.end() && r->is_string()) {
            if (auto delay = ParseDuration(r->get<std::string>()); delay.ok()) {
              e.retry_delay = std::chrono::duration_cast<std::chrono::milliseconds>(*delay);
            }
          }
        }
      }
      if (e.message.empty() && e.error_code.empty()) {
        e.message = BodyExcerpt(trimmed);
      }
      return e;
    } catch (const std::exception&) {
      // Not JSON after all: fall through to the text shapes.
    }
  }
  // HTML with <pre>…</pre>.
  if (auto pre = trimmed.find("<pre>"); pre != std::string_view::npos) {
    auto end = trimmed.find("</pre>", pre);
    e.message = BodyExcerpt(Trim(trimmed.substr(
        pre + 5, end == std::string_view::npos ? std::string_view::npos : end - pre - 5)));
    return e;
  }
  // Plain text "ERROR_CODE: message".
  if (auto colon = trimmed.find(": ");
      colon != std::string_view::npos && IsErrorCodeToken(trimmed.substr(0, colon))) {
    e.error_code = std::string(trimmed.substr(0, colon));
    e.message = BodyExcerpt(trimmed.substr(colon + 2));
    return e;
  }
  e.message = BodyExcerpt(trimmed);
  return e;
}

}  // namespace

StatusCode StatusCodeForHttp(int http_status, std::string_view error_code) {
  // §8.2: these error codes override the HTTP status.
  if (error_code == "INVALID_PARAMETER_VALUE" || error_code == "INVALID_STATE") {
    return StatusCode::kInvalidArgument;
  }
  if (error_code == "RESOURCE_DOES_NOT_EXIST") {
    return StatusCode::kNotFound;
  }
  if (error_code == "ABORTED") {
    return StatusCode::kAborted;
  }
  if (error_code == "ALREADY_EXISTS" || error_code == "RESOURCE_ALREADY_EXISTS") {
    return StatusCode::kAlreadyExists;
  }
  if (error_code == "RESOURCE_EXHAUSTED" || error_code == "REQUEST_LIMIT_EXCEEDED") {
    return StatusCode::kResourceExhausted;
  }
  if (error_code == "UNKNOWN" || error_code == "DATA_LOSS") {
    return StatusCode::kInternal;
  }
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kAborted;
    case 429:
      return StatusCode::kResourceExhausted;
    case 499:
      return StatusCode::kCancelled;
    case 500:
      return StatusCode::kInternal;
    case 501:
      return StatusCode::kUnimplemented;
    case 502:
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_status >= 400 && http_status < 500) {
    return StatusCode::kInvalidArgument;
  }
  if (http_status >= 500 && http_status < 600) {
    return StatusCode::kInternal;
  }
  return StatusCode::kUnknown;
}

Status StatusFromHttpError(int http_status, std::string_view reason, std::string_view body) {
  ParsedError e = ParseBody(reason, body);
  std::string message = "HTTP " + std::to_string(http_status);
  if (!e.error_code.empty()) {
    message += " " + e.error_code;
  }
  if (!e.message.empty()) {
    message += ": " + e.message;
  }
  if (!e.request_id.empty()) {
    message += " (request_id " + e.request_id + ")";
  }
  Status s(StatusCodeForHttp(http_status, e.error_code), std::move(message));
  if (e.retry_delay) {
    s = s.WithRetryAfter(*e.retry_delay);
  }
  if (e.quota_failure) {
    // A quota, not a rate limit: waiting a second frees nothing, deleting a sandbox does.
    s = s.WithReason(std::string(api::reason::kQuotaExceeded));
  }
  return s;
}

http::RetryPolicy DefaultRetryPolicy() {
  using std::chrono::milliseconds;
  // Backoff: 375 ms·2ⁿ with ±1/3 jitter is 250–500 ms, then 500–1000 ms, … up to 10 s.
  return http::RetryPolicy{.max_attempts = 6,
                           .backoff = {milliseconds(375), milliseconds(10'000), 1.0 / 3},
                           .budget = milliseconds(60'000),
                           .max_retry_after = milliseconds(30'000),
                           .retry_after_jitter = milliseconds(250)};
}

http::AttemptFailure ErrorTable::FromResponse(const http::HttpResponse& response,
                                              Clock::WallTime now) const {
  http::AttemptFailure failure;
  failure.http_status = response.status;
  failure.status = StatusFromHttpError(response.status, response.reason, response.body);
  if (const std::string* header = response.Header("retry-after")) {
    if (auto delay = http::ParseRetryAfter(*header, now)) {
      failure.status = failure.status.WithRetryAfter(*delay);
    }
  }
  return failure;
}

bool ErrorTable::Retryable(const http::AttemptFailure& failure,
                           http::Idempotency idempotency) const {
  const StatusCode code = failure.status.code();
  if (failure.status.reason() == api::reason::kQuotaExceeded) {
    return false;  // the reconciler reports it and retries on the engine's backoff
  }
  if (!failure.maybe_sent) {
    // Nothing reached the server: safe even for exec-sync.
    return code == StatusCode::kUnavailable || code == StatusCode::kResourceExhausted;
  }
  if (idempotency != http::Idempotency::kIdempotent) {
    return false;
  }
  if (failure.http_status == 429 || failure.http_status == 503) {
    return true;
  }
  return failure.http_status == 0 &&
         (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded);
}

}  // namespace sbx::controller::databricks
