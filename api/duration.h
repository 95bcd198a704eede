// Durations in manifests: a Go-style subset ("90s", "15m", "1h30m", "2h", "0s").
//
// Accepted: one or more <digits><unit> groups with units h, m, s, each at most once and in that
// order ("1h30m", "2h5s", "90m"); a bare "0" is also accepted. Rejected with kInvalidArgument:
// empty text, negatives, fractions, other units, garbage and values above kMaxDuration (so that
// no consumer can overflow converting to milliseconds or nanoseconds, or adding it to a
// time_point; fields with a tighter bound check it in api/validation.cc). Formatting
// is canonical: hours, minutes and seconds with zero parts dropped ("900s" → "15m",
// "5400s" → "1h30m", 90 s → "1m30s", 0 → "0s"), so a parse of the output gives the input.
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "api/status.h"

namespace sbx::api {

// The longest duration ParseDuration accepts: 876000h (100 years). In nanoseconds it is about a
// third of int64's range, so even system_clock::now() + kMaxDuration fits until the year 2162.
inline constexpr std::chrono::hours kMaxDuration{24 * 365 * 100};

// The error message is one line, e.g.
//   invalid duration "15x" (expected e.g. 90s, 15m, 1h30m)
//   invalid duration "99999999999h": more than the maximum of 876000h (100 years)
// (callers prefix it with the field path).
StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

// For command-line flags that count in days (retention, --since): "<digits>d" is that many days
// (e.g. "90d"), anything else is ParseDuration's. Manifests keep ParseDuration's grammar.
StatusOr<std::chrono::seconds> ParseDurationOrDays(std::string_view text);

// Canonical text of a non-negative duration; negative values are formatted as "0s".
std::string FormatDuration(std::chrono::seconds duration);

}  // namespace sbx::api
