#include "api/rfc3339.h"

#include <ctime>

namespace sbx::api {
namespace {

// Reads exactly `n` decimal digits at text[*pos] and advances *pos; nullopt if any is not one.
std::optional<int> Digits(std::string_view text, size_t* pos, size_t n) {
  if (*pos + n > text.size()) {
    return std::nullopt;
  }
  int value = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    value = value * 10 + (c - '0');
  }
  *pos += n;
  return value;
}

bool Expect(std::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) {
    return false;
  }
  ++*pos;
  return true;
}

}  // namespace

std::string FormatRfc3339(WallTime t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatRfc3339Millis(WallTime t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  const std::string seconds = FormatRfc3339(std::chrono::floor<std::chrono::seconds>(ms));
  const auto frac = (ms - std::chrono::floor<std::chrono::seconds>(ms)).count();
  return seconds.substr(0, seconds.size() - 1) + "." + std::to_string(1000 + frac).substr(1) + "Z";
}

std::optional<WallTime> ParseRfc3339(std::string_view text) {
  size_t pos = 0;
  const std::optional<int> year = Digits(text, &pos, 4);
  if (!year || !Expect(text, &pos, '-')) {
    return std::nullopt;
  }
  const std::optional<int> month = Digits(text, &pos, 2);
  if (!month || !Expect(text, &pos, '-')) {
    return std::nullopt;
  }
  const std::optional<int> day = Digits(text, &pos, 2);
  if (!day || !Expect(text, &pos, 'T')) {
    return std::nullopt;
  }
  const std::optional<int> hour = Digits(text, &pos, 2);
  if (!hour || !Expect(text, &pos, ':')) {
    return std::nullopt;
  }
  const std::optional<int> minute = Digits(text, &pos, 2);
  if (!minute || !Expect(text, &pos, ':')) {
    return std::nullopt;
  }
  const std::optional<int> second = Digits(text, &pos, 2);
  if (!second) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(*year),
                                         std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok() || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }

  // Fraction: digits beyond nanoseconds are read and dropped.
  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const size_t first = pos;
    long long nanos = 0;
    long long scale = 100'000'000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      nanos += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == first) {
      return std::nullopt;
    }
    fraction = std::chrono::nanoseconds(nanos);
  }

  std::chrono::minutes offset{0};
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '+' ? 1 : -1;
    ++pos;
    const std::optional<int> oh = Digits(text, &pos, 2);
    if (!oh || !Expect(text, &pos, ':')) {
      return std::nullopt;
    }
    const std::optional<int> om = Digits(text, &pos, 2);
    if (!om || *oh > 23 || *om > 59) {
      return std::nullopt;
    }
    offset = std::chrono::minutes(sign * (*oh * 60 + *om));
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) {
    return std::nullopt;
  }
  const auto local = std::chrono::sys_days(date) + std::chrono::hours(*hour) +
                     std::chrono::minutes(*minute) + std::chrono::seconds(*second) + fraction;
  return std::chrono::time_point_cast<WallTime::duration>(local - offset);
}

int64_t UnixMillis(WallTime t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

WallTime FromUnixMillis(int64_t ms) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::milliseconds(ms)));
}

}  // namespace sbx::api
