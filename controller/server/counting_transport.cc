#include "controller/server/counting_transport.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <string>
#include <utility>

namespace sbx::controller {
namespace {

constexpr std::array<std::string_view, 7> kCollections = {
    "sandboxes", "commands", "ssh-keys", "accounts", "environments", "sessions", "workspaces"};

bool LooksLikeId(std::string_view segment) {
  if (segment.find('%') != std::string_view::npos) {
    return true;
  }
  const bool has_digit = std::any_of(segment.begin(), segment.end(),
                                     [](unsigned char c) { return std::isdigit(c) != 0; });
  return segment.size() > 40 || (has_digit && segment.size() >= 8);
}

// The path of an absolute URL ("https://host:port/a/b?q" → "/a/b"); a bare path is kept.
std::string_view PathOf(std::string_view url) {
  if (const size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    const size_t slash = url.find('/', scheme + 3);
    url = slash == std::string_view::npos ? std::string_view("/") : url.substr(slash);
  }
  if (const size_t end = url.find_first_of("?#"); end != std::string_view::npos) {
    url = url.substr(0, end);
  }
  return url.empty() ? std::string_view("/") : url;
}

}  // namespace

CountingTransport::CountingTransport(http::HttpTransport& inner, Metrics& metrics, ApiOf api_of)
    : inner_(inner), metrics_(metrics), api_of_(std::move(api_of)) {}

std::string CountingTransport::EndpointLabel(std::string_view method, std::string_view url) {
  const std::string_view path = PathOf(url);
  std::string out(method);
  out += ' ';
  bool after_collection = false;
  size_t pos = 0;
  // Split on '/', keeping empty segments so "/a//b" and a trailing slash round-trip.
  while (pos < path.size()) {
    const size_t start = pos + 1;  // path[pos] == '/'
    size_t next = path.find('/', start);
    if (next == std::string_view::npos) {
      next = path.size();
    }
    const std::string_view segment = path.substr(start, next - start);
    out += '/';
    if (!segment.empty() && (after_collection || LooksLikeId(segment))) {
      out += "{id}";
      after_collection = false;
    } else {
      out += segment;
      after_collection =
          std::find(kCollections.begin(), kCollections.end(), segment) != kCollections.end();
    }
    pos = next;
  }
  return out;
}

http::HttpResult CountingTransport::Send(const http::HttpRequest& request, std::stop_token stop) {
  const auto start = std::chrono::steady_clock::now();
  http::HttpResult result = inner_.Send(request, stop);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const std::string code = result.status.ok() ? std::to_string(result.response.status) : "error";
  const std::string api = api_of_(request.url);
  const std::string endpoint = EndpointLabel(request.method, request.url);
  metrics_
      .counter("sbx_api_calls_total", "Calls to cloud APIs by endpoint and HTTP status.",
               {{"api", api}, {"endpoint", endpoint}, {"code", code}})
      .Inc();
  metrics_
      .histogram("sbx_api_call_duration_seconds",
                 "Time of one exchange with a cloud API, by endpoint (after any client-side "
                 "pacing wait; an exec-sync includes its command's run)",
                 DefaultDurationBuckets(), {{"api", api}, {"endpoint", endpoint}})
      .Observe(took.count());
  return result;
}

}  // namespace sbx::controller
