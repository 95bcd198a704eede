#include "controller/base/clock.h"

namespace sbx::controller {

bool SystemClock::SleepUntil(SteadyTime deadline, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  // wait_until with a stop_token returns early (true-ish predicate) when stop is requested.
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace sbx::controller
