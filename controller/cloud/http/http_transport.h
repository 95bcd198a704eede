// HttpTransport and StreamingTransport: one HTTP exchange, the I/O boundary of every cloud client
// (the Databricks Sandbox API, its OAuth endpoints and the OpenAI Agents API).
//
// HttpTransport::Send reads the whole reply. StreamingTransport::Stream hands a 2xx body over
// chunk by chunk as bytes arrive (the SSE event stream):
//   - non-2xx: the whole (error) body is read into result.response; no handler runs; OK status.
//   - 2xx: on_open(head) runs once with status and headers, then on_data(chunk) for every chunk
//     as it arrives, until end of body (→ OK), on_data returns false (→ OK; the connection is
//     closed, not reused), `stop` (→ kCancelled, the connection is closed at once, also while
//     blocked waiting for bytes), a broken connection (→ kUnavailable) or `request.timeout` of
//     silence (→ kDeadlineExceeded; it is an inactivity timer).
// Neither throws: a failure before a response is a Status (kUnavailable for connection
// failures, kDeadlineExceeded for a timeout, kCancelled when `stop` fires, which also aborts the
// in-flight request) with `maybe_sent` telling whether the request could have reached the
// server. Any HTTP status is a successful exchange. Handlers run on the calling thread.
// Implementations are thread-safe; the cpprestsdk ones keep one http_client (and its connection
// pool) per origin and timeout.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/status.h"

namespace sbx::controller::http {

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

struct StreamHandlers {
  std::function<void(const HttpResponse& head)> on_open;  // body empty
  std::function<bool(std::string_view chunk)> on_data;
};

class StreamingTransport {
 public:
  virtual ~StreamingTransport() = default;
  virtual HttpResult Stream(const HttpRequest& request, const StreamHandlers& handlers,
                            std::stop_token stop) = 0;
};

// The cpprestsdk transports (cpprest_transport.cc). The streaming one reads
// response.body()'s stream buffer as data arrives; `stop` is bridged to a
// pplx::cancellation_token_source, which closes the connection.
std::unique_ptr<HttpTransport> MakeCppRestTransport();
std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport();

}  // namespace sbx::controller::http
