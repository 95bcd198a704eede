// HttpServer: the one HTTP/1.1 (and HTTPS) server of sbx. Every listener is an adapter over it:
// sbxd's API server, its webhook and health/metrics listeners, the emulators and the OpenAI
// emulator's WebSocket endpoint. It is the only code in the project that owns an acceptor, so a
// security limit is set here once. Boost.Beast and OpenSSL underneath, kept out of this header.
// Binding port 0 picks a free port; Start() returns it.
//
// Model: one thread accepts; every connection gets its own thread, which reads requests
// (keep-alive) and calls the handler synchronously, so a handler may block (a proxied exec runs
// for the command's whole duration, a watch for as long as the client stays). A handler answers
// once with Respond(), streams a chunked body with StartStream()/WriteChunk()/FinishStream(), or
// takes the socket over (TakeSocket, for a protocol upgrade). A handler that does none of these,
// or throws, gets 500.
//
// Bounds (HttpServerOptions), each enforced here for every listener:
//   - the request head (max_head_bytes; 431) and body (max_body_bytes; 413, answered as soon as
//     the head announces it, never buffered);
//   - after such an early answer the rest of what the client sends is read and dropped before
//     the close (a lingering close), so the client reads the answer instead of a reset;
//   - before any body is read, check_head admits the request or answers it, so an anonymous
//     client never has a body buffered;
//   - concurrent connections (max_connections): when full, a new connection closes the one that
//     has waited longest for its request's bytes, or is itself closed when every connection is
//     being handled; connections with no admitted request yet are bounded apart
//     (max_unauthenticated_connections, the oldest evicted by a new one; unauthenticated_timeout);
//   - a deadline for the whole request (read_timeout: head, body and the idle wait before it,
//     however the bytes trickle) and for each write (write_timeout: a peer that reads nothing of
//     its answer is dropped). With TLS, the handshake counts toward the read deadline.
//
// Thread-safety: Start/Stop from one owner thread; the handler is called concurrently from
// connection threads and must be thread-safe. Stop() closes the listener and every open
// connection, then joins all threads, so a handler blocked on anything but its socket must be
// released by its owner before Stop() (HttpExchange::PeerClosed and the owner's own stop flag).
// The handler and the option callbacks must outlive the server. A server is started once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"
#include "httpserver/http_exchange.h"

namespace sbx::httpserver {

// Called with a request's head (its body not read yet, `body` empty) before anything else is
// done with it. A response refuses the request: it is sent with "Connection: close", the body is
// never buffered (only read and dropped before the close), and the handler is not called.
// nullopt admits it, and the connection counts as authenticated from then on.
using HttpHeadCheck = std::function<std::optional<HttpResponse>(const HttpRequest& head)>;

// Shapes the answers the server gives by itself: `status` (413, 431, 500), a reason in
// PascalCase ("RequestEntityTooLarge") and a message of constant text (never request data).
using HttpErrorResponse =
    std::function<HttpResponse(int status, std::string_view reason, std::string_view message)>;

struct HttpServerOptions {
  // PEM files; both empty = plain HTTP. Read once by Start().
  std::string tls_cert_file;
  std::string tls_key_file;
  // The Server header of every answer.
  std::string server_name = "sbx";
  size_t max_head_bytes = size_t{8} << 10;
  size_t max_body_bytes = size_t{16} << 20;
  size_t max_connections = 1024;
  // A request (head and body, and the idle wait before it) must have arrived within this, or
  // the connection is closed: a deadline for the whole request, not for each read.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // A single write that makes no headway for this long (the peer reads nothing) closes the
  // connection.
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};
  // Admission from the head (sbxd: the bearer token). Empty: every request is admitted.
  HttpHeadCheck check_head;
  // Connections that have not yet had a request admitted by check_head are bounded apart from
  // max_connections: at most this many at once (a new one evicts the oldest of them), and each
  // must have its first head admitted within unauthenticated_timeout. So silent or slow
  // anonymous peers cannot take the connections that clients with a token need (#24).
  size_t max_unauthenticated_connections = 128;
  std::chrono::milliseconds unauthenticated_timeout{std::chrono::seconds(10)};
  // The server's own answers. Empty: text/plain, the message and a newline.
  HttpErrorResponse error_response;
  // The answer to an admitted request whose body is over max_body_bytes, from its head (the
  // body is never read; the answer is sent with "Connection: close"). Empty: error_response 413.
  std::function<HttpResponse(const HttpRequest& head)> body_too_large;
  // Requests that ask to switch protocols (HttpRequest::IsUpgrade), once admitted, go here
  // instead of to the handler: it refuses with Respond() or takes the connection over with
  // TakeSocket() and returns. Empty: they go to the handler like any other.
  HttpHandler upgrade;
};

class HttpServer {
 public:
  HttpServer(HttpHandler handler, HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (a numeric address; 0 = any free port) and starts serving. Returns the
  // bound port; kInvalidArgument for a bad address or unreadable/invalid TLS files (the message
  // names the file, never its content), kUnavailable if the address cannot be bound,
  // kFailedPrecondition if already started.
  api::StatusOr<int> Start(const std::string& host, int port);
  // Idempotent. Closes the listener and all connections (not those taken over); joins every
  // thread.
  void Stop();
  int port() const;
  size_t open_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::httpserver
