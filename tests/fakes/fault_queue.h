// FaultQueue: the call counter and one-shot error injection that every fake shares. A fake calls
// Take("method") at the top of each method and returns what it gives when not OK; a test calls
// FailNext("method", status) to make the next call of that method fail once, and Calls("method")
// to count them.
// Not thread-safe on its own: the owning fake guards it with its own mutex (so that taking a
// fault and changing the fake's state happen under one lock).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "api/status.h"

namespace sbx::testing {

class FaultQueue {
 public:
  // Counts a call of `method` and returns the error armed for it (once), else OK.
  api::Status Take(const std::string& method) {
    ++calls_[method];
    auto it = fail_next_.find(method);
    if (it == fail_next_.end()) {
      return api::OkStatus();
    }
    api::Status s = it->second.first;
    if (--it->second.second <= 0) {
      fail_next_.erase(it);
    }
    return s;
  }

  // The next `times` calls of `method` return `status` (replacing an error armed before).
  void FailNext(const std::string& method, api::Status status, int times = 1) {
    fail_next_[method] = {std::move(status), times};
  }

  // How many times Take(method) was called.
  int Calls(const std::string& method) const {
    auto it = calls_.find(method);
    return it == calls_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, int> calls_;
  std::map<std::string, std::pair<api::Status, int>> fail_next_;
};

}  // namespace sbx::testing
