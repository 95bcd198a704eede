// FakeTransport: an HttpTransport that records every request and answers from a handler.
// Thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "controller/cloud/http/http_transport.h"

namespace sbx::controller::http::testing {

class FakeTransport final : public HttpTransport {
 public:
  using Handler = std::function<HttpResult(const HttpRequest&, std::stop_token)>;
  explicit FakeTransport(Handler handler) : handler_(std::move(handler)) {}

  HttpResult Send(const HttpRequest& request, std::stop_token stop) override {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    return handler_(request, stop);
  }

  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t count() const {
    std::lock_guard lock(mu_);
    return requests_.size();
  }

 private:
  Handler handler_;
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;  // Guarded by mu_.
};

inline HttpResult Reply(int status, std::string body,
                        std::map<std::string, std::string> headers = {}) {
  HttpResult r;
  r.response.status = status;
  r.response.body = std::move(body);
  r.response.headers = std::move(headers);
  return r;
}

inline std::string HeaderOf(const HttpRequest& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) {
      return v;
    }
  }
  return "<absent>";
}

}  // namespace sbx::controller::http::testing
