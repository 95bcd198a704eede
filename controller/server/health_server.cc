#include "controller/server/health_server.h"

#include <chrono>
#include <exception>

#include "controller/server/log.h"
#include "httpserver/http_server.h"
#include "httpserver/listen_address.h"

namespace sbx::controller {
namespace {

using httpserver::HttpRequest;
using httpserver::HttpResponse;

HttpResponse Text(int status, std::string body) {
  return {status, "text/plain", {}, std::move(body)};
}

HttpResponse Serve(const HttpRequest& request, Metrics& metrics,
                   const HealthServer::Readiness& readiness) {
  const std::string& path = request.path;
  if (path != "/healthz" && path != "/readyz" && path != "/metrics") {
    return Text(404, "not found\n");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return Text(405, "method not allowed\n");
  }
  if (path == "/healthz") {
    return Text(200, "ok\n");
  }
  if (path == "/readyz") {
    std::pair<bool, std::string> ready{false, ""};
    try {
      ready = readiness();
    } catch (const std::exception& e) {
      ready = {false, std::string("readiness check failed: ") + e.what()};
    } catch (...) {
      ready = {false, "readiness check failed"};
    }
    if (ready.first) {
      return Text(200, "ok\n");
    }
    return Text(503, (ready.second.empty() ? std::string("not ready") : ready.second) + "\n");
  }
  try {
    return {200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics.Render()};
  } catch (const std::exception& e) {
    log::Error("metrics_render_failed", {{"error", e.what()}});
    return Text(500, "metrics unavailable\n");
  }
}

}  // namespace

HealthServer::HealthServer(Metrics& metrics, Readiness readiness)
    : metrics_(metrics), readiness_(std::move(readiness)) {}

HealthServer::~HealthServer() { Stop(); }

api::StatusOr<int> HealthServer::Start(const std::string& addr) {
  if (server_) {
    return api::FailedPreconditionError("health server already started");
  }
  ASSIGN_OR_RETURN(const httpserver::ListenAddress listen, httpserver::ParseListenAddress(addr));
  httpserver::HttpServerOptions options;
  options.server_name = "sbxd";
  // Scrapes and probes are small and quick: tight bounds.
  options.max_body_bytes = size_t{64} << 10;
  options.max_connections = 64;
  options.read_timeout = std::chrono::seconds(10);
  options.write_timeout = std::chrono::seconds(10);
  auto server = std::make_unique<httpserver::HttpServer>(
      [this](httpserver::HttpExchange& x) {
        HttpResponse r = Serve(x.request(), metrics_, readiness_);
        x.Respond(r);
      },
      std::move(options));
  ASSIGN_OR_RETURN(const int port, server->Start(listen.host, listen.port));
  server_ = std::move(server);
  return port;
}

void HealthServer::Stop() {
  if (server_) {
    server_->Stop();
    server_.reset();
  }
}

}  // namespace sbx::controller
