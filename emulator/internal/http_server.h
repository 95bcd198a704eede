// HttpServer: the emulators' HTTP/1.1 server on loopback, an adapter over sbx's one HTTP server
// (httpserver/http_server.h) with the emulator's settings: Server "sbx-emulator", bodies up to
// 64 MiB, request and write deadlines of 10 minutes (test clients may idle long between calls),
// and a 500 naming the exception when a handler throws. The request and exchange types are the
// library's (HttpRequest::peer_address/peer_port/local_port say who calls, client_gone whether
// the caller is still there), named here for the emulators' code.
//
// Model and thread-safety are the library's: the handler is called concurrently from connection
// threads and may block; Stop() closes every connection and joins every thread, so a handler
// blocked on anything but its socket (a child process, an event queue) must be released by its
// owner before Stop(). The handler must outlive the server.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "httpserver/http_exchange.h"
#include "httpserver/http_server.h"

namespace sbx::emulator::internal {

using httpserver::HttpExchange;
using httpserver::HttpHandler;
using httpserver::HttpRequest;
using httpserver::HttpResponse;
using httpserver::ParseFormEncoded;

// api::Trim as an owning string (header values, form fields, bodies outlive their request).
std::string Trim(std::string_view s);

class HttpServer final : public httpserver::HttpServer {
 public:
  explicit HttpServer(HttpHandler handler);
};

}  // namespace sbx::emulator::internal
