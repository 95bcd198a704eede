// HttpServer: a small HTTP/1.1 server on loopback for the emulators (Boost.Beast underneath,
// kept out of this header). Binding port 0 picks a free port and port() reports it, which
// cpprestsdk's http_listener cannot do.
//
// Model: one thread accepts; every connection gets its own thread, which reads requests
// (keep-alive) and calls the handler synchronously, so a handler may block (exec-sync runs a
// process for its whole duration). A handler answers once with Respond(), or streams a chunked
// body with StartStream()/WriteChunk()/FinishStream() (SSE). A handler that does neither gets 500.
//
// Thread-safety: Start/Stop from one owner thread; the handler is called concurrently from
// connection threads and must be thread-safe. Stop() closes the listener and every open
// connection, then joins all threads, so a handler blocked on anything but its socket (a child
// process, an event queue) must be released by its owner before Stop(). The handler must
// outlive the server.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/status.h"

namespace sbx::emulator::internal {

struct HttpRequest {
  std::string method;                          // "GET", "POST", …
  std::string target;                          // raw request target, e.g. "/a/b?x=1"
  std::string path;                            // percent-decoded path, no query
  std::vector<std::string> segments;           // raw path split on '/', each decoded
  std::map<std::string, std::string> query;    // decoded ('+' is a space)
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  // The TCP connection: the client's address and port, and the port it connected to (who is
  // calling, e.g. which emulated sandbox, is found from these).
  std::string peer_address;
  int peer_port = 0;
  int local_port = 0;
  // True once the client has closed the connection (or it failed): a handler that held the
  // request (the 5-minute connection wait) asks before it acts on it. Set by HttpServer; an
  // empty function (a request built by hand) means the client is there.
  std::function<bool()> client_gone;
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
};

using HttpHandler = std::function<void(HttpExchange&)>;

// api::Trim as an owning string (header values, form fields, bodies outlive their request).
std::string Trim(std::string_view s);
// Parses "a=1&b=two" (application/x-www-form-urlencoded or a query string).
std::map<std::string, std::string> ParseFormEncoded(std::string_view s);

class HttpServer {
 public:
  explicit HttpServer(HttpHandler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0 = any free port) and starts serving. Returns the bound port;
  // kUnavailable if the address cannot be bound, kFailedPrecondition if already started.
  api::StatusOr<int> Start(const std::string& host, int port);
  // Idempotent. Closes the listener and all connections; joins every thread.
  void Stop();
  int port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::emulator::internal
