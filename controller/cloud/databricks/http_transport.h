// HttpTransport: one HTTP exchange, the I/O boundary of the Databricks client.
//
// HttpSandboxApi and the OAuth credential provider send through it; CppRestTransport
// (cpprestsdk http_client) is the real one, tests may use a fake. Send never throws: a
// transport failure is a Status (kUnavailable for connection failures, kDeadlineExceeded for a
// timeout, kCancelled when `stop` fires, which also aborts the in-flight request) with
// `maybe_sent` telling whether the request could have reached the server. Any HTTP status is a
// successful exchange. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/status.h"

namespace sbx::controller::databricks {

struct HttpRequest {
  std::string method;  // "GET", "POST", …
  // Absolute, already percent-encoded: "https://host[:port]/path?query".
  std::string url;
  // Header names as sent. Content-Type goes here too when there is a body.
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;
  // Longest silence allowed while waiting for the server (cpprest's timeout is an inactivity
  // timer, which for a single-shot reply is the whole exchange).
  std::chrono::milliseconds timeout{60'000};
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  // The header's value, or nullptr. `lower_name` must be lower-case.
  const std::string* Header(std::string_view lower_name) const {
    auto it = headers.find(std::string(lower_name));
    return it == headers.end() ? nullptr : &it->second;
  }
};

struct HttpResult {
  api::Status status;      // OK when a response arrived, whatever its HTTP status
  bool maybe_sent = true;  // false only when the failure was before any byte was sent
  HttpResponse response;   // valid when status is OK
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual HttpResult Send(const HttpRequest& request, std::stop_token stop) = 0;
};

// The cpprestsdk transport. Keeps one http_client (and its connection pool) per origin and
// timeout.
std::unique_ptr<HttpTransport> MakeCppRestTransport();

}  // namespace sbx::controller::databricks
