// The API server's small request and reply helpers: JSON and error replies in the wire format
// of controller/apiwire, query parameters, and label selectors. Private to apiserver/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"
#include "controller/apiserver/http_server.h"

namespace sbx::controller::apiserver_internal {

using apiserver::HttpRequest;
using apiserver::HttpResponse;

// A JSON reply (application/json) with `status` and `body`.
HttpResponse JsonReply(int status, std::string body);
// The error as the API answers it: its HTTP status and a Status body.
HttpResponse ErrorReply(const api::Status& status);

// The query parameter's value, if given.
std::optional<std::string> Query(const HttpRequest& request, const std::string& name);
// Whether the parameter is "true", "1" or "All".
bool QueryTrue(const HttpRequest& request, const std::string& name);
// The parameter as an integer in [min, max]; nullopt when absent or empty; kInvalidArgument
// naming the parameter otherwise.
api::StatusOr<std::optional<int64_t>> QueryInt(const HttpRequest& request, const std::string& name,
                                               int64_t min, int64_t max);

// "k=v,k2=v2" (also "k==v"); kInvalidArgument for any other form (set-based selectors, !=).
api::StatusOr<std::map<std::string, std::string>> ParseSelector(std::string_view text);
// Whether every label of `selector` is on `o` with its value.
bool Matches(const api::Object& o, const std::map<std::string, std::string>& selector);

}  // namespace sbx::controller::apiserver_internal
