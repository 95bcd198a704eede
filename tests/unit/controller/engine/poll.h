// PollUntil: waits (real time, bounded) for a condition another thread makes true. Tests use it
// instead of sleeps: it returns as soon as the condition holds and fails after the deadline.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace sbx::controller::testing_internal {

inline bool PollUntil(const std::function<bool()>& condition,
                      std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace sbx::controller::testing_internal
