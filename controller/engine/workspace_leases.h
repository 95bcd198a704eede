// WorkspaceLeases: how several sbxd replicas sharing one store split the work (DESIGN §7.4).
// Every workspace has a lease row "workspace/<namespace>/<name>"; a replica reconciles only the
// objects of the workspaces whose lease it holds, and checks the lease again, with its fencing
// token, right before every call that changes something in a cloud (CheckMutation).
//
// Membership: every replica holds "member/<identity>"; the live members (unexpired) are counted
// every round, and each replica takes at most its share, ceil(workspaces / members).
//
// One round (Tick, every renew_interval from Run):
//   1. renew the membership lease; count the live members;
//   2. renew every workspace lease held: a renewal that finds the lease taken (or taken anew:
//      another token) means it is lost at once; a store error keeps it until lease_duration after
//      its last renewal, then it is lost (as in LeaderElector);
//   3. give up (ReleaseLease) the leases marked for release in the round before;
//   4. above the share (a replica joined): mark the excess for release. A marked workspace is
//      not reconciled and refuses mutations from that moment, and its lease is released one
//      round later, so a call that passed CheckMutation just before has landed first;
//   5. below the share: take free or expired workspace leases, in an order that differs per
//      replica (rendezvous hashing), so replicas starting together do not all race for the same.
// The workspaces are the Workspace objects, every workspace a lease row names, and every one
// Owns() was asked about (the env-backed "default" of a namespace has no object: its objects
// wait for the next round the first time it is seen). A lease held for a workspace with no
// Workspace object that no reconcile asked about for 2 × lease_duration is released (gone).
//
// Owns() is the Manager's gate: true while the lease is held (and fresh by our own clock).
//
// Takeover: a dead replica's workspaces are free lease_duration after its last renewal and are
// taken at the next round of a live replica: at most lease_duration + renew_interval.
// Fencing: tokens grow with every tenure (Store::AcquireLease); CheckMutation compares the
// token this replica took with the row's, so a replica whose lease lapsed (paused, cut off from
// the store) refuses to act even before it notices in a round. The clouds cannot check a token
// themselves; each request carries it (FencedTransport's X-Sbx-Fence) for the record.
//
// Thread-safety: every method from any thread. Ownership: Store and Clock outlive this.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

// A tenure as a request carries it: the fencing token, and when (this replica's wall clock) it
// was last found fresh.
struct FenceToken {
  int64_t token = 0;
  Clock::WallTime checked_at;
};

// What a cloud client asks before a call (controller/cloud/fenced_transport.h).
class WorkspaceFence {
 public:
  virtual ~WorkspaceFence() = default;
  // OK when this replica may change things in workspace `workspace_id` ("<ns>/<name>") now;
  // kAborted (transient: the work moved) otherwise. Reads the lease row.
  virtual api::Status CheckMutation(const std::string& workspace_id) = 0;
  // The fencing token this replica holds for the workspace, if it holds it and its last renewal
  // is less than the lease duration ago by this replica's own clock (no store read); checked_at
  // is now.
  virtual std::optional<FenceToken> Token(const std::string& workspace_id) const = 0;
  virtual const std::string& identity() const = 0;
};

struct WorkspaceLeasesOptions {
  std::string identity;  // required; unique per process (LeaderElector::DefaultIdentity)
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds renew_interval{std::chrono::seconds(5)};
  // Every store error of a round (for the log). Optional.
  std::function<void(std::string_view operation, const api::Status& error)> on_store_error;
};

class WorkspaceLeases final : public WorkspaceFence {
 public:
  using Options = WorkspaceLeasesOptions;

  static constexpr std::string_view kWorkspacePrefix = "workspace/";
  static constexpr std::string_view kMemberPrefix = "member/";

  struct Round {
    int members = 0;  // live replicas, this one included
    int workspaces = 0;
    int share = 0;
    std::vector<std::string> acquired;  // workspace ids taken this round
    std::vector<std::string> lost;      // taken by another replica, or lapsed
    std::vector<std::string> released;  // given up (rebalance, gone)
  };

  // Aborts (a bug) unless identity is set and 0 < renew_interval < lease_duration.
  WorkspaceLeases(Store& store, Clock& clock, Options options);

  // One round (see above). An error means the membership or listing failed; leases whose
  // renewal failed for lease_duration are lost all the same (reported in the error's round).
  api::StatusOr<Round> Tick();
  // Tick every renew_interval until `stop`; `on_round` after each successful round.
  void Run(std::stop_token stop, const std::function<void(const Round&)>& on_round);
  // Releases every lease held and the membership (shutdown): the others take over at their
  // next round instead of after lease_duration.
  void ReleaseAll();

  // The gate: whether this replica reconciles the objects of `workspace_id` now.
  api::StatusOr<bool> Owns(const std::string& workspace_id);

  api::Status CheckMutation(const std::string& workspace_id) override;
  std::optional<FenceToken> Token(const std::string& workspace_id) const override;
  const std::string& identity() const override { return options_.identity; }

  // The workspaces held now, with their tokens (metrics, logs).
  std::map<std::string, int64_t> Held() const;

 private:
  struct Tenure {
    int64_t token = 0;
    Clock::SteadyTime renewed_at;  // the attempt that last renewed it
    Clock::SteadyTime used_at;     // the last Owns() that asked about it
    bool releasing = false;
  };
  bool Fresh(const Tenure& t, Clock::SteadyTime now) const;
  void Report(std::string_view operation, const api::Status& error) const;
  // Drops tenures not renewed for lease_duration; adds their ids to `lost`. Requires mu_.
  void ExpireLocked(Clock::SteadyTime now, std::vector<std::string>& lost);

  Store& store_;
  Clock& clock_;
  const Options options_;

  mutable std::mutex mu_;
  std::map<std::string, Tenure> held_;  // Guarded by mu_. By workspace id.
  // Workspaces another replica held when last looked at, until when (wall clock): Owns() does
  // not read the store for them again before then. Guarded by mu_.
  std::map<std::string, Clock::WallTime> others_;
  // Workspaces Owns() was asked about that have no Workspace object (see above). Guarded by mu_.
  std::set<std::string> wanted_;
};

}  // namespace sbx::controller
