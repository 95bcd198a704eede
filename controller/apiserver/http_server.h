// HttpServer: the HTTP/1.1 (and HTTPS) server under sbxd's API server (Boost.Beast and OpenSSL
// underneath, kept out of this header). Binding port 0 picks a free port; port() reports it.
//
// Model: one thread accepts; every connection gets its own thread, which reads requests
// (keep-alive) and calls the handler synchronously, so a handler may block (a proxied exec runs
// for the command's whole duration, a watch for as long as the client stays). A handler answers
// once with Respond(), or streams a chunked body with StartStream()/WriteChunk()/FinishStream().
// A handler that does neither gets 500.
//
// Bounds (HttpServerOptions): the request head (8 KiB) and body (max_body_bytes; 413 with a JSON
// error above it, answered as soon as the head announces it; the rest of the body is read and
// dropped before the close, so the client reads the answer instead of a reset), concurrent
// connections (max_connections; the next one is closed), the time a whole request may take to
// arrive (read_timeout; the connection is closed). Before any body is read, check_head admits
// the request or answers it (sbxd: 401 without a known token), so an anonymous client never has
// a body buffered. Connections with no admitted request yet are bounded apart
// (max_unauthenticated_connections, the oldest evicted by a new one; unauthenticated_timeout).
// With TLS, the handshake counts toward those timeouts.
//
// Thread-safety: Start/Stop from one owner thread; the handler is called concurrently from
// connection threads and must be thread-safe. Stop() closes the listener and every open
// connection, then joins all threads, so a handler blocked on anything but its socket must be
// released by its owner before Stop() (HttpExchange::PeerClosed and the owner's own stop flag).
// The handler must outlive the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/status.h"

namespace sbx::controller::apiserver {

struct HttpRequest {
  std::string method;                          // "GET", "POST", …
  std::string target;                          // raw request target, e.g. "/a/b?x=1"
  std::vector<std::string> segments;           // raw path split on '/', each percent-decoded
  std::map<std::string, std::string> query;    // decoded ('+' is a space)
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  std::string remote;  // "ip:port" of the peer
  // Header value by (case-insensitive) name; empty if absent.
  std::string Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // Sends a complete response. Returns false if the client went away.
  virtual bool Respond(const HttpResponse& response) = 0;
  // Starts a chunked response (status, content type and headers of `head`; its body ignored).
  virtual bool StartStream(const HttpResponse& head) = 0;
  // Sends one chunk immediately. Returns false once the client has gone away.
  virtual bool WriteChunk(std::string_view data) = 0;
  virtual bool FinishStream() = 0;
  virtual bool responded() const = 0;
  // True once the peer has closed its side (or the connection broke): a streaming handler
  // that has nothing to write checks this to end early. Never blocks.
  virtual bool PeerClosed() = 0;
};

using HttpHandler = std::function<void(HttpExchange&)>;

// Called with a request's head (its body not read yet, `body` empty) before anything else is
// done with it. A response refuses the request: it is sent with "Connection: close", the body is
// never buffered (only read and dropped before the close), and the handler is not called.
// nullopt admits it, and the connection counts as authenticated from then on.
using HttpHeadCheck = std::function<std::optional<HttpResponse>(const HttpRequest& head)>;

struct HttpServerOptions {
  // PEM files; both empty = plain HTTP. Read once by Start().
  std::string tls_cert_file;
  std::string tls_key_file;
  size_t max_body_bytes = size_t{16} << 20;
  size_t max_connections = 1024;
  // A request (head and body, and the idle wait before it) must have arrived within this, or
  // the connection is closed: a deadline for the whole request, not for each read.
  std::chrono::seconds read_timeout{60};
  // Admission from the head (sbxd: the bearer token). Empty: every request is admitted.
  HttpHeadCheck check_head;
  // Connections that have not yet had a request admitted by check_head are bounded apart from
  // max_connections: at most this many at once (a new one evicts the oldest of them), and each
  // must have its first head admitted within unauthenticated_timeout. So silent or slow
  // anonymous peers cannot take the connections that clients with a token need (#24).
  size_t max_unauthenticated_connections = 128;
  std::chrono::seconds unauthenticated_timeout{10};
};

class HttpServer {
 public:
  HttpServer(HttpHandler handler, HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0 = any free port) and starts serving. Returns the bound port;
  // kInvalidArgument for a bad address or unreadable/invalid TLS files (the message names the
  // file, never its content), kUnavailable if the address cannot be bound,
  // kFailedPrecondition if already started.
  api::StatusOr<int> Start(const std::string& host, int port);
  // Idempotent. Closes the listener and all connections; joins every thread.
  void Stop();
  int port() const;
  size_t open_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// A listen address: "host:port", "[v6addr]:port" or ":port" (every interface, host "0.0.0.0").
struct ListenAddress {
  std::string host;
  int port = 0;
  bool loopback = false;  // 127.0.0.0/8, ::1 or localhost (resolved to 127.0.0.1)
};
api::StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace sbx::controller::apiserver
