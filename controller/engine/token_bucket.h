// TokenBucket: a rate limiter (rate tokens/s, burst capacity) on an injected Clock.
//
// One bucket per workspace paces every API request sbx sends to it. Acquire blocks until a
// token is available or `stop` is requested (→ false). Penalize(d) empties the bucket and
// holds it for `d`, so a server's Retry-After slows every caller, not only the one that got the
// 429. Thread-safe; the Clock must outlive the bucket.
#pragma once

#include <chrono>
#include <mutex>
#include <stop_token>

#include "controller/engine/clock.h"

namespace sbx::controller {

class TokenBucket {
 public:
  // rate <= 0 means unlimited.
  TokenBucket(Clock& clock, double rate_per_second, double burst);

  bool Acquire(std::stop_token stop = {});
  // Non-blocking: takes a token if one is available now.
  bool TryAcquire();
  void Penalize(std::chrono::milliseconds delay);
  double rate() const { return rate_; }

 private:
  // Refills and, if a token is available, takes it; else returns the time when one will be.
  bool TakeOrNextTime(Clock::SteadyTime& next);  // requires mu_ held

  Clock& clock_;
  const double rate_;
  const double burst_;
  std::mutex mu_;
  double tokens_;                      // Guarded by mu_.
  Clock::SteadyTime last_;             // Guarded by mu_.
  Clock::SteadyTime blocked_until_{};  // Guarded by mu_.
};

}  // namespace sbx::controller
