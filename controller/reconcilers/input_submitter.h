// InputSubmitter: makes a task's input POST in the background, so that the service's hold does
// not hold a reconcile worker.
//
// While no executor is connected, the Agents API holds `POST …/events` for up to five minutes
// (reference §2.2) before it answers 202 or fails. Made inside Reconcile, that wait would block
// one of the engine's workers for the whole hold, and the task could not say why it waits. Here
// each POST runs on a thread of its own; the reconciler starts it, returns, and reads the outcome
// on a later pass (the task is enqueued when the POST ends).
//
// Contract:
//   Start(key, uid, post) runs `post` on a new thread unless one for `uid` is in flight or has
//     an outcome not yet taken (the reconciler then just looks later). `post` gets a stop token
//     that fires when the submitter is destroyed (sbxd stopping).
//   Take(uid) → kNone (nothing started, or the outcome was taken), kInFlight, or kDone with the
//     POST's status, which is then forgotten.
//   Forget(uid): the task is finished or gone; an in-flight POST's outcome is dropped when it
//     ends (its request is not aborted: the service may have accepted it already).
//   Cancel(uid): the task's deadline passed (or it was cancelled) while the POST is still held:
//     fires the POST's stop token, which closes its connection at once, and returns after the
//     POST's thread has ended; its outcome is dropped and nothing is enqueued. The service drops
//     the input of a POST whose client went away (reference §2.1, observed: "a client whose proxy
//     cut the open POST lost that input"; unconfirmed, so the reconciler still looks for a turn
//     once after the cut and cancels any it finds).
//   Without an enqueuer (sbxd --once, unit tests) Start runs `post` in the calling thread and
//   Take returns its outcome: the same contract, synchronous.
// Nothing here survives a restart; the reconciler's re-POST with the same Idempotency-Key does.
//
// Thread-safety: every method may be called from any thread. The destructor stops and joins
// every POST thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "api/resources.h"
#include "api/status.h"
#include "controller/engine/source.h"

namespace sbx::controller {

class InputSubmitter {
 public:
  enum class State { kNone, kInFlight, kDone };
  struct Outcome {
    State state = State::kNone;
    api::Status status;  // kDone only
  };
  using Post = std::function<api::Status(std::stop_token)>;

  // `enqueuer` (may be null: synchronous) must outlive the submitter.
  explicit InputSubmitter(Enqueuer* enqueuer) : enqueuer_(enqueuer) {}
  ~InputSubmitter();
  InputSubmitter(const InputSubmitter&) = delete;
  InputSubmitter& operator=(const InputSubmitter&) = delete;

  void Start(const api::ObjectKey& key, const std::string& uid, Post post);
  Outcome Take(const std::string& uid);
  void Forget(const std::string& uid);
  void Cancel(const std::string& uid);
  int in_flight() const;

 private:
  struct Entry {
    bool done = false;
    bool forgotten = false;
    api::Status status;
    std::jthread thread;  // empty when synchronous
  };
  // Joins and drops entries whose POST ended and whose outcome nobody will take. Called with
  // mu_ held; the threads joined have finished (done is their last write).
  void ReapLocked();

  Enqueuer* const enqueuer_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // by task uid. Guarded by mu_.
};

}  // namespace sbx::controller
