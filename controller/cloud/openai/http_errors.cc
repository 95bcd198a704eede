#include "controller/cloud/openai/http_errors.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "api/text.h"
#include "controller/cloud/http/retry_after.h"
#include "controller/cloud/http/wire_text.h"
#include "controller/cloud/openai/wire_format.h"

namespace sbx::controller::openai {
namespace {

using api::Lower;
using api::Status;
using api::StatusCode;
using api::Trim;

}  // namespace

StatusCode StatusCodeForHttp(int http_status, std::string_view error_code) {
  switch (http_status) {
    case 400:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 408:
      return StatusCode::kDeadlineExceeded;
    case 409:
      return Lower(error_code).find("already_exists") != std::string::npos
                 ? StatusCode::kAlreadyExists
                 : StatusCode::kAborted;
    case 429:
      return StatusCode::kResourceExhausted;
    case 500:
      return StatusCode::kInternal;
    case 502:
    case 503:
    case 504:
      return StatusCode::kUnavailable;
    default:
      break;
  }
  if (http_status >= 500) {
    return StatusCode::kInternal;
  }
  return StatusCode::kInvalidArgument;
}

Status StatusFromHttpError(int http_status, std::string_view reason, std::string_view body,
                           std::string_view request_id) {
  std::string kind;  // type, or code when there is no type
  std::string code;
  std::string message;
  std::string param;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* err = nullptr;
  if (j.is_object()) {
    if (auto it = j.find("error"); it != j.end() && it->is_object()) {
      err = &*it;
    }
  }
  auto str = [](const nlohmann::json& obj, const char* key) -> std::string {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      return "";
    }
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  if (err != nullptr) {
    message = str(*err, "message");
    code = str(*err, "code");
    param = str(*err, "param");
    kind = str(*err, "type");
    if (kind.empty()) {
      kind = code;
    }
  } else if (!Trim(body).empty()) {
    message = http::BodyExcerpt(Trim(body), 200);
  }
  if (message.empty()) {
    message = reason.empty() ? "no error message" : std::string(reason);
  }
  std::string text = "HTTP " + std::to_string(http_status);
  if (!kind.empty()) {
    text += " " + kind;
    if (!code.empty() && code != kind) {
      text += "/" + code;
    }
  }
  text += ": " + message;
  if (!param.empty()) {
    text += " (param " + param + ")";
  }
  if (!request_id.empty()) {
    text += " (request_id " + std::string(request_id) + ")";
  }
  return Status(StatusCodeForHttp(http_status, code), std::move(text));
}

std::optional<std::chrono::milliseconds> RetryHint(const http::HttpResponse& response,
                                                   std::chrono::system_clock::time_point now) {
  if (const std::string* ms = response.Header("retry-after-ms")) {
    const std::string text(Trim(*ms));
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(value) && value >= 0 &&
        value < 1e12) {
      return std::chrono::milliseconds(std::llround(value));
    }
  }
  if (const std::string* header = response.Header("retry-after")) {
    return http::ParseRetryAfter(*header, now);
  }
  return std::nullopt;
}

std::optional<bool> ShouldRetryHeader(const http::HttpResponse& response) {
  if (const std::string* v = response.Header("x-should-retry")) {
    const std::string value = Lower(Trim(*v));
    if (value == "true") {
      return true;
    }
    if (value == "false") {
      return false;
    }
  }
  return std::nullopt;
}

http::RetryPolicy DefaultRetryPolicy() {
  using std::chrono::milliseconds;
  return http::RetryPolicy{.max_attempts = 3,
                           .backoff = {milliseconds(500), milliseconds(8'000), 0.25},
                           .budget = milliseconds(90'000),
                           .max_retry_after = milliseconds(120'000)};
}

http::AttemptFailure ErrorTable::FromResponse(const http::HttpResponse& response,
                                              Clock::WallTime now) const {
  http::AttemptFailure failure;
  const std::string* request_id = response.Header("x-request-id");
  failure.status = StatusFromHttpError(response.status, response.reason, response.body,
                                       request_id == nullptr ? "" : *request_id);
  if (auto hint = RetryHint(response, now)) {
    failure.status = failure.status.WithRetryAfter(*hint);
  }
  failure.http_status = response.status;
  failure.should_retry = ShouldRetryHeader(response);
  return failure;
}

bool ErrorTable::Retryable(const http::AttemptFailure& failure,
                           http::Idempotency idempotency) const {
  if (failure.should_retry == false) {
    return false;
  }
  if (!failure.maybe_sent && failure.status.code() == StatusCode::kAborted) {
    return false;  // refused before sending: this replica lost the workspace (FencedTransport)
  }
  if (!failure.maybe_sent || failure.should_retry == true) {
    return true;
  }
  if (idempotency != http::Idempotency::kIdempotent) {
    return false;
  }
  const int status = failure.http_status;
  if (status == 0) {
    const StatusCode code = failure.status.code();
    return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded;
  }
  return status == 408 || status == 429 || status >= 500;
}

}  // namespace sbx::controller::openai
