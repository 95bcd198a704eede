// WebhookServer: the HTTP/1.1 listener of `sbxd --webhook-addr` (Boost.Beast underneath, kept
// out of this header). It reads each request within bounds and hands it to a handler (the
// WebhookReceiver) as a WebhookRequest; it knows nothing of signatures.
//
// Bounds, so that an unauthenticated peer cannot make sbxd hold much: a body over
// `max_body_bytes` is not read — the handler is called with body_too_large (it counts it) and
// the answer is 413, then the connection closes; headers over 16 KiB close the connection; a
// whole request (head and body, and the idle wait before it) must arrive within `read_timeout`,
// however it trickles, or the connection is dropped; at most `max_connections` connections at
// once: a new one closes the connection that has waited longest for its request, or is itself
// closed when all are being handled. Keep-alive is honoured.
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

  // Listens on `addr`: "host:port", "[v6addr]:port" or ":port" (all IPv4 interfaces); port 0
  // picks a free one. Returns the port. kInvalidArgument for a malformed address, kUnavailable
  // if it cannot be bound, kFailedPrecondition if already started.
  api::StatusOr<int> Start(const std::string& addr);
  // Idempotent.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::controller
