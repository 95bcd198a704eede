#include "controller/cloud/http/redact.h"

namespace sbx::controller::http {

std::string Redact(std::string text, std::string_view secret) {
  if (secret.size() < 4) {
    return text;
  }
  for (size_t p = text.find(secret); p != std::string::npos; p = text.find(secret, p)) {
    text.replace(p, secret.size(), "***");
  }
  return text;
}

api::Status RedactAuthorization(const api::Status& status, std::string_view authorization) {
  std::string text = Redact(status.message(), authorization);
  if (const size_t space = authorization.find(' '); space != std::string_view::npos) {
    text = Redact(std::move(text), authorization.substr(space + 1));
  }
  if (text == status.message()) {
    return status;
  }
  api::Status out(status.code(), std::move(text));
  if (status.retry_after()) {
    out = out.WithRetryAfter(*status.retry_after());
  }
  if (!status.reason().empty()) {
    out = out.WithReason(status.reason());
  }
  return out;
}

}  // namespace sbx::controller::http
