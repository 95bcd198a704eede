#include "controller/engine/token_bucket.h"

#include <algorithm>

namespace sbx::controller {

TokenBucket::TokenBucket(Clock& clock, double rate_per_second, double burst)
    : clock_(clock),
      rate_(rate_per_second),
      burst_(std::max(1.0, burst)),
      tokens_(std::max(1.0, burst)),
      last_(clock.Steady()) {}

bool TokenBucket::TakeOrNextTime(Clock::SteadyTime& next) {
  const Clock::SteadyTime now = clock_.Steady();
  if (now < blocked_until_) {
    next = blocked_until_;
    return false;
  }
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  next = now + std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::duration<double>((1.0 - tokens_) / rate_));
  return false;
}

bool TokenBucket::Acquire(std::stop_token stop) {
  if (rate_ <= 0) {
    return !stop.stop_requested();
  }
  while (!stop.stop_requested()) {
    Clock::SteadyTime next;
    {
      std::lock_guard lock(mu_);
      if (TakeOrNextTime(next)) {
        return true;
      }
    }
    if (!clock_.SleepUntil(next, stop)) {
      return false;
    }
  }
  return false;
}

bool TokenBucket::TryAcquire() {
  if (rate_ <= 0) {
    return true;
  }
  std::lock_guard lock(mu_);
  Clock::SteadyTime next;
  return TakeOrNextTime(next);
}

void TokenBucket::Penalize(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  const Clock::SteadyTime until = clock_.Steady() + delay;
  blocked_until_ = std::max(blocked_until_, until);
  tokens_ = 0;
  last_ = until;  // no refill while blocked
}

}  // namespace sbx::controller
