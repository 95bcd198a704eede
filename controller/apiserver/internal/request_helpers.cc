#include "controller/apiserver/internal/request_helpers.h"

#include <exception>
#include <utility>

#include "controller/apiwire/api_wire.h"

namespace sbx::controller::apiserver_internal {

using apiwire::HttpStatusOf;
using apiwire::StatusJson;

HttpResponse JsonReply(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorReply(const api::Status& status) {
  return JsonReply(HttpStatusOf(status.code()), StatusJson(status));
}

std::optional<std::string> Query(const HttpRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  if (it == request.query.end()) {
    return std::nullopt;
  }
  return it->second;
}

bool QueryTrue(const HttpRequest& request, const std::string& name) {
  auto v = Query(request, name);
  return v && (*v == "true" || *v == "1" || *v == "All");
}

api::StatusOr<std::optional<int64_t>> QueryInt(const HttpRequest& request, const std::string& name,
                                               int64_t min, int64_t max) {
  auto v = Query(request, name);
  if (!v || v->empty()) {
    return std::optional<int64_t>();
  }
  if (v->size() > 18 || v->find_first_not_of("-0123456789") != std::string::npos) {
    return api::InvalidArgumentError("query parameter " + name + ": not a number");
  }
  int64_t n = 0;
  try {
    n = std::stoll(*v);
  } catch (const std::exception&) {
    return api::InvalidArgumentError("query parameter " + name + ": not a number");
  }
  if (n < min || n > max) {
    return api::InvalidArgumentError("query parameter " + name + ": must be between " +
                                     std::to_string(min) + " and " + std::to_string(max));
  }
  return std::optional<int64_t>(n);
}

api::StatusOr<std::map<std::string, std::string>> ParseSelector(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) {
      comma = text.size();
    }
    const std::string_view term = text.substr(start, comma - start);
    start = comma + 1;
    if (term.empty()) {
      continue;
    }
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos || eq == 0 || term.find("!=") != std::string_view::npos) {
      return api::InvalidArgumentError("labelSelector \"" + std::string(term) +
                                       "\": only key=value terms are supported");
    }
    std::string_view value = term.substr(eq + 1);
    if (!value.empty() && value.front() == '=') {
      value.remove_prefix(1);
    }
    out[std::string(term.substr(0, eq))] = std::string(value);
  }
  return out;
}

bool Matches(const api::Object& o, const std::map<std::string, std::string>& selector) {
  for (const auto& [k, v] : selector) {
    auto it = o.metadata.labels.find(k);
    if (it == o.metadata.labels.end() || it->second != v) {
      return false;
    }
  }
  return true;
}
}  // namespace sbx::controller::apiserver_internal
