// LeaderElector: one active sbxd per store (DESIGN §3), by a lease row in the Store
// (TryAcquireLease / ReleaseLease) timed on the injected Clock.
//
//   standby:  WaitUntilLeader() tries to take the lease every retry_interval until it holds it
//             (the lease is free, released, or expired because its holder stopped renewing);
//   leader:   RunRenewals() renews it every renew_interval. A renewal that answers "held by
//             someone else" means the lease is lost at once; store errors are retried (every
//             retry_interval, at most renew_interval apart) until lease_duration has passed
//             since the last successful renewal — then the lease may have been taken, and it is
//             lost. Either way `on_lost` is called once and RunRenewals returns.
//   shutdown: Release() gives the lease up so a standby takes over at its next attempt instead
//             of waiting for expiry.
//   one-shot: TryAcquire() makes one attempt and does not wait (`sbxd --once`: a pass must not
//             run next to a leader); on success RunRenewals and Release work as for a leader.
//
// A standby takes over at most lease_duration + retry_interval after the leader's last renewal.
// Split brain is bounded, not excluded: a leader that cannot reach the store acts on until
// lease_duration after its last renewal; the controller tolerates the overlap (reconciles are
// idempotent, status writes are compare-and-swap).
//
// Thread-safety: is_leader() from any thread; WaitUntilLeader, RunRenewals and Release from one
// thread at a time (typically: main waits, a jthread renews, main releases after joining it).
// Ownership: the Store and Clock must outlive the elector.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct LeaderElectorOptions {
  std::string lease_name = "sbxd";
  // Unique per process; DefaultIdentity() when empty.
  std::string identity;
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds renew_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(2)};
  // Called with every store error while acquiring, renewing or releasing (for the log; the
  // engine does not log). Called on the thread that met the error. Optional.
  std::function<void(std::string_view operation, const api::Status& error)> on_store_error;
};

class LeaderElector {
 public:
  using Options = LeaderElectorOptions;

  // Aborts (a bug) unless 0 < renew_interval < lease_duration and retry_interval > 0.
  LeaderElector(Store& store, Clock& clock, Options options = {});

  // Blocks until this process holds the lease (true) or `stop` is requested (false).
  bool WaitUntilLeader(std::stop_token stop);
  // One attempt to take the lease: true if this process holds it now (is_leader() from then
  // on), false if another holder has it. Store errors are returned (and not passed to
  // on_store_error).
  StatusOr<bool> TryAcquire();
  // Call after WaitUntilLeader or TryAcquire returned true. Renews until `stop` is requested
  // (returns without calling on_lost; still leader until Release) or the lease is lost (calls
  // on_lost once, then returns; is_leader() is false from then on).
  void RunRenewals(std::stop_token stop, std::function<void()> on_lost);
  bool is_leader() const { return leader_.load(); }
  // Gives the lease up if held (a store error goes to on_store_error; the lease then expires on
  // its own). Idempotent; is_leader() is false afterwards. Not concurrently with RunRenewals.
  void Release();

  const std::string& identity() const { return options_.identity; }
  const Options& options() const { return options_; }

  // "<hostname>-<pid>", unique enough among processes sharing one store file.
  static std::string DefaultIdentity();

 private:
  Store& store_;
  Clock& clock_;
  Options options_;
  std::atomic<bool> leader_{false};
  Clock::SteadyTime last_renewal_{};  // Owned by the WaitUntilLeader/RunRenewals thread.
};

}  // namespace sbx::controller
