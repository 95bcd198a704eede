// Backoff: THE exponential backoff with jitter, shared by the work queue (per-key retries), the
// periodic resync (±10% period jitter) and any poller that needs a growing delay.
//
// Delay(n) for the n-th consecutive failure (n >= 1) is base·2^(n-1), capped at `cap`, then
// multiplied by a factor drawn uniformly from [1 - jitter, 1 + jitter] and capped at `cap` again,
// so retries of many keys that failed together spread out instead of arriving in lockstep.
//
// Randomness is injected (`Uniform`, returning values in [0, 1)) so tests can pin it; by default
// each Backoff owns a seeded PRNG. Thread-safe: Delay/Jittered may be called concurrently (the
// default PRNG is guarded by its own mutex; an injected Uniform must be thread-safe itself).
#pragma once

#include <chrono>
#include <functional>

namespace sbx::controller {

struct BackoffPolicy {
  std::chrono::milliseconds base{std::chrono::seconds(1)};
  std::chrono::milliseconds cap{std::chrono::minutes(5)};
  // Fraction of the nominal delay by which the result may deviate either way (0 = none).
  double jitter = 0.1;
};

class Backoff {
 public:
  // Returns a uniformly distributed value in [0, 1).
  using Uniform = std::function<double()>;

  // A null `uniform` uses an internal PRNG seeded from std::random_device.
  explicit Backoff(BackoffPolicy policy = {}, Uniform uniform = nullptr);

  // Delay before retry number `failures` (1 = first retry). failures <= 0 is treated as 1.
  // Always in [min(base, cap)·(1 - jitter), cap].
  std::chrono::milliseconds Delay(int failures) const;

  // `d` scaled by a factor drawn uniformly from [1 - fraction, 1 + fraction]; never negative.
  std::chrono::milliseconds Jittered(std::chrono::milliseconds d, double fraction) const;

  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  Uniform uniform_;
};

}  // namespace sbx::controller
