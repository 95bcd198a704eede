// WakeHints: objects whose next reconcile should look at the outside world at once instead of on
// its cadence, because something outside the store said it changed — the OpenAI service's
// `agent.session.action_required` webhook for a worker's session (DESIGN §7.2).
//
// A producer (the webhook receiver) calls Mark(key) and then enqueues the key; the key's
// reconciler calls Take(key) when it starts, and if it was marked, treats its periodic checks as
// due (the AgentWorker: the environment status and, through it, the session's required
// actions). A hint is a cache, never evidence: losing it (a restart) only delays the check to its
// cadence; a spurious one costs one early check. At most `capacity` keys are held; marking more
// drops the hint, not the enqueue.
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>

#include "api/resources.h"

namespace sbx::controller {

class WakeHints {
 public:
  explicit WakeHints(size_t capacity = 100'000) : capacity_(capacity) {}

  // Marks `key`; false when `capacity` keys are already marked (the hint is dropped).
  bool Mark(const api::ObjectKey& key) {
    std::lock_guard lock(mu_);
    if (keys_.size() >= capacity_ && keys_.count(key) == 0) {
      return false;
    }
    keys_.insert(key);
    return true;
  }
  // True (and unmarks it) if `key` was marked.
  bool Take(const api::ObjectKey& key) {
    std::lock_guard lock(mu_);
    return keys_.erase(key) > 0;
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return keys_.size();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::set<api::ObjectKey> keys_;  // Guarded by mu_.
};

}  // namespace sbx::controller
