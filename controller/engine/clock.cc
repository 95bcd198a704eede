#include "controller/engine/clock.h"

#include <ctime>

namespace sbx::controller {

bool SystemClock::SleepUntil(SteadyTime deadline, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  // wait_until with a stop_token returns early (true-ish predicate) when stop is requested.
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

std::string FormatRfc3339(Clock::WallTime t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace sbx::controller
