// RecordingEnqueuer: an Enqueuer that records the keys it is given (Enqueue only; dependents are
// not followed), for tests of what wakes a reconcile. Thread-safe.
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "controller/engine/source.h"

namespace sbx::testing {

class RecordingEnqueuer final : public controller::Enqueuer {
 public:
  void Enqueue(const api::ObjectKey& key) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
  }
  void EnqueueDependents(const api::ObjectKey&) override {}
  // Recorded as an Enqueue, and also as one that wakes no dependents (CountAlone).
  void EnqueueOne(const api::ObjectKey& key) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
    alone_.push_back(key);
  }
  // How many times an object named `name` was enqueued alone (EnqueueOne).
  int CountAlone(const std::string& name) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(alone_.begin(), alone_.end(),
                                          [&](const api::ObjectKey& k) { return k.name == name; }));
  }

  // How many times an object named `name` was enqueued.
  int Count(const std::string& name) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(keys_.begin(), keys_.end(),
                                          [&](const api::ObjectKey& k) { return k.name == name; }));
  }
  // How many enqueues in all.
  size_t count() const {
    std::lock_guard lock(mu_);
    return keys_.size();
  }
  // The keys enqueued since the last Take, in order.
  std::vector<api::ObjectKey> Take() {
    std::lock_guard lock(mu_);
    return std::exchange(keys_, {});
  }

 private:
  mutable std::mutex mu_;
  std::vector<api::ObjectKey> keys_;   // Guarded by mu_.
  std::vector<api::ObjectKey> alone_;  // Guarded by mu_.
};

}  // namespace sbx::testing
