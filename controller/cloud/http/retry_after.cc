#include "controller/cloud/http/retry_after.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

namespace sbx::controller::http {

std::optional<std::chrono::milliseconds> ParseRetryAfter(
    std::string_view header, std::chrono::system_clock::time_point now) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t first = header.find_first_not_of(kSpace);
  if (first == std::string_view::npos) {
    return std::nullopt;
  }
  header = header.substr(first, header.find_last_not_of(kSpace) - first + 1);
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
