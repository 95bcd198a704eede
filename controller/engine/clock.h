// Clock: the one source of time for the controller and its clients, so tests can use FakeClock.
//
// Now() is wall-clock (for timestamps and Retry-After dates); Steady() is monotonic (for
// deadlines, backoff and rate limiting). SleepUntil blocks until the steady time is reached or
// `stop` is requested; it returns false if stopped. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

namespace sbx::controller {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual SteadyTime Steady() const = 0;
  virtual bool SleepUntil(SteadyTime deadline, std::stop_token stop) = 0;
  bool SleepFor(std::chrono::nanoseconds d, std::stop_token stop) {
    return SleepUntil(Steady() + d, std::move(stop));
  }
};

// The real clocks.
class SystemClock final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  SteadyTime Steady() const override { return std::chrono::steady_clock::now(); }
  bool SleepUntil(SteadyTime deadline, std::stop_token stop) override;
};

// RFC 3339 UTC with second precision, e.g. "2026-09-01T12:00:00Z".
std::string FormatRfc3339(Clock::WallTime t);
// Parses what FormatRfc3339 writes, plus fractional seconds and numeric offsets
// ("2026-09-01T12:00:00.5+02:00"). nullopt when malformed.
std::optional<Clock::WallTime> ParseRfc3339(std::string_view text);

}  // namespace sbx::controller
