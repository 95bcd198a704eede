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

#include "api/rfc3339.h"

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

// Timestamps are written and read by api/rfc3339.h (Clock::WallTime is api::WallTime); named
// here too because every user of the clock formats what it reads.
using api::FormatRfc3339;
using api::ParseRfc3339;

}  // namespace sbx::controller
