// The request and exchange types of sbx's one HTTP server (httpserver/http_server.h): what a
// handler reads (HttpRequest), what it answers (HttpResponse), and the exchange it answers on
// (HttpExchange: one complete response, or a chunked stream, or taking the socket over for a
// protocol upgrade). No Beast here: handlers and their tests need only these plain types.
//
// Thread-safety: an HttpRequest is a value. An HttpExchange belongs to the connection thread that
// calls the handler; use it only from that thread and only until the handler returns.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sbx::httpserver {

struct HttpRequest {
  std::string method;                          // "GET", "POST", …
  std::string target;                          // raw request target, e.g. "/a/b?x=1"
  std::string path;                            // percent-decoded path, no query
  std::vector<std::string> segments;           // raw path split on '/', each percent-decoded
  std::map<std::string, std::string> query;    // decoded ('+' is a space)
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  // The TCP connection: "ip:port" of the peer, the same split, and the local port it reached.
  std::string remote;
  std::string peer_address;
  int peer_port = 0;
  int local_port = 0;
  // True once the client has closed its side (or the connection broke), for code that holds only
  // the request (a held POST asks before it acts on it). Set by HttpServer; an empty function (a
  // request built by hand) means the client is there. Never blocks.
  std::function<bool()> client_gone;
  // Header value by (case-insensitive) name; empty if absent.
  std::string Header(std::string_view name) const;
  // True for a request that asks to switch protocols ("Connection: upgrade" and an "Upgrade"
  // header, e.g. a WebSocket handshake).
  bool IsUpgrade() const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// A connection handed over by HttpExchange::TakeSocket: a descriptor of its socket, now owned by
// the caller (who closes it), and the bytes the server had already read past the request.
struct TakenSocket {
  int fd = -1;
  std::string buffered;
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
  // True once the peer has closed its side (or the connection broke): a streaming handler that
  // has nothing to write checks this to end early. Never blocks.
  virtual bool PeerClosed() = 0;
  // Hands the connection over (a protocol upgrade: the new owner writes the 101 itself). From
  // then on the server neither reads, writes, times out nor shuts down the connection; it only
  // closes its own descriptor. fd -1 when nothing can be handed over: under TLS, once a response
  // has begun, or when the descriptor cannot be duplicated.
  virtual TakenSocket TakeSocket() = 0;
};

using HttpHandler = std::function<void(HttpExchange&)>;

// Parses "a=1&b=two" (application/x-www-form-urlencoded, or a query string): keys and values
// percent-decoded with '+' as a space; the first of repeated keys wins.
std::map<std::string, std::string> ParseFormEncoded(std::string_view s);

}  // namespace sbx::httpserver
