// Source and Enqueuer: how keys get onto the Manager's work queue.
//
// A Source runs on its own thread (started and stopped by the Manager) and reports "this object
// may need a look" through Enqueuer::Enqueue. The store watch (StoreWatch) and the periodic
// resync (PeriodicResync) are Sources; the live-state LIST sweeper will be one too. Interfaces
// only; implementations state their own thread-safety.
#pragma once

#include <stop_token>
#include <string_view>

#include "api/resources.h"

namespace sbx::controller {

class Enqueuer {
 public:
  virtual ~Enqueuer() = default;
  // Thread-safe. Enqueues `key` and every object that depends on it.
  virtual void Enqueue(const api::ObjectKey& key) = 0;
  // Thread-safe. Enqueues every object that depends on `key`, but not `key` itself: what the
  // store watch does when only `key`'s status changed (its own reconciler wrote it; re-running
  // that reconciler for it would only loop).
  virtual void EnqueueDependents(const api::ObjectKey& key) = 0;
  // Thread-safe. Enqueues `key` alone, none of its dependents: a nudge to one object's
  // reconciler (a pool told of new demand) that must not wake everything that depends on it.
  // Measured in bench/pool.sh: each queued pool task's pass enqueueing its pool with Enqueue woke
  // every other queued task of that pool (they depend on it), so 180 waiting tasks kept each
  // other in the queue. The default wakes more, which is always safe for level-based reconciles.
  virtual void EnqueueOne(const api::ObjectKey& key) { Enqueue(key); }
};

class Source {
 public:
  virtual ~Source() = default;
  // Short name for logs and metrics ("store-watch").
  virtual std::string_view name() const = 0;
  // Runs until `stop` is requested (must return promptly after that). Errors are the source's
  // own business: it retries with backoff, it never gives up while not stopped.
  virtual void Run(Enqueuer& out, std::stop_token stop) = 0;
};

}  // namespace sbx::controller
