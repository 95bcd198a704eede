// InlineWait: whether a call may wait inside the thread that made it, or must give the wait back
// to its caller.
//
// A reconcile runs on one of the Manager's few worker threads (--workers, 4 by default). A call
// that sleeps there — a retry waiting out a Retry-After or its backoff — holds that thread, and
// every object behind it in the work queue waits too (issue #25: 50 failed calls × 1 s ÷ 4
// threads added ≈ 12 s to an 11.8 s convergence). So the Manager marks each reconcile with a
// ScopedInlineWaitLimit; a waiting primitive (http::RetryingCaller) asks InlineWaitLimit() and,
// when its wait is longer, returns its error with Status::retry_after set to the wait instead of
// sleeping. The reconcile ends, and the Manager requeues the key at that time (WorkQueue::
// AddRateLimited honours retry_after), so the thread serves other keys meanwhile. A level-based
// reconcile repeats the call then. Threads that are not reconcile workers (event streams, the
// asynchronous input POST, the API server, sbxd --once) set no limit and wait inline as before.
//
// The limit is a property of the calling thread, like a deadline in a request context: passing
// it through every cloud client method would touch each of their signatures for one number.
// Thread-safety: per thread by construction (thread_local); scopes nest and restore.
#pragma once

#include <chrono>
#include <optional>

namespace sbx::controller {

// The longest wait the current thread allows a call inside it; nullopt: no limit.
std::optional<std::chrono::milliseconds> InlineWaitLimit();

// Sets the current thread's limit for its lifetime; restores the previous one after.
class ScopedInlineWaitLimit {
 public:
  explicit ScopedInlineWaitLimit(std::chrono::milliseconds limit);
  ~ScopedInlineWaitLimit();
  ScopedInlineWaitLimit(const ScopedInlineWaitLimit&) = delete;
  ScopedInlineWaitLimit& operator=(const ScopedInlineWaitLimit&) = delete;

 private:
  const std::optional<std::chrono::milliseconds> previous_;
};

}  // namespace sbx::controller
