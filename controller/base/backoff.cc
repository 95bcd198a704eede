#include "controller/base/backoff.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>

namespace sbx::controller {
namespace {

// Owned through a shared_ptr by the Uniform lambda so copies of a Backoff share one generator.
struct LockedPrng {
  std::mutex mu;
  std::mt19937_64 gen{std::random_device{}()};  // Guarded by mu.
  double Next() {
    std::lock_guard lock(mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
  }
};

}  // namespace

Backoff::Backoff(BackoffPolicy policy, Uniform uniform)
    : policy_(policy), uniform_(std::move(uniform)) {
  if (!uniform_) {
    auto prng = std::make_shared<LockedPrng>();
    uniform_ = [prng] { return prng->Next(); };
  }
  policy_.jitter = std::clamp(policy_.jitter, 0.0, 1.0);
}

std::chrono::milliseconds Backoff::Jittered(std::chrono::milliseconds d, double fraction) const {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (fraction == 0.0 || d.count() <= 0) {
    return std::max(d, std::chrono::milliseconds(0));
  }
  const double u = std::clamp(uniform_(), 0.0, 1.0);
  const double factor = 1.0 + fraction * (2.0 * u - 1.0);
  return std::chrono::milliseconds(std::llround(static_cast<double>(d.count()) * factor));
}

std::chrono::milliseconds Backoff::Delay(int failures) const {
  failures = std::max(failures, 1);
  const double cap = static_cast<double>(policy_.cap.count());
  // Doubling in floating point: 2^(n-1) overflows no integer, and the cap bounds the result.
  const double nominal = std::min(
      cap, static_cast<double>(policy_.base.count()) * std::exp2(std::min(failures - 1, 62)));
  const auto jittered = Jittered(std::chrono::milliseconds(std::llround(nominal)), policy_.jitter);
  return std::min(jittered, policy_.cap);
}

}  // namespace sbx::controller
