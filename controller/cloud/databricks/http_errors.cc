#include "controller/cloud/databricks/http_errors.h"

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/text.h"
#include "controller/cloud/databricks/wire_format.h"

namespace sbx::controller::databricks {

using api::CancelledError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::UnauthenticatedError;
namespace {

using api::Status;
using api::StatusCode;
using api::Trim;
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
  return s;
}

std::optional<std::chrono::milliseconds> ParseRetryAfter(
    std::string_view header, std::chrono::system_clock::time_point now) {
  header = Trim(header);
  if (header.empty()) {
    return std::nullopt;
  }
  if (std::isdigit(static_cast<unsigned char>(header.front()))) {
    const std::string text(header);
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds < 0 ||
        seconds > 365.0 * 24 * 3600) {
      return std::nullopt;
    }
    return std::chrono::milliseconds(std::llround(seconds * 1000));
  }
  // IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 §5.6.7).
  std::tm tm{};
  const std::string text(header);
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') {
    return std::nullopt;
  }
  const auto when = std::chrono::system_clock::from_time_t(timegm(&tm));
  if (when <= now) {
    return std::chrono::milliseconds(0);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(when - now);
}

}  // namespace sbx::controller::databricks
