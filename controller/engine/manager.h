// Manager: the controller's worker loop (DESIGN §3). It owns the WorkQueue and the
// DependencyIndex, runs N std::jthread workers that hand each key to the Reconciler registered
// for its kind, and runs each registered Source (store watch, resync, …) on its own thread.
//
// Per key, the loop applies THE retry policy (ClassifyError):
//   OK kDone            → Forget (reset backoff);
//   OK kRequeueAfter(d) → Forget, AddAfter(d)   (d <= 0: AddRateLimited — no hot loop);
//   OK Continue()       → AddContinue: at once, the failure count untouched (a run of
//                         continues in a row backs off: no hot loop either);
//   error, transient    → AddRateLimited(key, retry_after)  (a 5xx's Retry-After for 3 failures
//                         in a row, then backoff; a 429's: backoff, never before it; work_queue.h);
//   error, terminal     → AddRateLimited(key, terminal backoff: 30 s → 10 min) (the reconciler
//                         wrote the condition; a spec or dependency change brings the key back
//                         at once; without one, the next try waits long and grows — so a
//                         failing object never hot-loops, yet a fix made outside sbx, such as a
//                         rotated credential, is picked up within minutes);
//   exception escaping  → treated as kInternal (transient).
// A key whose kind has no reconciler is dropped. The queue guarantees no key is reconciled by two
// workers at once. With SetOwnership (replicas splitting workspaces, DESIGN §7.4), a
// key this replica does not own is dropped before its reconciler sees it (whoever owns it
// reconciles it; when this replica takes a workspace over, sbxd enqueues everything again); a
// store error while deciding is a transient error.
//
// Lifecycle: construct → Register/AddSource/SetObserver → Start() → … → Stop(). Stop() stops the
// sources (no new intake), shuts the queue down, waits for in-flight reconciles to finish
// (graceful drain), and joins every thread. Stop(cancel): if `cancel` fires during the drain, the
// workers' stop tokens are requested so reconcilers abort their calls. Stop is idempotent and is
// called by the destructor. A later leader lease gates Start/Stop; the live-state sweeper is one
// more Source.
//
// Thread-safety: Enqueue, dependencies(), queue(), Stats() from any thread; the lifecycle methods
// from one owning thread. Ownership: Clock, Reconcilers, Sources and the observer are
// collaborators that must outlive the Manager.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/backoff.h"
#include "controller/base/classify_error.h"
#include "controller/base/clock.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/reconcile_result.h"
#include "controller/engine/source.h"
#include "controller/engine/work_queue.h"

namespace sbx::controller {

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // The kind of object this reconciler handles.
  virtual api::Kind kind() const = 0;
  // Level-based and idempotent: reads desired and observed state fresh, acts on the difference.
  // Called by at most one worker at a time per key. `stop` fires on a forced shutdown: abort
  // long calls and return (any status). Errors go through ClassifyError (see the table there).
  virtual api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                                   std::stop_token stop) = 0;
};

// What one reconcile did, for logs and metrics.
struct ReconcileRecord {
  api::ObjectKey key;
  api::Status status;                     // OK, or the error (exceptions as kInternal)
  std::optional<ReconcileResult> result;  // set when status is OK
  std::optional<ErrorClass> error;        // set when status is not OK
  std::chrono::nanoseconds duration{0};   // on the Manager's Clock
  int num_requeues = 0;                   // consecutive failures of this key so far
};

class ReconcileObserver {
 public:
  virtual ~ReconcileObserver() = default;
  // Called from worker threads after every reconcile; must be thread-safe and quick.
  virtual void OnReconciled(const ReconcileRecord& record) = 0;
};

struct ManagerOptions {
  int workers = 2;
  BackoffPolicy backoff;    // per-key retry backoff (1 s → 5 min, ±10%)
  Backoff::Uniform random;  // null = seeded PRNG
  // The least delay before a terminal error is tried again, by consecutive failures.
  BackoffPolicy terminal_backoff{std::chrono::seconds(30), std::chrono::minutes(10), 0.1};
  // The longest wait a call may make inside a reconcile (inline_wait.h); a longer one (a retry's
  // Retry-After or backoff) ends the reconcile and requeues the key for when it is over, so the
  // worker serves other keys meanwhile. 0: every retry wait goes back to the queue.
  std::chrono::milliseconds max_inline_wait{0};
  // Whether a reconcile's wait for a pacing token may go back to the queue too
  // (EndpointPacing::TakeOrDefer; sbxd's default, --no-pacing-give-back turns it off). Off
  // here, for the tests that drive the Manager directly.
  bool defer_pacing = false;
};

// Whether this replica reconciles `key` now (see Manager). Called from the workers.
using OwnershipFn = std::function<api::StatusOr<bool>(const api::ObjectKey& key)>;

struct ManagerStats {
  int64_t reconciles_total = 0;
  int64_t transient_errors_total = 0;
  int64_t terminal_errors_total = 0;
  int64_t exceptions_total = 0;      // also counted as transient errors
  int64_t unhandled_kind_total = 0;  // keys dropped for want of a reconciler
  int64_t not_owned_total = 0;       // keys dropped: another replica owns their workspace
  WorkQueueStats queue;
};

class Manager final : public Enqueuer {
 public:
  Manager(Clock& clock, ManagerOptions options = {});
  ~Manager() override;
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Before Start(). One reconciler per kind (a second one for the same kind aborts: a bug).
  void Register(Reconciler& reconciler);
  // Before Start().
  void AddSource(Source& source);
  // Before Start(); optional (nullptr = none).
  void SetObserver(ReconcileObserver* observer);
  // Before Start(); optional (unset: every key is this replica's).
  void SetOwnership(OwnershipFn owns);

  void Start();
  void Stop(std::stop_token cancel = {});

  // Enqueues `key` and, transitively, every object that depends on it (DependencyIndex).
  void Enqueue(const api::ObjectKey& key) override;
  void EnqueueDependents(const api::ObjectKey& key) override;
  void EnqueueOne(const api::ObjectKey& key) override;

  DependencyIndex& dependencies() { return dependencies_; }
  WorkQueue& queue() { return queue_; }
  ManagerStats Stats() const;

 private:
  void WorkerLoop(std::stop_token stop);
  void ProcessOne(const api::ObjectKey& key, std::stop_token stop);

  Clock& clock_;
  const ManagerOptions options_;
  const Backoff terminal_backoff_;
  WorkQueue queue_;
  DependencyIndex dependencies_;
  std::map<api::Kind, Reconciler*> reconcilers_;  // Set before Start, read-only after.
  std::vector<Source*> sources_;                  // Set before Start, read-only after.
  ReconcileObserver* observer_ = nullptr;         // Set before Start, read-only after.
  OwnershipFn owns_;                              // Set before Start, read-only after.

  std::atomic<int64_t> reconciles_{0};
  std::atomic<int64_t> transient_errors_{0};
  std::atomic<int64_t> terminal_errors_{0};
  std::atomic<int64_t> exceptions_{0};
  std::atomic<int64_t> unhandled_kind_{0};
  std::atomic<int64_t> not_owned_{0};

  bool started_ = false;  // Owning thread only.
  bool stopped_ = false;  // Owning thread only.
  std::vector<std::jthread> source_threads_;
  std::vector<std::jthread> workers_;
};

}  // namespace sbx::controller
