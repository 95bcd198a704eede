// TokenBucket: a rate limiter (rate tokens/s, burst capacity) on an injected Clock, whose rate
// adapts to what the server allows (AIMD).
//
// One bucket per workspace and API paces every request sbx sends to it. Take blocks until a
// token is available or `stop` is requested (→ nullopt) and hands out a Permit saying when the
// token was taken and whether the caller had to wait for it (demand pressed on the rate).
//
// Adaptive pacing, as TCP's congestion control does it (additive increase, multiplicative
// decrease), told by the request loop (http::RetryingCaller) how each call went:
//   - Succeeded(permit): the server answered without throttling. If the caller had waited for
//     its token, the rate rises by `step / rate`, i.e. by `step` req/s for every second of calls
//     that find the bucket empty; never above `max_rate`, and not within `hold` of the last cut.
//     Calls that never wait (the rate is not what limits them) raise nothing. The step is
//     `increase` until the first throttle (the limit is unknown: find it fast), then `recovery`
//     times the rate the last throttle happened at (near a known limit: approach it slowly, so
//     that it is hit rarely; as TCP's slow start gives way to congestion avoidance), doubled
//     for every `hold` (at least 1 s) of waiting calls since that cut, as CUBIC grows its
//     window with the time since the last loss (a limit far below the start rate is kept, and a
//     rate a storm of 429s cut to its floor is back within seconds once the storm ends). The
//     time counted is the calls': from each call that waited to the one before, at most one
//     period each, so a caller that waits once after a long quiet spell counts one period, not
//     the quiet spell (measured: one such call, 30 s after the cut, lifted a read class cut to
//     2/s to its maximum of 50/s, and the routine status checks then met 429 on every third
//     call until cuts brought it down again; the pacing integration test's CI failure).
//   - Throttled(delay, permit): the server said slow down (a 429; never a 5xx). Once per
//     overload, the rate is cut to the share of calls that got through, as DCTCP cuts by the
//     fraction of marked packets: multiplied by 1 - f, where f is the fraction of the calls
//     answered in the last one to two `loss_window`s that were throttled, but never by less
//     than `decrease` (not below `min_rate`). A server over its limit by half throttles a third
//     of the calls and is cut by a third, to its limit; a first throttle with nothing else
//     answered halves it. The bucket is emptied and held for `delay`, so the server's
//     Retry-After slows every caller of the bucket, not only the one that got the 429
//     (EndpointPacing keeps one bucket per endpoint class, so that is every caller of that
//     class). One overload is one cut and one hold: a throttled call that took its token before
//     the last cut (sent at the old rate), or that is answered within `hold` of it, cuts and
//     holds nothing more; its own retry still waits for its Retry-After (RetryingCaller).
//     Why (issue #25): with 10% of the calls of a class answered 429 at random, halving on every
//     429 and holding the class for each one's Retry-After kept the command class at 1–3 req/s
//     of the server's 20, and the 200-object chaos run did not converge. In the unit test's
//     simulation (15/s, 10% random 429s with Retry-After 1 s) 8.0 req/s get through, against
//     2.7 with the old rule; against a real limit of 10/s, 8.8 req/s get through with 4.5% of
//     the calls throttled (old rule: 6.2).
// With max_rate <= the initial rate the rate never rises above where it started (it still
// falls on a throttle and comes back). A rate <= 0 means unlimited and never adapts.
// Thread-safe; the Clock must outlive the bucket.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>

#include "controller/base/clock.h"

namespace sbx::controller {

struct AimdPolicy {
  // The ceiling of the additive increase; <= the initial rate: no increase above it.
  double max_rate = 0;
  // The floor of the multiplicative decrease (but never above the initial rate).
  double min_rate = 0.5;
  // req/s added per second of calls that waited for their token; <= 0: the initial rate (so a
  // bucket that starts at 10/s and is saturated is at 20/s a second later, 30/s after two).
  double increase = 0;
  // After a throttle: req/s added per saturated second, as a fraction of the rate it happened at.
  double recovery = 0.1;
  // The factor a throttle cuts the rate by.
  double decrease = 0.5;
  // No increase this long after a cut: the limit was just found, do not hit it again at once.
  // A throttle within it is the same overload: no second cut, no second hold.
  std::chrono::milliseconds hold{std::chrono::seconds(2)};
  // The span over which the fraction of throttled calls is measured (the last one to two).
  std::chrono::milliseconds loss_window{std::chrono::seconds(2)};
};

class TokenBucket {
 public:
  // rate <= 0 means unlimited. Without a policy the rate stays fixed (max_rate 0) except for
  // cuts on a throttle and the recovery from them.
  TokenBucket(Clock& clock, double rate_per_second, double burst, AimdPolicy aimd = {});

  // One token: when it was taken, and whether the caller had to wait for it.
  struct Permit {
    Clock::SteadyTime taken{};
    bool waited = false;
  };
  std::optional<Permit> Take(std::stop_token stop = {});
  bool Acquire(std::stop_token stop = {}) { return Take(stop).has_value(); }
  // Non-blocking: takes a token if one is available now. Such a permit waited only if
  // `pressed` (a caller that was told to come back for it: demand pressed on the rate);
  // otherwise its success raises no rate.
  std::optional<Permit> TryTake(bool pressed = false);
  bool TryAcquire() { return TryTake().has_value(); }
  // Non-blocking, takes nothing: a place in line for a caller that will come back rather than
  // wait (EndpointPacing::TakeOrDefer). Returns when to come back: when the next token is due
  // (after a hold, if held), but never sooner than 1/rate after the place given before, so the
  // callers sent away come back spaced at the rate, each to find its token, instead of all at
  // once. Nothing is reserved: a caller that comes back competes for the token as any other
  // (no debt, so nothing is ever sent above the rate and burst), and a caller that does not
  // come back costs nobody anything but its place. Unlimited: now.
  Clock::SteadyTime Claim();
  // How far ahead of now the places given reach (0: nobody is in line).
  std::chrono::nanoseconds Backlog() const;
  bool Claimed() const { return Backlog().count() > 0; }

  // How the call made with `permit` went (see above).
  void Succeeded(const Permit& permit);
  void Throttled(std::chrono::milliseconds delay, const Permit& permit);
  // Empties the bucket and holds it for `delay`, without changing the rate.
  void Penalize(std::chrono::milliseconds delay);

  double rate() const;  // the current rate
  double max_rate() const { return max_rate_; }
  int64_t cuts() const;  // how many times a throttle cut the rate

 private:
  // Refills and, if a token is available, takes it; else returns the time when one will be.
  bool TakeOrNextTime(Clock::SteadyTime& next);              // requires mu_ held
  Clock::SteadyTime NextTokenLocked(Clock::SteadyTime now);  // requires mu_ held
  void Refill(Clock::SteadyTime now);                        // requires mu_ held
  void Block(std::chrono::milliseconds delay);               // requires mu_ held
  // Counts an answered call in the loss window; requires mu_ held.
  void CountAnswer(Clock::SteadyTime now, bool throttled);
  double ThrottledFraction() const;  // requires mu_ held
  double DoublingPeriod() const;     // seconds: hold, at least 1 s

  Clock& clock_;
  const double initial_rate_;
  const double max_rate_;
  const double min_rate_;
  const double increase_;
  const double recovery_;
  const double decrease_;
  const std::chrono::milliseconds hold_;
  const std::chrono::milliseconds loss_window_;
  const double burst_;
  mutable std::mutex mu_;
  double rate_;                                // Guarded by mu_.
  double tokens_;                              // Guarded by mu_.
  Clock::SteadyTime last_;                     // Guarded by mu_.
  Clock::SteadyTime blocked_until_{};          // Guarded by mu_.
  Clock::SteadyTime claimed_until_{};          // Guarded by mu_. The next Claim's earliest.
  std::optional<Clock::SteadyTime> last_cut_;  // Guarded by mu_.
  double cut_from_ = 0;                        // Guarded by mu_. The rate the last cut cut.
  // How long calls have waited for their tokens since the last cut: the time from each waiting
  // call to the one before (or the cut), at most a DoublingPeriod each. Guarded by mu_.
  double pressed_seconds_ = 0;
  Clock::SteadyTime last_pressed_{};  // Guarded by mu_. The last waiting call, or the cut.
  int64_t cuts_ = 0;                  // Guarded by mu_.
  // The loss windows: answered and throttled calls in the current and the previous one.
  struct Answers {
    int64_t answered = 0;
    int64_t throttled = 0;
  };
  Clock::SteadyTime window_start_;  // Guarded by mu_.
  Answers window_;                  // Guarded by mu_.
  Answers previous_window_;         // Guarded by mu_.
};

}  // namespace sbx::controller
