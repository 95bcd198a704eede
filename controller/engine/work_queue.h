// WorkQueue: the controller's rate-limited, delaying work queue, with client-go semantics over
// object keys (DESIGN §3 Work queue). Keys, not events: what is queued is "look at this object".
//
//  * Add dedups: a key waits in the queue at most once however often it is added.
//  * A key being processed (handed out by Get, not yet Done) is never handed to a second worker.
//    Added again meanwhile, it is marked dirty and re-queued when Done(key) is called.
//  * AddAfter(key, d) adds the key once `d` has passed on the injected Clock. Added twice before
//    it is due, the earlier time wins. AddAtItsPlace(key, d) is AddAfter for a key that comes
//    back for its place in line at an API's rate: when due, it goes to the front of the queue.
//  * AddRateLimited(key[, min_delay]) counts a failure of `key` and AddAfter's it by the per-key
//    exponential Backoff (1 s → 5 min, jittered), never sooner than `min_delay` (Retry-After).
//    With RetryWait::kAsGiven (a server failure's wait, not congestion), `min_delay` (the
//    server's Retry-After, or the time a scheduled retry is due) is the delay itself for the
//    first kHintedFailures failures in a row; only then does the backoff grow, counted from there
//    (#25: on a cloud failing 10% of calls at random, an object that met three unrelated 503s in
//    a row waited 1+2+4+8 s although each asked for 1 s). A 429 is congestion: its wait stays a
//    minimum under the growing backoff (kAtLeast).
//    Forget(key) resets the count (call it after a success); NumRequeues(key) reads it.
//  * AddContinue(key): a pass asks for its rest at once (no backoff for the first
//    kFreeContinues in a row, then the backoff: no hot loop).
//  * ShutDown(): Get stops handing out items (queued ones are dropped: the controller is
//    level-based and the next start resyncs everything) and new adds are ignored.
//    ShutDownWithDrain() additionally blocks until every handed-out key is Done.
//    Unlike client-go, Get returns nothing after shutdown even if items are still queued.
//
// Thread-safety: every method may be called from any thread. One internal std::jthread moves due
// delayed keys into the queue; it sleeps on the Clock (FakeClock in tests: exactly one sleeper
// while anything is waiting). Ownership: the Clock must outlive the queue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <thread>
#include <utility>

#include "api/resources.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"

namespace sbx::controller {

// A snapshot of the queue's gauges and counters, for /metrics.
struct WorkQueueStats {
  int64_t depth = 0;          // keys ready to be handed out (gauge)
  int64_t waiting = 0;        // keys in AddAfter / backoff delay (gauge)
  int64_t processing = 0;     // keys handed out and not yet Done (gauge)
  int64_t adds_total = 0;     // Add calls that queued or dirtied a key (deduplicated adds excluded)
  int64_t retries_total = 0;  // AddRateLimited calls
  int64_t gets_total = 0;     // keys handed out by Get
};

class WorkQueue {
 public:
  using Key = api::ObjectKey;

  explicit WorkQueue(Clock& clock, Backoff backoff = Backoff());
  ~WorkQueue();  // ShutDown() and joins the delay thread.
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const Key& key);
  // d <= 0 is Add(key).
  void AddAfter(const Key& key, std::chrono::milliseconds d);
  // A key that comes back for its place in line at an API's rate (its pacing wait was given
  // back, EndpointPacing::TakeOrDefer): when due it is handed out before the keys that are merely
  // ready, since its token is due then and a late comer loses it (a bucket keeps no more than
  // its burst) or makes the next place's owner lose its own. Measured (#30, N = 1,000): behind
  // the few hundred keys that one LIST page's sightings enqueue, returners came back together
  // and late, found no token, and went to the end of the line; the Databricks pipe ran at 70 of
  // its 100 calls per 5 s for 10 s. Already queued when due, it keeps its place in the queue.
  void AddAtItsPlace(const Key& key, std::chrono::milliseconds d);
  // Counts a failure and adds the key after max(backoff(failures), min_delay) (kAtLeast), or
  // (kAsGiven) after `min_delay` for the first kHintedFailures failures in a row and after
  // max(backoff(failures - kHintedFailures), min_delay) from then on. Without a min_delay,
  // after backoff(failures).
  enum class RetryWait { kAtLeast, kAsGiven };
  static constexpr int kHintedFailures = 3;
  void AddRateLimited(const Key& key,
                      std::optional<std::chrono::milliseconds> min_delay = std::nullopt,
                      RetryWait wait = RetryWait::kAtLeast);
  // A pass that ended early on purpose asks for its rest (ReconcileResult::Continue): the key is
  // added at once for the first kFreeContinues in a row, and after backoff(n - kFreeContinues)
  // from then on, so that a reconciler that continues forever by mistake cannot hot-loop. The
  // failure count is left as it is: a failing object that continues between its failures keeps
  // its growing backoff. Forget resets both counts.
  static constexpr int kFreeContinues = 3;
  void AddContinue(const Key& key);
  void Forget(const Key& key);
  int NumRequeues(const Key& key) const;
  // When `key` is due if it is waiting (AddAfter / AddRateLimited), else nullopt. For
  // `describe`-style debugging and tests.
  std::optional<Clock::SteadyTime> ReadyAt(const Key& key) const;

  // Blocks until a key is ready (then it is "processing" until Done), or the queue is shut
  // down, or `stop` is requested (then nullopt).
  std::optional<Key> Get(std::stop_token stop = {});
  // Marks `key` as no longer processing; re-queues it if it was added meanwhile.
  void Done(const Key& key);

  void ShutDown();
  // ShutDown(), then blocks until no key is processing. Returns false if `stop` was requested
  // before that happened.
  bool ShutDownWithDrain(std::stop_token stop = {});
  bool ShuttingDown() const;

  // Keys ready to be handed out (not counting waiting or processing ones).
  int Len() const;
  WorkQueueStats Stats() const;

 private:
  void AddLocked(const Key& key, bool front = false);        // requires mu_
  void AddAtLocked(const Key& key, Clock::SteadyTime when);  // requires mu_
  void DelayLoop(std::stop_token stop);

  Clock& clock_;
  const Backoff backoff_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;  // queue_ non-empty, shutdown, processing_ shrank, waiting_
  std::deque<Key> queue_;           // Guarded by mu_. Ready keys, FIFO, each at most once.
  std::set<Key> dirty_;             // Guarded by mu_. Keys needing processing.
  std::set<Key> processing_;        // Guarded by mu_.
  std::map<Key, Clock::SteadyTime> waiting_;         // Guarded by mu_.
  std::set<std::pair<Clock::SteadyTime, Key>> due_;  // Guarded by mu_. Index of waiting_.
  std::map<Key, int> failures_;                      // Guarded by mu_.
  std::map<Key, int> continues_;                     // Guarded by mu_. In a row, since Forget.
  std::set<Key> placed_;  // Guarded by mu_. Waiting for a place in line (AddAtItsPlace).
  std::set<Key> front_;   // Guarded by mu_. Due for its place while processing: first at Done.
  bool shutting_down_ = false;  // Guarded by mu_.
  // Interrupts the delay thread's Clock sleep when an earlier deadline arrives.
  std::stop_source sleep_interrupt_;                 // Guarded by mu_.
  std::optional<Clock::SteadyTime> sleeping_until_;  // Guarded by mu_.
  WorkQueueStats counters_;  // Guarded by mu_. Only the *_total fields are kept here.

  std::jthread delay_thread_;  // Last: started after every member above is constructed.
};

}  // namespace sbx::controller
