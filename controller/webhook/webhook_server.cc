#include "controller/webhook/webhook_server.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "httpserver/http_server.h"
#include "httpserver/listen_address.h"

namespace sbx::controller {
namespace {

using httpserver::HttpRequest;
using httpserver::HttpResponse;

WebhookRequest ToWebhookRequest(const HttpRequest& request) {
  WebhookRequest out;
  out.method = request.method;
  out.path = request.target.substr(0, request.target.find('?'));  // as sent, not decoded
  out.headers = request.headers;
  return out;
}

HttpResponse ToHttpResponse(const WebhookResponse& r) {
  return {r.status, "text/plain; charset=utf-8", {}, r.body};
}

}  // namespace

WebhookServer::WebhookServer(Handler handler, WebhookServerOptions options)
    : handler_(std::move(handler)), options_(options) {}

WebhookServer::~WebhookServer() { Stop(); }

api::StatusOr<int> WebhookServer::Start(const std::string& addr) {
  if (server_) {
    return api::FailedPreconditionError("webhook server already started");
  }
  ASSIGN_OR_RETURN(const httpserver::ListenAddress listen, httpserver::ParseListenAddress(addr));
  const auto call = [this](const WebhookRequest& request) {
    try {
      return handler_(request);
    } catch (const std::exception&) {
      return WebhookResponse{500, "internal error\n"};
    }
  };
  httpserver::HttpServerOptions options;
  options.server_name = "sbxd";
  options.max_body_bytes = options_.max_body_bytes;
  options.read_timeout = options_.read_timeout;
  options.write_timeout = options_.read_timeout;
  options.max_connections = static_cast<size_t>(std::max(options_.max_connections, 1));
  options.body_too_large = [call](const HttpRequest& head) {
    WebhookRequest request = ToWebhookRequest(head);
    request.body_too_large = true;
    return ToHttpResponse(call(request));
  };
  auto server = std::make_unique<httpserver::HttpServer>(
      [call](httpserver::HttpExchange& x) {
        WebhookRequest request = ToWebhookRequest(x.request());
        request.body = x.request().body;
        x.Respond(ToHttpResponse(call(request)));
      },
      std::move(options));
  ASSIGN_OR_RETURN(const int port, server->Start(listen.host, listen.port));
  server_ = std::move(server);
  return port;
}

void WebhookServer::Stop() {
  if (server_) {
    server_->Stop();
  }
}

}  // namespace sbx::controller
