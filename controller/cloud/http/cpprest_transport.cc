// The cpprestsdk HttpTransport and StreamingTransport (see http_transport.h): one request
// builder, one client pool and one failure mapping for both; they differ only in how the body of
// a 2xx reply is read.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <pplx/pplxtasks.h>

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <mutex>

#include "api/text.h"
#include "controller/cloud/http/cpprest_tls.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::http {
namespace {

constexpr size_t kReadBuffer = size_t{16} * 1024;
constexpr size_t kMaxClients = 32;

// Splits "scheme://authority/path?query" into ("scheme://authority", "/path?query").
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const size_t path_start =
      scheme_end == std::string::npos ? std::string::npos : url.find('/', scheme_end + 3);
  if (path_start == std::string::npos) {
    return {url, "/"};
  }
  return {url.substr(0, path_start), url.substr(path_start)};
}

// cpprest's asio client reports these before it has written anything: safe to retry even a
// non-idempotent request.
bool IsConnectPhase(const web::http::http_exception& e) {
  const std::string what = e.what();
  const int code = e.error_code().value();
  return code == ECONNREFUSED || code == EHOSTUNREACH || code == ENETUNREACH ||
         what.find("Failed to connect") != std::string::npos ||
         what.find("Error resolving address") != std::string::npos;
}

bool IsTimeout(const web::http::http_exception& e) {
  return e.error_code().value() == ETIMEDOUT ||
         std::string(e.what()).find("timed out") != std::string::npos;
}

web::http::http_request BuildMessage(const HttpRequest& request, const std::string& resource) {
  web::http::http_request msg{web::http::method(request.method)};
  msg.set_request_uri(web::uri(resource));
  std::string content_type = "application/json";
  for (const auto& [name, value] : request.headers) {
    if (api::Lower(name) == "content-type") {
      content_type = value;
    } else {
      msg.headers().add(name, value);
    }
  }
  if (request.body) {
    msg.set_body(*request.body, content_type);
  }
  return msg;
}

class CppRestTransport final : public HttpTransport, public StreamingTransport {
 public:
  CppRestTransport() = default;
  explicit CppRestTransport(CppRestTlsOptions tls) : tls_(std::move(tls)) {}

  HttpResult Send(const HttpRequest& request, std::stop_token stop) override {
    return Exchange(request, nullptr, stop);
  }
  HttpResult Stream(const HttpRequest& request, const StreamHandlers& handlers,
                    std::stop_token stop) override {
    return Exchange(request, &handlers, stop);
  }

 private:
  // Reads a 2xx body whole when `handlers` is null, else hands it over as it arrives.
  HttpResult Exchange(const HttpRequest& request, const StreamHandlers* handlers,
                      std::stop_token stop) {
    HttpResult result;
    const auto [origin, resource] = SplitUrl(request.url);
    const std::string what = request.method + " " + origin;  // never the query: it may hold ids
    if (stop.stop_requested()) {
      result.status = api::CancelledError(what + ": cancelled");
      result.maybe_sent = false;
      return result;
    }
    // Cancelling the token makes cpprest close the connection, which also fails a read that is
    // blocked waiting for body bytes: that is how `stop` interrupts a silent stream.
    pplx::cancellation_token_source cts;
    std::stop_callback on_stop(stop, [&cts] { cts.cancel(); });
    bool opened = false;
    try {
      std::shared_ptr<web::http::client::http_client> client = ClientFor(origin, request.timeout);
      web::http::http_response response =
          client->request(BuildMessage(request, resource), cts.get_token()).get();
      result.response.status = response.status_code();
      result.response.reason = response.reason_phrase();
      for (const auto& [name, value] : response.headers()) {
        result.response.headers[api::Lower(name)] = value;
      }
      if (handlers == nullptr || result.response.status < 200 || result.response.status >= 300) {
        result.response.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
        return result;
      }
      opened = true;
      ReadStream(response, *handlers, what, cts, stop, result);
    } catch (const web::http::http_exception& e) {
      if (stop.stop_requested()) {
        result.status = api::CancelledError(what + ": cancelled");
      } else if (IsTimeout(e)) {
        result.status = api::DeadlineExceededError(
            what + (opened ? ": stream silent for " : ": no response within ") +
            std::to_string(request.timeout.count()) + " ms");
      } else {
        result.maybe_sent = opened || !IsConnectPhase(e);
        result.status = api::UnavailableError(what + (opened ? ": stream broken: " : ": ") +
                                              BodyExcerpt(e.what(), 160));
      }
    } catch (const pplx::task_canceled&) {
      result.status = api::CancelledError(what + ": cancelled");
    } catch (const std::exception& e) {
      if (stop.stop_requested()) {
        result.status = api::CancelledError(what + ": cancelled");
      } else if (opened) {
        // Stream-buffer errors after the head: the connection went away mid-body.
        result.status =
            api::UnavailableError(what + ": stream broken: " + BodyExcerpt(e.what(), 160));
      } else {
        // web::uri_exception, json or stream errors: a bug in what we built or a broken reply.
        result.status = api::InternalError(what + ": " + BodyExcerpt(e.what(), 160));
      }
    }
    return result;
  }

  static void ReadStream(web::http::http_response& response, const StreamHandlers& handlers,
                         const std::string& what, pplx::cancellation_token_source& cts,
                         std::stop_token stop, HttpResult& result) {
    if (handlers.on_open) {
      handlers.on_open(result.response);
    }
    Concurrency::streams::streambuf<uint8_t> body = response.body().streambuf();
    std::string chunk(kReadBuffer, '\0');
    while (true) {
      if (stop.stop_requested()) {
        cts.cancel();
        result.status = api::CancelledError(what + ": stream cancelled");
        return;
      }
      // Wait for at least one byte, then take everything already buffered.
      const size_t available = body.in_avail();
      const size_t want = std::clamp<size_t>(available, 1, chunk.size());
      const size_t n = body.getn(reinterpret_cast<uint8_t*>(chunk.data()), want).get();
      if (n == 0) {
        if (stop.stop_requested()) {
          result.status = api::CancelledError(what + ": stream cancelled");
        }
        return;  // end of body
      }
      if (handlers.on_data && !handlers.on_data(std::string_view(chunk.data(), n))) {
        cts.cancel();  // do not hand a half-read connection back to the pool
        return;
      }
    }
  }

  std::shared_ptr<web::http::client::http_client> ClientFor(const std::string& origin,
                                                            std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    const std::string key = origin + "|" + std::to_string(timeout.count());
    auto it = clients_.find(key);
    if (it != clients_.end()) {
      return it->second;
    }
    if (clients_.size() >= kMaxClients) {
      clients_.clear();  // many distinct exec timeouts; in-flight requests keep theirs alive
    }
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    if (!tls_.ca_file.empty()) {
      config.set_ssl_context_callback([ca = tls_.ca_file](boost::asio::ssl::context& ctx) {
        boost::system::error_code ec;
        ctx.load_verify_file(ca, ec);  // a bad file fails the handshake: nothing is trusted
      });
    }
    auto client = std::make_shared<web::http::client::http_client>(web::uri(origin), config);
    clients_.emplace(key, client);
    return client;
  }

  CppRestTlsOptions tls_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<web::http::client::http_client>>
      clients_;  // Guarded by mu_.
};

}  // namespace

std::unique_ptr<HttpTransport> MakeCppRestTransport() {
  return std::make_unique<CppRestTransport>();
}

std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport() {
  return std::make_unique<CppRestTransport>();
}

std::unique_ptr<HttpTransport> MakeCppRestTransport(const CppRestTlsOptions& tls) {
  return std::make_unique<CppRestTransport>(tls);
}

std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport(const CppRestTlsOptions& tls) {
  return std::make_unique<CppRestTransport>(tls);
}

}  // namespace sbx::controller::http
