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
// reconcilers say so (Synced=False) without calling the API for each object. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/databricks/sandbox_api.h"

namespace sbx::controller {

class SandboxCache {
 public:
  // What the cache knows of one sandbox id.
  enum class Knowledge { kUnknown, kPresent, kAbsent };
  struct Lookup {
    Knowledge knowledge = Knowledge::kUnknown;
    databricks::Sandbox sandbox;  // valid when kPresent
  };

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

  // Whether any known sandbox of `workspace` is in a transitional state (PENDING, STOPPING):
  // the sweeper then sweeps sooner instead of every object polling on its own.
  bool HasTransitions(const std::string& workspace) const;
  // Sandboxes by state name, over all workspaces (for /metrics).
  std::map<std::string, int64_t> CountByState() const;
  // Number of sandboxes in the workspace's snapshot; nullopt before the first sweep.
  std::optional<int64_t> SnapshotSize(const std::string& workspace) const;

 private:
  struct Entry {
    bool present = false;
    databricks::Sandbox sandbox;
    uint64_t seq = 0;  // sequence of the observation that wrote it
  };
  struct Workspace {
    bool has_snapshot = false;
    std::map<std::string, Entry> entries;
    std::optional<SweepFailure> failing;
  };

  mutable std::mutex mu_;
  uint64_t seq_ = 0;                             // Guarded by mu_.
  std::map<std::string, Workspace> workspaces_;  // Guarded by mu_.
};

}  // namespace sbx::controller
