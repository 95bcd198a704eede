#include "controller/reconcilers/sandbox_sweeper.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <stop_token>
#include <utility>

namespace sbx::controller {

SandboxSweeper::SandboxSweeper(Store& store, CloudClients& clouds, SandboxCache& cache,
                               GarbageCollector* gc, Clock& clock, SandboxSweeperOptions options)
    : store_(store),
      clouds_(clouds),
      cache_(cache),
      gc_(gc),
      clock_(clock),
      options_(std::move(options)),
      jitter_(BackoffPolicy{options.period, options.period, options.jitter}) {}

api::StatusOr<SandboxSweeper::Known> SandboxSweeper::Discover() {
  Known known;
  ListOptions sandboxes;
  sandboxes.kind = api::Kind::kSandbox;
  ASSIGN_OR_RETURN(std::vector<api::Object> objects, store_.List(sandboxes));
  for (const api::Object& o : objects) {
    const api::SandboxIdentity planned = api::PlannedSandbox(o);
    const std::string ws = WorkspaceId(o.metadata.namespace_, planned.workspace_ref);
    known.workspaces[ws] = {o.metadata.namespace_, planned.workspace_ref};
    known.owners[ws][planned.sandbox_id] = api::KeyOf(o);
  }
  // Workspaces that only inventory remembers still need sweeping: that is where orphans live.
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(std::nullopt));
  for (const Store::InventoryRecord& r : records) {
    if (r.state == Store::InventoryState::kAbandoned) {
      continue;  // nothing is done about it any more: no reason to keep listing its workspace
    }
    const auto parsed = ParseWorkspaceId(r.workspace);
    if (parsed && known.workspaces.count(r.workspace) == 0) {
      known.workspaces[r.workspace] = {parsed->first, parsed->second};
    }
  }
  return known;
}

api::StatusOr<size_t> SandboxSweeper::SweepOne(const std::string& workspace,
                                               const WorkspaceRef& ref, const Known& known,
                                               bool collect, Enqueuer& out, std::stop_token stop) {
  ASSIGN_OR_RETURN(databricks::SandboxApi * api, clouds_.Sandboxes(ref.namespace_, ref.name));
  const uint64_t ticket = cache_.BeginSweep(workspace);
  auto owners = known.owners.find(workspace);
  auto enqueue_all = [&] {
    if (owners != known.owners.end()) {
      for (const auto& [id, key] : owners->second) {
        out.Enqueue(key);
      }
    }
  };
  // ListAll fails as a whole if any page fails: a partial LIST never reaches the cache or GC.
  api::StatusOr<std::vector<databricks::Sandbox>> listed = api->ListAll(options_.page_size, stop);
  if (!listed.ok()) {
    // A shutdown is not a failure of the API. Otherwise the objects learn from the cache that
    // what it holds is stale; told only when that changes, so an outage costs one status write
    // per object, not one per sweep.
    if (!stop.stop_requested() &&
        cache_.RecordSweepFailure(workspace, listed.status(), clock_.Now())) {
      enqueue_all();
    }
    return listed.status();
  }
  sweeps_.fetch_add(1);
  // Only this thread records failures, so nothing ends the run between these two lines.
  const bool was_failing = cache_.FailingSweep(workspace).has_value();
  const std::vector<std::string> changed = cache_.ReplaceSnapshot(workspace, ticket, *listed);
  if (was_failing) {
    enqueue_all();  // each reports Synced=True again (and acts on what changed meanwhile)
  } else if (owners != known.owners.end()) {
    for (const std::string& id : changed) {
      auto key = owners->second.find(id);
      if (key != owners->second.end()) {
        out.Enqueue(key->second);
      }
    }
  }
  if (gc_ != nullptr && collect) {
    RETURN_IF_ERROR(gc_->CollectSandboxes(workspace, *api, *listed, stop).status());
    if (gc_->HasSessions(workspace)) {
      ASSIGN_OR_RETURN(openai::AgentsApi * agents, clouds_.Agents(ref.namespace_, ref.name));
      RETURN_IF_ERROR(gc_->CollectSessions(workspace, *agents, stop).status());
    }
  }
  return listed->size();
}

void SandboxSweeper::CountError(const std::string& workspace) {
  errors_.fetch_add(1);
  std::lock_guard lock(errors_mu_);
  ++errors_by_workspace_[workspace];
}

std::map<std::string, int64_t> SandboxSweeper::SweepErrorsByWorkspace() const {
  std::lock_guard lock(errors_mu_);
  return errors_by_workspace_;
}

size_t SandboxSweeper::PagesOf(size_t listed) const {
  const size_t page = static_cast<size_t>(std::max(1, options_.page_size));
  return std::max<size_t>(1, (listed + page - 1) / page);
}

void SandboxSweeper::PageBudget::Spend(Clock::SteadyTime now, size_t listed_pages,
                                       double pages_per_second) {
  rate = std::max(0.001, pages_per_second);
  pages = static_cast<double>(listed_pages);
  const double held =
      at ? tokens + std::chrono::duration<double>(now - *at).count() * rate : pages + 1;
  tokens = std::min(pages + 1, held) - pages;
  at = now;
}

std::chrono::milliseconds SandboxSweeper::PageBudget::Spacing() const {
  if (!at) {
    return std::chrono::milliseconds(0);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(1000.0 * pages / rate));
}

Clock::SteadyTime SandboxSweeper::PageBudget::ReadyAt() const {
  const double missing = pages - tokens;
  if (!at || missing <= 0) {
    return at.value_or(Clock::SteadyTime{});
  }
  return *at + std::chrono::duration_cast<Clock::SteadyTime::duration>(
                   std::chrono::duration<double>(missing / rate));
}

bool SandboxSweeper::Backlogged(const WorkspaceRef& ref) {
  api::StatusOr<databricks::SandboxApi*> api = clouds_.Sandboxes(ref.namespace_, ref.name);
  return api.ok() && (*api)->PacingBacklog() > options_.fast_sweep_backlog;
}

api::Status SandboxSweeper::SweepAll(Enqueuer& out, std::stop_token stop) {
  ASSIGN_OR_RETURN(Known known, Discover());
  api::Status first;
  for (const auto& [ws, ref] : known.workspaces) {
    if (options_.owns_workspace && !options_.owns_workspace(ws)) {
      continue;
    }
    api::Status s = SweepOne(ws, ref, known, /*collect=*/true, out, stop).status();
    if (!s.ok()) {
      CountError(ws);
      if (first.ok()) {
        first = s.Annotate("sweep of workspace " + ws);
      }
    }
  }
  return first;
}

void SandboxSweeper::Run(Enqueuer& out, std::stop_token stop) {
  struct Schedule {
    Clock::SteadyTime last{};
    Clock::SteadyTime next{};
    PageBudget budget;
  };
  std::map<std::string, Schedule> schedule;  // per workspace
  // When this workspace's next fast sweep is due, if it has transitions: the cache's aimed looks
  // and, for the rest, the fast period (never shorter than the budget's spacing); never before
  // the page budget has the pages.
  const auto fast_due = [&](const std::string& ws,
                            const Schedule& s) -> std::optional<Clock::SteadyTime> {
    std::optional<Clock::SteadyTime> look =
        cache_.NextLook(ws, s.last + std::max(options_.fast_period, s.budget.Spacing()));
    if (!look) {
      return std::nullopt;
    }
    return std::max(*look, s.budget.ReadyAt());
  };
  // A new aimed look (our own start answered) ends the current sleep, so that the look
  // is planned at once, not on the next fast-period wake.
  std::mutex nap_mu;
  std::stop_source nap;  // Guarded by nap_mu: the current sleep's
  cache_.SetLookHook([&] {
    std::lock_guard lock(nap_mu);
    nap.request_stop();
  });
  struct Unhook {
    SandboxCache& cache;
    ~Unhook() { cache.SetLookHook(nullptr); }
  } unhook{cache_};
  std::optional<Known> known;
  int64_t known_at_revision = -1;
  while (!stop.stop_requested()) {
    std::stop_source this_nap;  // before planning: a look that arrives meanwhile is not lost
    {
      std::lock_guard lock(nap_mu);
      nap = this_nap;
    }
    // Wake at the fast period to notice new transitions, or sooner for a look that is due then.
    Clock::SteadyTime wake = clock_.Steady() + options_.fast_period;
    // Re-read which workspaces and owners exist only when the store changed.
    api::StatusOr<int64_t> revision = store_.CurrentRevision();
    if (!revision.ok() || *revision != known_at_revision || !known) {
      api::StatusOr<Known> discovered = Discover();
      if (discovered.ok()) {
        known = *std::move(discovered);
        known_at_revision = revision.ok() ? *revision : -1;
      } else {
        errors_.fetch_add(1);
      }
    }
    if (known) {
      for (const auto& [ws, ref] : known->workspaces) {
        if (options_.owns_workspace && !options_.owns_workspace(ws)) {
          schedule.erase(ws);  // swept at once if this replica takes it (over)
          continue;
        }
        const Clock::SteadyTime now = clock_.Steady();
        auto it = schedule.find(ws);
        const bool regular = it == schedule.end() || now >= it->second.next;
        // A failing workspace's transitions are last known, not current: no fast sweeps then.
        const std::optional<Clock::SteadyTime> due =
            regular || cache_.FailingSweep(ws) ? std::nullopt : fast_due(ws, it->second);
        const bool fast = due && now >= *due && !Backlogged(ref);
        if (!regular && !fast) {
          if (due && *due > now) {
            wake = std::min(wake, *due);
          }
          continue;
        }
        Schedule& s = schedule[ws];
        s.last = now;
        api::StatusOr<size_t> listed = SweepOne(ws, ref, *known, /*collect=*/regular, out, stop);
        if (!listed.ok()) {
          CountError(ws);
          // Try again soon, but never in a hot loop.
          s.next = now + std::max(options_.fast_period, options_.period / 4);
          continue;
        }
        // The fast cadence and the page budget count from the sweep's end: its pages went out
        // over its duration (10 pages take half a second at 20 req/s). Measured at 1,000
        // sandboxes: counted from its start, 129–134 LIST pages in a convergence, from its end
        // 116–121 (105–111 while the sweeper slept 1 s at a time instead of until the next look).
        s.last = clock_.Steady();
        s.budget.Spend(s.last, PagesOf(*listed), options_.fast_pages_per_second);
        if (regular) {
          s.next = now + jitter_.Jittered(options_.period, options_.jitter);
        }
        if (std::optional<Clock::SteadyTime> next = fast_due(ws, s)) {
          wake = std::min(wake, *next);
        }
      }
    }
    // Sweeping happens only when due; never a hot loop, even for a look due now.
    std::stop_callback relay(stop, [this_nap]() mutable { this_nap.request_stop(); });
    clock_.SleepUntil(std::max(wake, clock_.Steady() + kMinSleep), this_nap.get_token());
  }
}

}  // namespace sbx::controller
