// Poll with a deadline: how every test waits for state (STYLE.md: no sleeps to wait for state).
// PollUntil asks a predicate every `interval` until it holds or the deadline passes. Header-only
// so that unit, integration and e2e tests can all use it without linking anything. Test-only;
// stateless functions, thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

namespace sbx::testing {

using Deadline = std::chrono::steady_clock::time_point;

// now + d, for the deadline arguments of PollUntil and Process.
inline Deadline In(std::chrono::milliseconds d) { return std::chrono::steady_clock::now() + d; }

// Calls `predicate` every `interval` until it returns true (→ true) or `deadline` passes
// (→ false; the predicate is asked one last time at the deadline).
inline bool PollUntil(const std::function<bool()>& predicate, Deadline deadline,
                      std::chrono::milliseconds interval = std::chrono::milliseconds(25)) {
  while (true) {
    if (predicate()) {
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(interval, deadline - now));
  }
}

}  // namespace sbx::testing
