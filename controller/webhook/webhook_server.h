// WebhookServer: the HTTP/1.1 listener of `sbxd --webhook-addr`, an adapter over sbx's one HTTP
// server (httpserver/http_server.h). It hands each request to a handler (the WebhookReceiver) as
// a WebhookRequest and answers in plain text; it knows nothing of signatures.
//
// The library's bounds apply, so that an unauthenticated peer cannot make sbxd hold much: a body
// over `max_body_bytes` is not read — the handler is called with body_too_large (it counts it)
// and its answer (413) is sent, then the connection closes after a lingering close; a head over
// the library's limit is answered 431; a whole request (head and body, and the idle wait before
// it) must arrive within `read_timeout`, however it trickles, and a peer that reads nothing of
// its answer is dropped after as long; at most `max_connections` connections at once: a new one
// closes the connection that has waited longest for its request, or is itself closed when all
// are being handled. Keep-alive is honoured.
//
// Thread-safety: Start/Stop from one owning thread; the handler is called concurrently from
// connection threads and must be thread-safe. Stop() closes the listener and every connection
// and joins every thread, so the handler is not called after it returns (the destructor calls
// it). Ownership: the handler's captures must outlive Stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "api/status.h"
#include "controller/webhook/webhook_receiver.h"

namespace sbx::httpserver {
class HttpServer;
}

namespace sbx::controller {

struct WebhookServerOptions {
  size_t max_body_bytes = size_t{1} << 20;  // 1 MiB
  std::chrono::milliseconds read_timeout{std::chrono::seconds(10)};
  int max_connections = 64;
};

class WebhookServer {
 public:
  using Handler = std::function<WebhookResponse(const WebhookRequest&)>;

  explicit WebhookServer(Handler handler, WebhookServerOptions options = {});
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Listens on `addr` (httpserver::ParseListenAddress: "host:port", "[v6addr]:port" or ":port");
  // port 0 picks a free one. Returns the port. kInvalidArgument for a malformed address,
  // kUnavailable if it cannot be bound, kFailedPrecondition if already started.
  api::StatusOr<int> Start(const std::string& addr);
  // Idempotent.
  void Stop();

 private:
  Handler handler_;
  const WebhookServerOptions options_;
  std::unique_ptr<httpserver::HttpServer> server_;  // Set by Start.
};

}  // namespace sbx::controller
