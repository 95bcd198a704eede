#include "emulator/internal/http_server.h"

#include <chrono>
#include <exception>
#include <utility>

#include "api/text.h"

namespace sbx::emulator::internal {
namespace {

httpserver::HttpServerOptions EmulatorOptions() {
  httpserver::HttpServerOptions options;
  options.server_name = "sbx-emulator";
  options.max_body_bytes = size_t{64} << 20;
  options.read_timeout = std::chrono::minutes(10);
  options.write_timeout = std::chrono::minutes(10);
  return options;
}

// The emulators' handlers answer a throw with its message: they are test doubles, and the
// message is what a failing test needs to see.
HttpHandler NamingExceptions(HttpHandler handler) {
  return [handler = std::move(handler)](HttpExchange& x) {
    try {
      handler(x);
    } catch (const std::exception& e) {
      if (!x.responded()) {
        x.Respond({500, "text/plain", {}, std::string("handler threw: ") + e.what()});
      }
    }
  };
}

}  // namespace

std::string Trim(std::string_view s) { return std::string(api::Trim(s)); }

HttpServer::HttpServer(HttpHandler handler)
    : httpserver::HttpServer(NamingExceptions(std::move(handler)), EmulatorOptions()) {}

}  // namespace sbx::emulator::internal
