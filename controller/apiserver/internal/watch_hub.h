// WatchHub: the API server's one reader of the store's change log, fanned out to every watch.
// Private to apiserver/.
//
// A reader thread appends every change to a bounded ring (kMaxRing) and wakes the watchers,
// who take what is newer than their position. A watcher behind the ring reads the store itself
// (the catch-up store: the request connection, not the hub's own), and gets kOutOfRange there
// when that part of the log was compacted away.
//
// Thread-safety: Next, last and stopping from any thread; Start and Stop from the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "api/status.h"
#include "controller/store/store.h"

namespace sbx::controller::apiserver_internal {

inline constexpr size_t kMaxRing = 20'000;                 // changes the hub keeps for watchers
inline constexpr int kHubBatch = 1000;                     // changes read per store call
inline constexpr std::chrono::milliseconds kHubPoll{200};  // WaitForChange slice of the hub

class WatchHub {
 public:
  explicit WatchHub(Store& store) : store_(store) {}

  // Starts the reader at the store's current revision.
  api::Status Start();
  // Stops the reader and wakes every watcher (stopping() is true from then on).
  void Stop();
  bool stopping() const { return stopping_.load(); }

  // The newest revision the hub has read.
  int64_t last();

  // Changes with revision > since, waiting up to `wait` for one. From the store itself when
  // `since` is older than the ring (kOutOfRange there when compacted away).
  api::StatusOr<std::vector<Store::Change>> Next(int64_t since, std::chrono::milliseconds wait);

  // Catch-up reads for watchers behind the ring go to this store (the request store), not to
  // the hub's own connection.
  void set_catchup_store(Store* store) { catchup_store_ = store; }

 private:
  void Run(std::stop_token stop);

  Store& store_;
  Store* catchup_store_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Store::Change> ring_;  // Guarded by mu_. Revisions (floor_, last_].
  int64_t floor_ = 0;               // Guarded by mu_.
  int64_t last_ = 0;                // Guarded by mu_.
  std::jthread thread_;
};

}  // namespace sbx::controller::apiserver_internal
