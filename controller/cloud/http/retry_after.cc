#include "controller/cloud/http/retry_after.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

namespace sbx::controller::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(
    std::string_view header, std::chrono::system_clock::time_point now) {
  header = Trim(header);
  if (header.empty()) {
    return std::nullopt;
  }
  if (std::isdigit(static_cast<unsigned char>(header.front()))) {
    const std::string text(header);
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds < 0 ||
        seconds > 365.0 * 24 * 3600) {
      return std::nullopt;
    }
    return std::chrono::milliseconds(std::llround(seconds * 1000));
  }
  // IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 §5.6.7).
  std::tm tm{};
  const std::string text(header);
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') {
    return std::nullopt;
  }
  const auto when = std::chrono::system_clock::from_time_t(timegm(&tm));
  if (when <= now) {
    return std::chrono::milliseconds(0);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(when - now);
}

}  // namespace sbx::controller::http
