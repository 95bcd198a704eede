// FakeClock: a Clock that only moves when a test calls Advance(). Sleepers wake when the fake
// time passes their deadline or their stop token fires. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "controller/base/clock.h"

namespace sbx::testing {

class FakeClock final : public controller::Clock {
 public:
  FakeClock() : wall_(std::chrono::seconds(1788264000)) {}  // 2026-09-01T12:00:00Z

  WallTime Now() const override {
    std::lock_guard lock(mu_);
    return wall_ + (steady_ - SteadyTime{});
  }
  SteadyTime Steady() const override {
    std::lock_guard lock(mu_);
    return steady_;
  }
  bool SleepUntil(SteadyTime deadline, std::stop_token stop) override {
    std::unique_lock lock(mu_);
    ++sleepers_;
    ++sleeps_entered_;
    cv_.notify_all();
    const bool reached = cv_.wait(lock, stop, [&] { return steady_ >= deadline; });
    --sleepers_;
    return reached;
  }

  void Advance(std::chrono::nanoseconds d) {
    std::lock_guard lock(mu_);
    steady_ += d;
    cv_.notify_all();
  }
  // Advances by d, then blocks (real time, bounded) until some thread went to sleep again: for a
  // single looping sleeper whose deadline d passes, "it ran one iteration". False on timeout.
  bool AdvanceAndWaitForNextSleep(std::chrono::nanoseconds d,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    const int64_t entered = sleeps_entered_;
    steady_ += d;
    cv_.notify_all();
    return cv_.wait_for(lock, timeout, [&] { return sleeps_entered_ > entered; });
  }
  // How many times any thread has entered SleepUntil: with WaitForSleepsEntered, "a sleeper that
  // was woken by its stop token (not by time) has planned again and gone back to sleep".
  int64_t sleeps_entered() const {
    std::lock_guard lock(mu_);
    return sleeps_entered_;
  }
  // Blocks (real time, bounded) until sleeps_entered() reaches n; false on timeout.
  bool WaitForSleepsEntered(int64_t n,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return sleeps_entered_ >= n; });
  }
  // Number of threads currently blocked in SleepUntil.
  int sleepers() const {
    std::lock_guard lock(mu_);
    return sleepers_;
  }
  // Blocks (real time, bounded) until at least n threads sleep; false on timeout.
  bool WaitForSleepers(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return sleepers_ >= n; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  WallTime wall_;               // Guarded by mu_.
  SteadyTime steady_{};         // Guarded by mu_.
  int sleepers_ = 0;            // Guarded by mu_.
  int64_t sleeps_entered_ = 0;  // Guarded by mu_.
};

}  // namespace sbx::testing
