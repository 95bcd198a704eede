// PendingEstimate: how long a workspace's sandboxes stay PENDING after a create or a start, learned
// from what the LIST sweeps saw, so that the sweeper's first look after a start comes when the
// sandbox is due to be RUNNING instead of somewhere in its 1 s fast-sweep cadence (issue #30, the
// wake path: that cadence was a uniform 0–1 s between RUNNING and sbxd knowing it, most of the
// wake's p95 above its floor). The API has no time of the last state change (reference §1:
// clients poll GET), so the time is measured from the call's answer.
//
// Evidence, over the last kWindow pieces: a sighting (a LIST that began `d` after the call
// answered saw the sandbox RUNNING: PENDING took at most about d) and a miss (a look aimed at `d`
// saw it still PENDING: it took longer). The aim is the shortest sighting. While the longest miss
// is more than kTolerance below it, each provisioning also probes halfway between them first (a
// binary search; a probe that misses costs one LIST and no latency, the aim still comes). A miss
// at or past a sighting drops that sighting (PENDING got longer); old evidence leaves the window,
// so a PENDING that got shorter is found by probing again. No sighting yet: no aim, and the
// sweeper keeps its fast period.
//
// Not thread-safe: SandboxCache guards it.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>

namespace sbx::controller::reconcilers_internal {

class PendingEstimate {
 public:
  static constexpr size_t kWindow = 16;
  static constexpr std::chrono::milliseconds kTolerance{50};

  // When to look after a provisioning call answered: `probe` (optional) first, then `aim`.
  struct Looks {
    std::optional<std::chrono::milliseconds> probe;
    std::chrono::milliseconds aim{};
  };
  // Nullopt until something was seen RUNNING.
  std::optional<Looks> Next() const;

  // A LIST that began `after` the call answered saw the sandbox RUNNING.
  void Sighted(std::chrono::milliseconds after);
  // A look aimed at `after` the call answered saw it still PENDING.
  void Missed(std::chrono::milliseconds after);

 private:
  struct Evidence {
    std::chrono::milliseconds after;
    bool running;
  };
  void Add(Evidence e);

  std::deque<Evidence> window_;  // oldest first
};

}  // namespace sbx::controller::reconcilers_internal
