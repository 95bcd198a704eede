// The API server's HTTP(S) server: sbx's one HTTP server (httpserver/http_server.h), whose
// model, bounds, check_head admission (sbxd: the bearer token, checked before any body is read)
// and thread-safety it has, answering its own errors (413, 431, 500) as the API answers every
// error: a Kubernetes-style Status object. The request and exchange types are the library's,
// named here for the API server's code.
#pragma once

#include "httpserver/http_exchange.h"
#include "httpserver/http_server.h"
#include "httpserver/listen_address.h"

namespace sbx::controller::apiserver {

using httpserver::HttpExchange;
using httpserver::HttpHandler;
using httpserver::HttpHeadCheck;
using httpserver::HttpRequest;
using httpserver::HttpResponse;
using httpserver::HttpServerOptions;
using httpserver::ListenAddress;
using httpserver::ParseListenAddress;

class HttpServer final : public httpserver::HttpServer {
 public:
  // `options` as given, with the Server header "sbxd" and, unless set, Status-object errors.
  HttpServer(HttpHandler handler, HttpServerOptions options);
};

}  // namespace sbx::controller::apiserver
