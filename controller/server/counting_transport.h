// CountingTransport: a databricks::HttpTransport decorator that counts every exchange into
// sbx_api_calls_total{api,endpoint,code} and forwards it, unchanged, to the wrapped transport.
//
//   api      — the name given at construction, or, when none is given (one transport shared by
//              both clients), "openai" for paths under /agents/ and "databricks" otherwise;
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

#include <stop_token>
#include <string>
#include <string_view>

#include "controller/cloud/databricks/http_transport.h"
#include "controller/server/metrics.h"

namespace sbx::controller {

class CountingTransport final : public databricks::HttpTransport {
 public:
  CountingTransport(databricks::HttpTransport& inner, Metrics& metrics, std::string api = "");

  databricks::HttpResult Send(const databricks::HttpRequest& request,
                              std::stop_token stop) override;

  // "METHOD /path/template" for a request (see above). Exposed for tests.
  static std::string EndpointLabel(std::string_view method, std::string_view url);
  // The api label of a request when none was given at construction. Exposed for tests.
  static std::string ApiOf(std::string_view url);

 private:
  databricks::HttpTransport& inner_;
  Metrics& metrics_;
  const std::string api_;
};

}  // namespace sbx::controller
