#include "controller/engine/clock.h"

#include <cstdio>
#include <ctime>

namespace sbx::controller {

bool SystemClock::SleepUntil(SteadyTime deadline, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  // wait_until with a stop_token returns early (true-ish predicate) when stop is requested.
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

std::string FormatRfc3339(Clock::WallTime t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<Clock::WallTime> ParseRfc3339(std::string_view text) {
  const std::string s(text);
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute,
                  &second, &consumed) != 6 ||
      month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  size_t pos = static_cast<size_t>(consumed);
  double fraction = 0;
  if (pos < s.size() && s[pos] == '.') {
    size_t end = pos + 1;
    while (end < s.size() && s[end] >= '0' && s[end] <= '9') {
      ++end;
    }
    if (end == pos + 1) {
      return std::nullopt;
    }
    fraction = std::stod("0" + s.substr(pos, end - pos));
    pos = end;
  }
  int offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (pos + 6 > s.size() || std::sscanf(s.c_str() + pos + 1, "%2d:%2d", &oh, &om) != 2) {
      return std::nullopt;
    }
    offset_minutes = (s[pos] == '+' ? 1 : -1) * (oh * 60 + om);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t secs = timegm(&tm);
  auto t = std::chrono::system_clock::from_time_t(secs) - std::chrono::minutes(offset_minutes);
  return t + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                 std::chrono::duration<double>(fraction));
}

}  // namespace sbx::controller
