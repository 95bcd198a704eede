// CountingTransport: an http::HttpTransport decorator that counts every exchange into
// sbx_api_calls_total{api,endpoint,code}, times it into sbx_api_call_duration_seconds{api,
// endpoint}, and forwards it, unchanged, to the wrapped transport.
// It knows no cloud: which API a request belongs to is the injected `api_of` (sbxd passes
// CloudApiOf from controller/cloud/cloud_clients.h, since one transport serves every client).
//
//   api      — api_of(request URL);
//   endpoint — method and path template, ids normalised so the label set stays bounded:
//              "POST /api/2.0/sandboxes/{id}/start", "GET /api/2.0/sandboxes" (query dropped);
//   code     — the HTTP status ("200", "404", …), or "error" when no response arrived.
//
// Path templates: the segment after a collection name (sandboxes, commands, ssh-keys, accounts,
// environments, sessions, workspaces) is "{id}", and so is any segment that looks like an id
// (percent-encoded, or long and containing digits), so an unknown endpoint cannot blow up the
// series count either.
//
// Thread-safety: as thread-safe as the wrapped transport (Metrics is thread-safe). Ownership:
// `inner` and `metrics` must outlive the decorator.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "controller/cloud/http/http_transport.h"
#include "controller/server/metrics.h"

namespace sbx::controller {

class CountingTransport final : public http::HttpTransport {
 public:
  // The api label of a request, from its absolute URL.
  using ApiOf = std::function<std::string(std::string_view url)>;

  CountingTransport(http::HttpTransport& inner, Metrics& metrics, ApiOf api_of);

  http::HttpResult Send(const http::HttpRequest& request, std::stop_token stop) override;

  // "METHOD /path/template" for a request (see above). Exposed for tests.
  static std::string EndpointLabel(std::string_view method, std::string_view url);

 private:
  http::HttpTransport& inner_;
  Metrics& metrics_;
  const ApiOf api_of_;
};

}  // namespace sbx::controller
