// StreamingTransport: one HTTP request whose 2xx response body is handed over incrementally,
// chunk by chunk as bytes arrive — the I/O boundary under AgentsApi::StreamEvents (SSE). The
// single-shot databricks::HttpTransport reads whole bodies, so it cannot serve a stream.
//
// Stream() semantics:
//   - non-2xx: the whole (error) body is read into result.response; no handler runs; OK status.
//   - 2xx: on_open(head) runs once with status and headers, then on_data(chunk) for every chunk
//     as it arrives, until end of body (→ OK), on_data returns false (→ OK; the connection is
//     closed, not reused), `stop` (→ kCancelled, the connection is closed at once, also while
//     blocked waiting for bytes), a broken connection (→ kUnavailable) or `request.timeout` of
//     silence (→ kDeadlineExceeded; it is an inactivity timer).
//   - failures before a response: like HttpTransport (kUnavailable with maybe_sent=false for
//     connect-phase errors, kDeadlineExceeded, kCancelled).
// Never throws. Handlers run on the calling thread. Implementations are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string_view>

#include "controller/cloud/databricks/http_transport.h"

namespace sbx::controller::openai {

struct StreamHandlers {
  std::function<void(const databricks::HttpResponse& head)> on_open;  // body empty
  std::function<bool(std::string_view chunk)> on_data;
};

class StreamingTransport {
 public:
  virtual ~StreamingTransport() = default;
  virtual databricks::HttpResult Stream(const databricks::HttpRequest& request,
                                        const StreamHandlers& handlers, std::stop_token stop) = 0;
};

// The cpprestsdk implementation: http_client reading response.body()'s stream buffer as data
// arrives; `stop` is bridged to a pplx::cancellation_token_source, which closes the connection.
std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport();

}  // namespace sbx::controller::openai
