// The cpprestsdk StreamingTransport (see streaming_transport.h).
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <pplx/pplxtasks.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <mutex>

#include "api/text.h"
#include "controller/cloud/databricks/internal/cpprest_helpers.h"
#include "controller/cloud/databricks/wire_format.h"
#include "controller/cloud/openai/streaming_transport.h"

namespace sbx::controller::openai {
namespace {

using api::Lower;
using api::Status;
using databricks::BodyExcerpt;
using databricks::HttpRequest;
using databricks::HttpResult;

constexpr size_t kReadBuffer = 16 * 1024;

using databricks::internal::IsConnectPhase;
using databricks::internal::SplitUrl;

bool IsTimeout(const web::http::http_exception& e) {
  return e.error_code().value() == ETIMEDOUT ||
         std::string(e.what()).find("timed out") != std::string::npos;
}

class CppRestStreamingTransport final : public StreamingTransport {
 public:
  HttpResult Stream(const HttpRequest& request, const StreamHandlers& handlers,
                    std::stop_token stop) override {
    HttpResult result;
    const auto [origin, resource] = SplitUrl(request.url);
    const std::string what = request.method + " " + origin;  // never the query
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
      web::http::http_request msg{web::http::method(request.method)};
      msg.set_request_uri(web::uri(resource));
      std::string content_type = "application/json";
      for (const auto& [name, value] : request.headers) {
        if (Lower(name) == "content-type") {
          content_type = value;
        } else {
          msg.headers().add(name, value);
        }
      }
      if (request.body) {
        msg.set_body(*request.body, content_type);
      }
      web::http::http_response response = client->request(msg, cts.get_token()).get();
      result.response.status = response.status_code();
      result.response.reason = response.reason_phrase();
      for (const auto& [name, value] : response.headers()) {
        result.response.headers[Lower(name)] = value;
      }
      if (result.response.status < 200 || result.response.status >= 300) {
        result.response.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
        return result;
      }
      opened = true;
      if (handlers.on_open) {
        handlers.on_open(result.response);
      }
      Concurrency::streams::streambuf<uint8_t> body = response.body().streambuf();
      std::string chunk(kReadBuffer, '\0');
      while (true) {
        if (stop.stop_requested()) {
          cts.cancel();
          result.status = api::CancelledError(what + ": stream cancelled");
          return result;
        }
        // Wait for at least one byte, then take everything already buffered.
        const size_t available = body.in_avail();
        const size_t want = std::clamp<size_t>(available, 1, chunk.size());
        const size_t n = body.getn(reinterpret_cast<uint8_t*>(chunk.data()), want).get();
        if (n == 0) {
          if (stop.stop_requested()) {
            result.status = api::CancelledError(what + ": stream cancelled");
          }
          return result;  // end of body
        }
        if (handlers.on_data && !handlers.on_data(std::string_view(chunk.data(), n))) {
          cts.cancel();  // do not hand a half-read connection back to the pool
          return result;
        }
      }
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
        result.status = api::InternalError(what + ": " + BodyExcerpt(e.what(), 160));
      }
    }
    return result;
  }

 private:
  std::shared_ptr<web::http::client::http_client> ClientFor(const std::string& origin,
                                                            std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    const std::string key = origin + "|" + std::to_string(timeout.count());
    auto it = clients_.find(key);
    if (it != clients_.end()) {
      return it->second;
    }
    if (clients_.size() >= 32) {
      clients_.clear();  // in-flight streams keep their client alive
    }
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    auto client = std::make_shared<web::http::client::http_client>(web::uri(origin), config);
    clients_.emplace(key, client);
    return client;
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<web::http::client::http_client>>
      clients_;  // Guarded by mu_.
};

}  // namespace

std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport() {
  return std::make_unique<CppRestStreamingTransport>();
}

}  // namespace sbx::controller::openai
