#include "controller/base/token_bucket.h"

#include <algorithm>

namespace sbx::controller {

TokenBucket::TokenBucket(Clock& clock, double rate_per_second, double burst, AimdPolicy aimd)
    : clock_(clock),
      initial_rate_(rate_per_second),
      max_rate_(std::max(rate_per_second, aimd.max_rate)),
      min_rate_(std::min(rate_per_second, std::max(aimd.min_rate, 0.01))),
      increase_(aimd.increase > 0 ? aimd.increase : rate_per_second),
      recovery_(std::max(aimd.recovery, 0.0)),
      decrease_(std::clamp(aimd.decrease, 0.01, 1.0)),
      hold_(aimd.hold),
      loss_window_(std::max(aimd.loss_window, std::chrono::milliseconds(1))),
      burst_(std::max(1.0, burst)),
      rate_(rate_per_second),
      tokens_(std::max(1.0, burst)),
      last_(clock.Steady()),
      window_start_(clock.Steady()) {}

void TokenBucket::Refill(Clock::SteadyTime now) {
  if (now <= last_) {
    return;  // blocked: last_ is the end of the hold
  }
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
}

bool TokenBucket::TakeOrNextTime(Clock::SteadyTime& next) {
  const Clock::SteadyTime now = clock_.Steady();
  if (now < blocked_until_) {
    next = blocked_until_;
    return false;
  }
  Refill(now);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  next = NextTokenLocked(now);
  return false;
}

std::optional<TokenBucket::Permit> TokenBucket::Take(std::stop_token stop) {
  if (initial_rate_ <= 0) {
    if (stop.stop_requested()) {
      return std::nullopt;
    }
    return Permit{clock_.Steady(), false};
  }
  bool waited = false;
  while (!stop.stop_requested()) {
    Clock::SteadyTime next;
    {
      std::lock_guard lock(mu_);
      if (TakeOrNextTime(next)) {
        // The last token counts as waiting: demand is at the rate.
        return Permit{clock_.Steady(), waited || tokens_ < 1.0};
      }
    }
    waited = true;
    if (!clock_.SleepUntil(next, stop)) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<TokenBucket::Permit> TokenBucket::TryTake(bool pressed) {
  if (initial_rate_ <= 0) {
    return Permit{clock_.Steady(), false};
  }
  std::lock_guard lock(mu_);
  Clock::SteadyTime next;
  if (!TakeOrNextTime(next)) {
    return std::nullopt;
  }
  return Permit{clock_.Steady(), pressed};
}

Clock::SteadyTime TokenBucket::NextTokenLocked(Clock::SteadyTime now) {
  if (now < blocked_until_) {
    // Held: empty until the hold ends, and refilling from then.
    return blocked_until_ + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::duration<double>(1.0 / rate_));
  }
  Refill(now);
  if (tokens_ >= 1.0) {
    return now;
  }
  return now + std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::duration<double>((1.0 - tokens_) / rate_));
}

Clock::SteadyTime TokenBucket::Claim() {
  const Clock::SteadyTime now = clock_.Steady();
  if (initial_rate_ <= 0) {
    return now;
  }
  std::lock_guard lock(mu_);
  // Places are spaced at the rate. While the bucket is still finding its limit (below its
  // maximum, never cut), the rate may rise while callers are away, and places given at today's
  // rate would hold them to it: they are spaced at the maximum instead, the callers come back as
  // fast as the rate could become, the ones who find no token take a place again, and the tokens
  // they press for raise the rate as waiting inline did. At most max_rate passes a second come
  // back for nothing.
  const double pace = rate_ < max_rate_ && !last_cut_ ? max_rate_ : rate_;
  const Clock::SteadyTime at = std::max(NextTokenLocked(now), claimed_until_);
  claimed_until_ = at + std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::duration<double>(1.0 / pace));
  return at;
}

std::chrono::nanoseconds TokenBucket::Backlog() const {
  if (initial_rate_ <= 0) {
    return std::chrono::nanoseconds(0);
  }
  std::lock_guard lock(mu_);
  return std::max(std::chrono::nanoseconds(0), claimed_until_ - clock_.Steady());
}

void TokenBucket::CountAnswer(Clock::SteadyTime now, bool throttled) {
  if (now - window_start_ >= loss_window_) {
    previous_window_ = now - window_start_ >= 2 * loss_window_ ? Answers{} : window_;
    window_ = {};
    window_start_ = now;
  }
  ++window_.answered;
  window_.throttled += throttled ? 1 : 0;
}

double TokenBucket::ThrottledFraction() const {
  const int64_t answered = window_.answered + previous_window_.answered;
  return answered == 0 ? 1.0
                       : static_cast<double>(window_.throttled + previous_window_.throttled) /
                             static_cast<double>(answered);
}

double TokenBucket::DoublingPeriod() const {
  return std::chrono::duration<double>(std::max(hold_, std::chrono::milliseconds(1000))).count();
}

void TokenBucket::Succeeded(const Permit& permit) {
  if (initial_rate_ <= 0) {
    return;
  }
  std::lock_guard lock(mu_);
  const Clock::SteadyTime now = clock_.Steady();
  CountAnswer(now, /*throttled=*/false);
  if (!permit.waited) {
    return;
  }
  if (last_cut_) {
    // The time since the last waiting call (or the cut), at most one doubling period: a stream
    // of waiting calls counts the clock's time, holds and Retry-Afters included; one call after
    // a quiet spell counts one period.
    pressed_seconds_ +=
        std::min(std::chrono::duration<double>(now - last_pressed_).count(), DoublingPeriod());
  }
  last_pressed_ = now;
  if (rate_ >= max_rate_ || (last_cut_ && now - *last_cut_ < hold_)) {
    return;
  }
  Refill(now);  // the tokens so far accrued at the old rate
  double step = increase_;
  if (last_cut_) {
    // Near the limit just found, approach it by a fraction of the rate the throttle came at; the
    // longer calls press on the rate without a throttle, the further the limit may have moved,
    // so the step doubles every `hold` (at least 1 s) of waiting calls since the cut, as CUBIC's
    // window grows with the time since its last loss. A real limit far below the start rate is
    // approached gently (not by a fraction of the start rate, which overshot a 2/s limit every
    // few seconds), 10% random 429s leave most of the rate (the step is back to its base after
    // each shallow cut), and a rate that a storm of 429s cut to its floor is back within
    // seconds once the storm ends. Counted in the calls' time, not the clock's (see the header).
    const auto doublings =
        static_cast<int64_t>(std::min(pressed_seconds_ / DoublingPeriod(), 16.0));
    step = std::max(recovery_ * cut_from_ * static_cast<double>(int64_t{1} << doublings), 0.01);
  }
  rate_ = std::min(max_rate_, rate_ + step / rate_);
}

void TokenBucket::Throttled(std::chrono::milliseconds delay, const Permit& permit) {
  if (initial_rate_ <= 0) {
    return;
  }
  std::lock_guard lock(mu_);
  const Clock::SteadyTime now = clock_.Steady();
  CountAnswer(now, /*throttled=*/true);
  if (last_cut_ && (permit.taken < *last_cut_ || now - *last_cut_ < hold_)) {
    return;  // the overload already cut and held
  }
  Refill(now);
  cut_from_ = rate_;
  pressed_seconds_ = 0;
  last_pressed_ = now;
  rate_ = std::max(min_rate_, rate_ * std::max(decrease_, 1.0 - ThrottledFraction()));
  last_cut_ = now;
  ++cuts_;
  Block(delay);
}

void TokenBucket::Penalize(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  Block(delay);
}

void TokenBucket::Block(std::chrono::milliseconds delay) {
  const Clock::SteadyTime until = clock_.Steady() + std::max(delay, std::chrono::milliseconds(0));
  blocked_until_ = std::max(blocked_until_, until);
  tokens_ = 0;
  last_ = std::max(last_, blocked_until_);  // no refill while blocked
}

double TokenBucket::rate() const {
  std::lock_guard lock(mu_);
  return rate_;
}

int64_t TokenBucket::cuts() const {
  std::lock_guard lock(mu_);
  return cuts_;
}

}  // namespace sbx::controller
