// HttpTestClient: a tiny synchronous HTTP client for integration tests that talk to the
// emulator over loopback (cpprestsdk underneath). Test-only; thread-compatible.
#pragma once

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>

#include <map>
#include <string>
#include <utility>

#include "api/text.h"

namespace sbx::testing {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // as sent by the server
  std::string body;
  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (api::Lower(k) == api::Lower(name)) {
        return v;
      }
    }
    return {};
  }
};

class HttpTestClient {
 public:
  explicit HttpTestClient(std::string base_url) : base_url_(std::move(base_url)) {}

  // Default headers sent with every request (e.g. Authorization).
  void SetHeader(const std::string& name, const std::string& value) { headers_[name] = value; }
  void ClearHeader(const std::string& name) { headers_.erase(name); }

  // `path_and_query` is sent verbatim. A non-empty body goes out with `content_type`.
  HttpResult Call(const std::string& method, const std::string& path_and_query,
                  const std::string& body = "",
                  const std::map<std::string, std::string>& extra_headers = {},
                  const std::string& content_type = "application/json") {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(60));
    web::http::client::http_client client(base_url_, config);
    web::http::http_request req(method);
    req.set_request_uri(path_and_query);
    for (const auto& [k, v] : headers_) req.headers().add(k, v);
    for (const auto& [k, v] : extra_headers) req.headers().add(k, v);
    if (!body.empty()) req.set_body(body, content_type);
    web::http::http_response resp = client.request(req).get();
    HttpResult r;
    r.status = resp.status_code();
    for (const auto& [k, v] : resp.headers()) r.headers[k] = v;
    r.body = resp.extract_string(/*ignore_content_type=*/true).get();
    return r;
  }

  HttpResult Get(const std::string& path) { return Call("GET", path); }
  HttpResult Post(const std::string& path, const std::string& body = "") {
    return Call("POST", path, body);
  }
  HttpResult Patch(const std::string& path, const std::string& body) {
    return Call("PATCH", path, body);
  }
  HttpResult Delete(const std::string& path) { return Call("DELETE", path); }

 private:
  std::string base_url_;
  std::map<std::string, std::string> headers_;
};

}  // namespace sbx::testing
