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
// A needed call's wait for its pacing token (EndpointPacing::TakeOrDefer, issue #30) is given
// back the same way: the reconcile (InlineWaitOwner(), its key) gets a place in line and the
// call returns PacingDeferred with the time of that place; the key comes back then and its call
// takes a token. Only a pass's first paced call may give its wait back: once a call of the pass
// has its token (at once, after a short wait, or a routine call's spare one) or gave its wait
// back, the later calls of the pass wait inline (MayDeferPacing()). So a give-back never makes a
// pass send a call twice (measured: a session create given back after the intent lookup that
// preceded it sent that lookup again on every return, and at a 2 req/s limit the lookup took
// the token the create needed, for minutes), and a pass that goes on after a deferral (a
// best-effort call) takes no second place in line. Reconcilers whose passes make two paced
// calls end the pass after the first where the second's wait matters (the AgentWorker's session
// create, then its launch on the next pass).
//
// The limit is a property of the calling thread, like a deadline in a request context: passing
// it through every cloud client method would touch each of their signatures for one number.
// Thread-safety: per thread by construction (thread_local); scopes nest and restore.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace sbx::controller {

// The longest wait the current thread allows a call inside it; nullopt: no limit.
std::optional<std::chrono::milliseconds> InlineWaitLimit();
// Who will come back for a wait given back: the reconcile's key ("" outside a reconcile, or
// where pacing waits must be waited inline).
const std::string& InlineWaitOwner();
// Whether a pacing wait may be given back now: an owner, and no paced call of this scope has
// had its token or given its wait back yet.
bool MayDeferPacing();
// EndpointPacing, when a call of this scope has its token or gave its wait back: the later paced
// calls of the scope wait inline.
void EndPacingDeferrals();

// Sets the current thread's limit (and owner) for its lifetime; restores the previous ones
// after.
class ScopedInlineWaitLimit {
 public:
  explicit ScopedInlineWaitLimit(std::chrono::milliseconds limit, std::string owner = {});
  ~ScopedInlineWaitLimit();
  ScopedInlineWaitLimit(const ScopedInlineWaitLimit&) = delete;
  ScopedInlineWaitLimit& operator=(const ScopedInlineWaitLimit&) = delete;

 private:
  const std::optional<std::chrono::milliseconds> previous_;
  std::string previous_owner_;
  const bool previous_ended_;
};

// Pacing waits inline for its lifetime (retries keep the thread's limit): for best-effort calls
// whose error the caller ignores, which a deferral would skip without a word.
class ScopedInlinePacing {
 public:
  ScopedInlinePacing();
  ~ScopedInlinePacing();
  ScopedInlinePacing(const ScopedInlinePacing&) = delete;
  ScopedInlinePacing& operator=(const ScopedInlinePacing&) = delete;

 private:
  std::string previous_owner_;
};

}  // namespace sbx::controller
