// SandboxCache: the controller's view of live sandboxes, per workspace (DESIGN §3 "Live state is
// observed, not remembered").
//
// Filled two ways: a paged LIST sweep per workspace replaces the workspace's snapshot
// (ReplaceSnapshot), and every mutation or GET records its answer at once (Observe/Forget). A
// reconciler reads from here instead of GETting each sandbox, so a steady fleet of N sandboxes
// costs ⌈N/page⌉ LIST calls per sweep, not N GETs.
//
// A snapshot that started before a later Observe/Forget of the same id does not overwrite it
// (the direct observation is newer).
//
// It also remembers, per workspace, whether the LIST sweeps are failing (RecordSweepFailure, until
// the next ReplaceSnapshot): the snapshot is then the last known state, not the current one, and
// reconcilers say so (Synced=False) without calling the API for each object.
//
// And, when given a clock, how long the workspace's creates and starts stay PENDING
// (reconcilers_internal::PendingEstimate, from the calls' answers and the sweeps' sightings), so
// that NextLook can aim the sweeper's next LIST at the moment a started sandbox is due to be
// RUNNING (creates are not aimed at: they come in bursts).
// Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/reconcilers/internal/pending_estimate.h"

namespace sbx::controller {

class SandboxCache {
 public:
  // What the cache knows of one sandbox id.
  enum class Knowledge { kUnknown, kPresent, kAbsent };
  struct Lookup {
    Knowledge knowledge = Knowledge::kUnknown;
    databricks::Sandbox sandbox;  // valid when kPresent
  };

  // `clock`: what PENDING times are measured on; null: none are (no aimed looks). Must outlive it.
  explicit SandboxCache(const Clock* clock = nullptr) : clock_(clock) {}

  Lookup Get(const std::string& workspace, const std::string& sandbox_id) const;

  // Direct observations (GET answers, mutation responses, a 404).
  void Observe(const std::string& workspace, const databricks::Sandbox& sandbox);
  void Forget(const std::string& workspace, const std::string& sandbox_id);  // now known absent

  // A sweep is about to LIST `workspace`; returns a ticket for ReplaceSnapshot.
  uint64_t BeginSweep(const std::string& workspace);
  // Installs a complete LIST result taken under `ticket` and ends a run of failed sweeps
  // (FailingSweep is nullopt afterwards). Returns the ids whose state changed (appeared,
  // disappeared, or changed state / create_time), so their owners can be enqueued.
  std::vector<std::string> ReplaceSnapshot(const std::string& workspace, uint64_t ticket,
                                           const std::vector<databricks::Sandbox>& sandboxes);

  // Why the live state of a workspace may be stale: its LIST sweeps have been failing.
  struct SweepFailure {
    // Condition reason: "Unavailable" for errors that mean the API did not answer (5xx, connection
    // refused, timeouts, 429: the ClassifyError transient classes), else the class of the
    // terminal error (Unauthenticated, PermissionDenied, …), which needs someone to act.
    std::string reason;
    // For Synced. Stable for a whole run of failures of one class: it names the time of the
    // first failure and that failure's error, never a count or the time of the latest sweep,
    // so a long outage writes each object's status once, not once per sweep.
    std::string message;
    Clock::WallTime since{};  // the first failed LIST of the run
    int64_t failures = 0;     // failed LISTs in a row
  };
  // A LIST of `workspace` (`error`, not OK) failed at `now`. The snapshot is kept as the last
  // known state. Returns true when reason or message changed (the first failure of a run, or an
  // error of another reason), i.e. when the workspace's objects should be told.
  bool RecordSweepFailure(const std::string& workspace, const api::Status& error,
                          Clock::WallTime now);
  // The current run of failed LISTs of `workspace`; nullopt when its last LIST succeeded or none
  // was tried. ReplaceSnapshot ends a run.
  std::optional<SweepFailure> FailingSweep(const std::string& workspace) const;

  // When the sweeper should next LIST `workspace` for its transitions (PENDING, STOPPING: it then
  // sweeps sooner instead of every object polling on its own): the earliest look aimed at
  // a start of ours (a probe, else its aim: PendingEstimate), and `fallback` (the
  // sweeper's fast cadence) for every other sandbox in transition. Nullopt when none is.
  // Before any start of the workspace was learned, a start's looks are aimed by its creates'
  // estimate (the reference gives no PENDING times; the emulator's are the same for both), but
  // no later than `fallback`: a guess that is too long costs nothing over the cadence.
  std::optional<Clock::SteadyTime> NextLook(const std::string& workspace,
                                            Clock::SteadyTime fallback) const;
  // Called, outside the cache's lock, when a start of ours gets an aimed look, so that
  // the sweeper can plan its sleep again (SandboxSweeper::Run sets it while it runs; null: none).
  void SetLookHook(std::function<void()> hook);
  // Aimed looks (probes and aims) that found their sandbox RUNNING, and that found it PENDING.
  struct AimedLooks {
    int64_t hits = 0;
    int64_t misses = 0;
  };
  AimedLooks aimed_looks() const;
  // Sandboxes by state name, over all workspaces (for /metrics).
  std::map<std::string, int64_t> CountByState() const;
  // Number of sandboxes in the workspace's snapshot; nullopt before the first sweep.
  std::optional<int64_t> SnapshotSize(const std::string& workspace) const;

 private:
  // A PENDING that our own create or start began (seen in its answer, with a clock).
  struct Provisioning {
    Clock::SteadyTime answered{};
    bool start = false;  // a start (the sandbox was STOPPED), else a create
    std::optional<Clock::SteadyTime> probe;
    std::optional<Clock::SteadyTime> aim;
    // The looks are a guess (the workspace's creates' estimate, no start learned yet; or a
    // look again after a missed aim), so never later than the fast cadence would look. After a
    // missed probe the next probe comes kLookAgainAfterAMiss later, while that is before the aim.
    bool prior = false;
    // The probe or the aim is a look again after a miss: its own miss is no evidence (the
    // estimate keeps what it learned as before; a run of 200 ms misses up to a one-off long
    // PENDING would hold the next starts' probes near it until they aged out).
    bool probe_again = false;
    bool aim_again = false;
  };
  static constexpr std::chrono::milliseconds kLookAgainAfterAMiss{200};
  struct Entry {
    bool present = false;
    databricks::Sandbox sandbox;
    uint64_t seq = 0;  // sequence of the observation that wrote it
    std::optional<Provisioning> provisioning;
  };
  struct Workspace {
    bool has_snapshot = false;
    std::map<std::string, Entry> entries;
    std::optional<SweepFailure> failing;
    std::array<reconcilers_internal::PendingEstimate, 2> pending;  // [0] creates, [1] starts
    uint64_t sweep_ticket = 0;  // the latest BeginSweep's, and when it began
    Clock::SteadyTime sweep_began{};
  };
  // What `next` (seen at `seen_at`) carries on of `old`'s provisioning, learning from it: a
  // sighting when it is RUNNING now, a miss for each look it was due for. `ours`: `next` is the
  // answer of our own call, so a PENDING that was not one before begins a provisioning.
  void Track(Workspace& ws, const Entry* old, Entry& next, Clock::SteadyTime seen_at, bool ours);

  const Clock* const clock_;
  std::mutex hook_mu_;
  std::function<void()> look_hook_;  // Guarded by hook_mu_.
  mutable std::mutex mu_;
  AimedLooks aimed_;                             // Guarded by mu_.
  uint64_t seq_ = 0;                             // Guarded by mu_.
  std::map<std::string, Workspace> workspaces_;  // Guarded by mu_.
};

}  // namespace sbx::controller
