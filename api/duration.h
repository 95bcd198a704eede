// Durations in manifests: a Go-style subset ("90s", "15m", "1h30m", "2h", "0s").
//
// Accepted: one or more <digits><unit> groups with units h, m, s, each at most once and in that
// order ("1h30m", "2h5s", "90m"); a bare "0" is also accepted. Rejected with kInvalidArgument:
// empty text, negatives, fractions, other units, garbage and values that overflow. Formatting
// is canonical: hours, minutes and seconds with zero parts dropped ("900s" → "15m",
// "5400s" → "1h30m", 90 s → "1m30s", 0 → "0s"), so a parse of the output gives the input.
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "api/status.h"

namespace sbx::api {

// The error message is one line, e.g.
//   invalid duration "15x" (expected e.g. 90s, 15m, 1h30m)
// (callers prefix it with the field path).
StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

// Canonical text of a non-negative duration; negative values are formatted as "0s".
std::string FormatDuration(std::chrono::seconds duration);

}  // namespace sbx::api
