#include "api/duration.h"

#include <cstdint>

namespace sbx::api {
namespace {

constexpr std::string_view kExpected = "(expected e.g. 90s, 15m, 1h30m)";

Status Invalid(std::string_view text, std::string_view why) {
  std::string m = "invalid duration \"" + std::string(text) + "\"";
  if (!why.empty()) {
    m += ": ";
    m += why;
    m += " ";
  } else {
    m += " ";
  }
  m += kExpected;
  return InvalidArgumentError(std::move(m));
}

// The text is well formed; only its value is out of range, so no "expected e.g." hint.
Status TooLarge(std::string_view text) {
  return InvalidArgumentError("invalid duration \"" + std::string(text) +
                              "\": more than the maximum of " + FormatDuration(kMaxDuration) +
                              " (100 years)");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

StatusOr<std::chrono::seconds> ParseDuration(std::string_view text) {
  if (text.empty()) {
    return Invalid(text, "empty");
  }
  if (text.front() == '-') {
    return Invalid(text, "must not be negative");
  }
  if (text == "0") {
    return std::chrono::seconds(0);
  }
  // The checks below keep every intermediate value at most kMax (3.2e9 s), far from overflow.
  constexpr int64_t kMax = std::chrono::seconds(kMaxDuration).count();
  int64_t total = 0;
  int last_unit_rank = -1;  // h=0, m=1, s=2: each unit once, in that order.
  size_t i = 0;
  while (i < text.size()) {
    if (!IsDigit(text[i])) {
      return Invalid(text, "");
    }
    int64_t value = 0;
    while (i < text.size() && IsDigit(text[i])) {
      const int digit = text[i] - '0';
      if (value > (kMax - digit) / 10) {
        return TooLarge(text);
      }
      value = value * 10 + digit;
      ++i;
    }
    if (i == text.size()) {
      return Invalid(text, "missing unit");
    }
    int rank = 0;
    int64_t multiplier = 1;
    switch (text[i]) {
      case 'h':
        rank = 0;
        multiplier = 3600;
        break;
      case 'm':
        rank = 1;
        multiplier = 60;
        break;
      case 's':
        rank = 2;
        multiplier = 1;
        break;
      case '.':
        return Invalid(text, "fractions are not supported");
      default:
        return Invalid(text, "");
    }
    ++i;
    if (rank <= last_unit_rank) {
      return Invalid(text, "units must appear once each, in the order h, m, s");
    }
    last_unit_rank = rank;
    if (value > kMax / multiplier || total > kMax - value * multiplier) {
      return TooLarge(text);
    }
    total += value * multiplier;
  }
  return std::chrono::seconds(total);
}

std::string FormatDuration(std::chrono::seconds duration) {
  int64_t total = duration.count();
  if (total <= 0) {
    return "0s";
  }
  const int64_t hours = total / 3600;
  const int64_t minutes = (total % 3600) / 60;
  const int64_t seconds = total % 60;
  std::string out;
  if (hours > 0) {
    out += std::to_string(hours) + "h";
  }
  if (minutes > 0) {
    out += std::to_string(minutes) + "m";
  }
  if (seconds > 0) {
    out += std::to_string(seconds) + "s";
  }
  return out;
}

StatusOr<std::chrono::seconds> ParseDurationOrDays(std::string_view text) {
  if (text.size() < 2 || text.back() != 'd') {
    return ParseDuration(text);
  }
  int64_t days = 0;
  for (const char c : text.substr(0, text.size() - 1)) {
    if (!IsDigit(c)) {
      return Invalid(text, "");
    }
    days = days * 10 + (c - '0');
    if (days > kMaxDuration.count() / 24) {
      return TooLarge(text);
    }
  }
  return std::chrono::seconds(std::chrono::hours(24 * days));
}

}  // namespace sbx::api
