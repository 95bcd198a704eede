#include "controller/apiserver/http_server.h"

#include <string>
#include <string_view>
#include <utility>

namespace sbx::controller::apiserver {
namespace {

HttpResponse JsonError(int code, std::string_view reason, std::string_view message) {
  // A fixed shape with no user text beyond `message`, which the server builds from constants.
  return {code,
          "application/json",
          {},
          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"" +
              std::string(reason) + "\",\"message\":\"" + std::string(message) +
              "\",\"code\":" + std::to_string(code) + "}"};
}

HttpServerOptions ForTheApi(HttpServerOptions options) {
  options.server_name = "sbxd";
  if (!options.error_response) {
    options.error_response = JsonError;
  }
  return options;
}

}  // namespace

HttpServer::HttpServer(HttpHandler handler, HttpServerOptions options)
    : httpserver::HttpServer(std::move(handler), ForTheApi(std::move(options))) {}

}  // namespace sbx::controller::apiserver
