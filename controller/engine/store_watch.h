// StoreWatch: the Source that turns store writes into queue keys (DESIGN §3: the controller
// "watches" by polling PRAGMA data_version and reading rows with revision > last_seen).
//
// Run() first reads the current revision, then lists every object and enqueues it (list, then
// watch: nothing written after that revision can be missed, and anything listed twice is
// deduplicated by the queue). Then it loops: WatchSince(last_seen) → enqueue each changed key
// (deletions too, so reconcilers can clean up) → WaitForChange(poll).
//
// A change of an object's status ALONE (same metadata, same generation) does not enqueue the
// object itself, only its dependants (Enqueuer::EnqueueDependents): its own reconciler wrote it,
// and waking that reconciler again would turn every status write — a failing object's included
// — into another reconcile (controller-runtime's GenerationChangedPredicate, with metadata). Store
// errors are reported to `on_error` and retried with backoff on the Clock. Stop latency is at most
// `poll`.
//
// A wake hint (Store::PostWakeHint: a change of nothing but the resourceVersion, written by
// another replica that heard from outside that the object needs a look) is marked in
// options.wake_hints and enqueues the object itself: that is how a webhook received by one
// replica reaches the replica that holds the object's workspace (--work-split workspace).
//
// Fell behind compaction: when WatchSince answers kOutOfRange (the changes after last_seen were
// compacted away, Store::CompactChanges), the watch reports it to `on_error` and re-lists like
// client-go after "410 Gone": every listed object is dispatched as above (enqueued unless only
// its status changed since it was last seen), every object seen before and no longer listed is
// enqueued as deleted (a list alone would never show that deletion), and the watch goes on from
// the revision read before the re-list. So no change is lost, only coalesced.
//
// Thread-safety: Run is called by one thread; last_revision() and relists() from any.
// Ownership: `store` and `clock` are collaborators that must outlive the StoreWatch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string_view>

#include "api/status.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/engine/source.h"
#include "controller/engine/wake_hints.h"
#include "controller/store/store.h"

namespace sbx::controller {

using SourceErrorFn = std::function<void(std::string_view source, const api::Status& error)>;

struct StoreWatchOptions {
  int batch = 1000;                     // WatchSince limit per call
  std::chrono::milliseconds poll{250};  // WaitForChange timeout (= stop latency)
  BackoffPolicy error_backoff{std::chrono::seconds(1), std::chrono::seconds(30), 0.1};
  SourceErrorFn on_error;  // optional
  // Marked for each wake-hint change (Store::PostWakeHint) before its key is enqueued; may be
  // null (a hint then only enqueues).
  WakeHints* wake_hints = nullptr;
};

// Lists every object in `store` and enqueues its key. Used by the initial list and the resync.
api::Status EnqueueAllObjects(Store& store, Enqueuer& out);

class StoreWatch final : public Source {
 public:
  StoreWatch(Store& store, Clock& clock, StoreWatchOptions options = {});

  std::string_view name() const override { return "store-watch"; }
  void Run(Enqueuer& out, std::stop_token stop) override;

  // Highest revision seen and enqueued so far; -1 until the initial list has completed (so a
  // readiness probe can wait for it).
  int64_t last_revision() const { return last_revision_.load(); }
  // Re-lists after falling behind compaction, so far.
  int64_t relists() const { return relists_.load(); }

 private:
  // Sleeps the error backoff; false if stopped.
  bool BackOff(const api::Status& error, int& failures, std::stop_token stop);
  // Enqueues what `change` concerns: the object (and its dependants) unless only its status
  // changed, then its dependants only. Remembers the object's metadata for the next change.
  void Dispatch(const Store::Change& change, Enqueuer& out);
  // Reads the revision, lists, dispatches every listed object and a deletion of every object
  // seen before but not listed; retries errors with backoff. The revision read, or nullopt when
  // stopped.
  std::optional<int64_t> ListAndDispatch(Enqueuer& out, std::stop_token stop,
                                         std::string_view what);

  Store& store_;
  Clock& clock_;
  const StoreWatchOptions options_;
  const Backoff backoff_;
  std::atomic<int64_t> last_revision_{-1};
  std::atomic<int64_t> relists_{0};
  // Metadata (without resourceVersion) of every object last seen; only Run's thread uses it.
  std::map<api::ObjectKey, api::ObjectMeta> seen_;
};

}  // namespace sbx::controller
