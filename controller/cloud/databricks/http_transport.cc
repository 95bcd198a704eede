#include "controller/cloud/databricks/http_transport.h"

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

namespace sbx::controller::databricks {
namespace {

using api::Lower;
using api::Status;

using internal::IsConnectPhase;
using internal::SplitUrl;

class CppRestTransport final : public HttpTransport {
 public:
  HttpResult Send(const HttpRequest& request, std::stop_token stop) override {
    HttpResult result;
    const auto [origin, resource] = SplitUrl(request.url);
    const std::string what = request.method + " " + origin;  // never the query: it may hold ids
    if (stop.stop_requested()) {
      result.status = api::CancelledError(what + ": cancelled");
      result.maybe_sent = false;
      return result;
    }
    pplx::cancellation_token_source cts;
    std::stop_callback on_stop(stop, [&cts] { cts.cancel(); });
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
      result.response.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
      return result;
    } catch (const web::http::http_exception& e) {
      if (stop.stop_requested()) {
        result.status = api::CancelledError(what + ": cancelled");
      } else if (e.error_code().value() == ETIMEDOUT ||
                 std::string(e.what()).find("timed out") != std::string::npos) {
        result.status = api::DeadlineExceededError(what + ": no response within " +
                                                   std::to_string(request.timeout.count()) + " ms");
      } else {
        result.maybe_sent = !IsConnectPhase(e);
        result.status = api::UnavailableError(what + ": " + BodyExcerpt(e.what(), 160));
      }
    } catch (const pplx::task_canceled&) {
      result.status = api::CancelledError(what + ": cancelled");
    } catch (const std::exception& e) {
      // web::uri_exception, json or stream errors: a bug in what we built or a broken reply.
      result.status = api::InternalError(what + ": " + BodyExcerpt(e.what(), 160));
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
      clients_.clear();  // many distinct exec timeouts; in-flight requests keep theirs alive
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

std::unique_ptr<HttpTransport> MakeCppRestTransport() {
  return std::make_unique<CppRestTransport>();
}

}  // namespace sbx::controller::databricks
