// SandboxSweeper: the Source that keeps the SandboxCache fresh with one paged LIST per workspace
// (DESIGN §3 "Live state is observed, not remembered").
//
// Every `period` (±jitter) it lists each workspace that any Sandbox object or inventory record
// refers to, installs the complete result in the cache, enqueues the Sandbox objects whose live
// state changed (auto-stopped, deleted behind our back, finished starting), and then runs
// garbage collection on that complete LIST. While any sandbox of a workspace is PENDING or
// STOPPING it sweeps that workspace every `fast_period` instead: one LIST observes a whole page of
// transitions, where per-object polling would cost a GET each. A sandbox our own start
// made PENDING is looked for when the cache's estimate of the workspace's PENDING time says it
// will be RUNNING (SandboxCache::NextLook, issue #30's wake path), not on that cadence: once the
// estimate is learned, one LIST usually finds a woken sandbox at the moment it runs. A big
// workspace is fast-swept less often, so that these LISTs (aimed ones too) take no more than
// `fast_pages_per_second` of its rate budget (at 1,000 sandboxes, 10 pages: every 5 s), with
// room for one page more (in a one-page workspace, a probe and its aim back to back). Nor is it
// fast-swept while the workspace's pacing has a line of calls waiting for their tokens that reaches
// further than `fast_sweep_backlog` (issue #30): what a sweep would find now (a sandbox RUNNING)
// only leads to a call at the back of that line, so the sweep's pages would only push the line
// back; the sweep comes when the line is nearly through. (Measured at 1,000 workers: 203 LIST pages
// instead of 108 once the creates' waits went back to the work queue and the observations were no
// longer late.) Garbage collection runs on the regular sweeps only. A failed or partial LIST
// changes nothing and skips GC.
//
// A failed LIST makes the workspace's live state stale: the sweeper records it in the cache
// (SandboxCache::RecordSweepFailure) and enqueues the workspace's Sandbox objects when what they
// should show changes (the first failure of a run, another error class), so that they report
// Synced=False without an API call each; the next successful LIST enqueues them all again, to
// report Synced=True. While a workspace's LIST fails it is swept again after period/4, never on
// the fast period, whatever the cache says is in transition (that is last known, not current).
// Failed sweeps are counted per workspace (sbxd's sbx_sweep_errors_total{workspace}).
//
// Thread-safety: Run on one thread; counters from any. Collaborators must outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/source.h"
#include "controller/reconcilers/garbage_collector.h"
#include "controller/reconcilers/sandbox_cache.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct SandboxSweeperOptions {
  std::chrono::milliseconds period{std::chrono::seconds(60)};
  double jitter = 0.1;
  // 1 s: a sandbox that finished starting is seen within a second, for one LIST per second per
  // workspace while anything is in transition (5% of a 20 req/s budget; bigger workspaces are
  // capped by fast_pages_per_second).
  std::chrono::milliseconds fast_period{std::chrono::seconds(1)};
  int page_size = 100;
  double fast_pages_per_second = 2;
  // No fast sweep while the workspace's pacing line (SandboxApi::PacingBacklog) is longer.
  std::chrono::milliseconds fast_sweep_backlog{std::chrono::seconds(15)};
  // Replicas splitting workspaces (WorkspaceLeases::Owns): only the workspaces this replica
  // reconciles are swept (and garbage-collected); one it takes over is swept at once. Unset:
  // every workspace.
  std::function<bool(const std::string& workspace_id)> owns_workspace;
};

class SandboxSweeper final : public Source {
 public:
  // `gc` may be null (no garbage collection).
  SandboxSweeper(Store& store, CloudClients& clouds, SandboxCache& cache, GarbageCollector* gc,
                 Clock& clock, SandboxSweeperOptions options = {});

  std::string_view name() const override { return "sandbox-sweeper"; }
  void Run(Enqueuer& out, std::stop_token stop) override;

  // One sweep of every known workspace now (sbxd --once, tests). Returns the first error.
  api::Status SweepAll(Enqueuer& out, std::stop_token stop);

  int64_t sweeps_total() const { return sweeps_.load(); }
  // Failed sweeps: the LIST, or garbage collection after it, failed; or the store could not say
  // which workspaces there are.
  int64_t sweep_errors_total() const { return errors_.load(); }
  // Failed sweeps by WorkspaceId ("namespace/name"), since start; only workspaces with failures.
  std::map<std::string, int64_t> SweepErrorsByWorkspace() const;

 private:
  struct WorkspaceRef {
    std::string namespace_;
    std::string name;
  };
  // Workspaces to sweep, by WorkspaceId, and which Sandbox object wants each sandbox id.
  struct Known {
    std::map<std::string, WorkspaceRef> workspaces;
    std::map<std::string, std::map<std::string, api::ObjectKey>> owners;  // ws → id → key
  };
  api::StatusOr<Known> Discover();
  // Returns how many sandboxes the LIST held. `collect`: run garbage collection on the result.
  api::StatusOr<size_t> SweepOne(const std::string& workspace, const WorkspaceRef& ref,
                                 const Known& known, bool collect, Enqueuer& out,
                                 std::stop_token stop);
  // The fast sweeps' share of a workspace's rate: fast_pages_per_second, with room for one page
  // more than a sweep, so that in a one-page workspace a probe and the aim right after it need not
  // wait for each other; sustained, a sweep of P pages comes every P / rate seconds at most. Not
  // room for two whole sweeps: a 1,000-sandbox workspace would be listed twice in a row (20
  // pages) after every pause of the fast sweeps.
  struct PageBudget {
    double rate = 1;
    double tokens = 0;  // pages, at `at`; negative after a regular sweep that found it short
    std::optional<Clock::SteadyTime> at;  // unset: full
    double pages = 1;                     // of the last LIST
    void Spend(Clock::SteadyTime now, size_t listed_pages, double pages_per_second);
    // When the budget holds a LIST of `pages` again.
    Clock::SteadyTime ReadyAt() const;
    // A LIST of `pages` at the sustained rate: how long after a sweep the next un-aimed fast sweep
    // may come, at the soonest (0 before the first sweep).
    std::chrono::milliseconds Spacing() const;
  };
  size_t PagesOf(size_t listed) const;
  static constexpr std::chrono::milliseconds kMinSleep{5};
  // Whether the workspace's calls wait in a line longer than fast_sweep_backlog.
  bool Backlogged(const WorkspaceRef& ref);
  void CountError(const std::string& workspace);

  Store& store_;
  CloudClients& clouds_;
  SandboxCache& cache_;
  GarbageCollector* gc_;
  Clock& clock_;
  const SandboxSweeperOptions options_;
  const Backoff jitter_;
  std::atomic<int64_t> sweeps_{0};
  std::atomic<int64_t> errors_{0};
  mutable std::mutex errors_mu_;
  std::map<std::string, int64_t> errors_by_workspace_;  // Guarded by errors_mu_.
};

}  // namespace sbx::controller
