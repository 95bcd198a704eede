// The HTTP Retry-After header (RFC 9110 §10.2.3), as every cloud client reads it. Pure;
// thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace sbx::controller::http {

// Retry-After: delta-seconds ("3", leniently "1.5") or an HTTP date
// ("Wed, 21 Oct 2026 07:28:00 GMT"), relative to `now`. A date in the past is 0. nullopt when
// absent (empty) or unreadable; negative values are unreadable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view header,
                                                         std::chrono::system_clock::time_point now);

}  // namespace sbx::controller::http
