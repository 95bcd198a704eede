// GitFetchPool: runs GitSource fetches on a bounded pool of threads of their own, off the
// engine's reconcile workers (#24).
//
// A fetch waits on the network for up to --git-timeout (2 minutes): made inside Reconcile, a
// repository that never answers held a shared worker on every sync, and with --workers 1 every
// other object of every namespace waited behind it. Here the reconciler queues the fetch (and the
// read of the commit's files), returns, and takes the outcome on a later pass: the GitSource is
// enqueued when its fetch ends. At most `workers` fetches run at once; the rest wait in order.
//
// Contract:
//   Start(key, uid, generation, job) queues `job` unless one for `key` is queued, running, or has
//     an outcome not yet taken. `job` gets a stop token that fires on Forget(key) and when the
//     pool is destroyed (sbxd stopping).
//   Take(key, uid, generation) → kNone (nothing queued, or the outcome was taken), kPending, or
//     kDone with the job's result, which is then forgotten. An outcome of another object (same
//     name, another uid) or another generation (the spec changed while it ran) is dropped and
//     kNone returned with `stale` set: the caller starts a fetch of the spec as it is now, due or
//     not.
//   Forget(key): the GitSource is finalized or gone. A queued job is dropped; a running one is
//     stopped and waited for, so that nothing writes to its cache after the caller removes it.
//   Without an enqueuer (sbxd --once, unit tests) Start runs `job` in the calling thread: the same
//     contract, synchronous.
// Nothing here survives a restart; the GitSource is due again after one and fetches anew.
//
// Thread-safety: every method may be called from any thread. The destructor stops and joins the
// pool's threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/engine/source.h"
#include "controller/gitops/git_client.h"

namespace sbx::controller {

// What one fetch found: the commit (or why there is none) and the files of its tree under the
// GitSource's path (or why they cannot be read).
struct GitFetchResult {
  api::StatusOr<std::string> commit = api::InternalError("not fetched");
  api::StatusOr<std::vector<gitops::GitFile>> files = api::InternalError("not read");
};

class GitFetchPool {
 public:
  enum class State { kNone, kPending, kDone };
  struct Outcome {
    State state = State::kNone;
    std::optional<GitFetchResult> result;  // kDone only
    bool stale = false;  // kNone: an outcome of another uid or generation was dropped
  };
  using Job = std::function<GitFetchResult(std::stop_token)>;

  // `enqueuer` (may be null: synchronous) must outlive the pool. `workers` ≥ 1.
  GitFetchPool(Enqueuer* enqueuer, size_t workers);
  ~GitFetchPool();
  GitFetchPool(const GitFetchPool&) = delete;
  GitFetchPool& operator=(const GitFetchPool&) = delete;

  void Start(const api::ObjectKey& key, const std::string& uid, int64_t generation, Job job);
  Outcome Take(const api::ObjectKey& key, const std::string& uid, int64_t generation);
  void Forget(const api::ObjectKey& key);
  // Fetches queued and running (for metrics and tests).
  size_t queued() const;
  size_t running() const;

 private:
  struct Entry {
    api::ObjectKey key;
    std::string uid;
    int64_t generation = 0;
    Job job;
    bool running = false;
    bool done = false;
    std::optional<GitFetchResult> result;
    std::stop_source stop;
  };
  void Work(std::stop_token stop);

  Enqueuer* const enqueuer_;
  mutable std::mutex mu_;
  std::condition_variable_any changed_;
  std::map<api::ObjectKey, std::shared_ptr<Entry>> entries_;  // Guarded by mu_.
  std::deque<api::ObjectKey> queue_;                          // waiting. Guarded by mu_.
  std::vector<std::jthread> threads_;
};

}  // namespace sbx::controller
