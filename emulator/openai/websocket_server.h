// WebSocketServer: a minimal RFC 6455 server on loopback for the OpenAI emulator's executor
// connections, on a port of its own. Its listener is sbx's one HTTP server
// (httpserver/http_server.h), whose upgrade hook hands each validated handshake's socket over;
// Beast's WebSocket stream then runs the connection (both kept out of this header).
//
// Model: one I/O thread runs every handler. Pings are answered with pongs automatically (the
// real `codex exec-server` pings every 30 s and drops the link after 60 s without a pong).
// on_validate decides the upgrade (return 101 to accept, or an HTTP status to refuse it; a
// request that is not an upgrade gets 426). on_close runs exactly once for every connection
// that on_open saw.
//
// Thread-safety: Send() and Close() may be called from any thread; both queue work for the I/O
// thread. Handlers run on the I/O thread and must not call Stop(). Start() and Stop() from the
// owner thread; Stop() closes all connections (on_close runs for each) and joins the I/O
// thread. Handlers must outlive Stop().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace sbx::emulator::internal {

using WsConnectionId = std::uint64_t;

struct WebSocketHandlers {
  // `resource` is the request target ("/path?query"). Return 101 to accept.
  std::function<int(const std::string& resource)> on_validate;
  std::function<void(WsConnectionId, const std::string& resource)> on_open;
  std::function<void(WsConnectionId, const std::string& text)> on_text;
  std::function<void(WsConnectionId)> on_close;
};

class WebSocketServer {
 public:
  explicit WebSocketServer(WebSocketHandlers handlers);
  ~WebSocketServer();  // Stop()
  WebSocketServer(const WebSocketServer&) = delete;
  WebSocketServer& operator=(const WebSocketServer&) = delete;

  // Binds host:port (0 = a free port) and starts the I/O thread. Returns the bound port, or -1
  // with `error` set.
  int Start(const std::string& host, int port, std::string& error);
  // Idempotent.
  void Stop();
  // Queues one text frame. False if the connection is unknown or already closed.
  bool Send(WsConnectionId id, const std::string& text);
  // Starts a close handshake (code 1000 normal, 1001 going away, …); on_close follows.
  void Close(WsConnectionId id, int code, const std::string& reason);
  int port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::emulator::internal
