#include "controller/reconcilers/sandbox_sweeper.h"

#include <algorithm>
#include <optional>

namespace sbx::controller {

SandboxSweeper::SandboxSweeper(Store& store, CloudClients& clouds, SandboxCache& cache,
                               GarbageCollector* gc, Clock& clock, SandboxSweeperOptions options)
    : store_(store),
      clouds_(clouds),
      cache_(cache),
      gc_(gc),
      clock_(clock),
      options_(options),
      jitter_(BackoffPolicy{options.period, options.period, options.jitter}) {}

api::StatusOr<SandboxSweeper::Known> SandboxSweeper::Discover() {
  Known known;
  ListOptions sandboxes;
  sandboxes.kind = api::Kind::kSandbox;
  ASSIGN_OR_RETURN(std::vector<api::Object> objects, store_.List(sandboxes));
  for (const api::Object& o : objects) {
    const api::SandboxSpec& spec = o.sandbox_spec();
    const std::string ws = WorkspaceId(o.metadata.namespace_, spec.workspace_ref);
    known.workspaces[ws] = {o.metadata.namespace_, spec.workspace_ref};
    known.owners[ws][spec.sandbox_id] = api::KeyOf(o);
  }
  // Workspaces that only inventory remembers still need sweeping: that is where orphans live.
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(std::nullopt));
  for (const Store::InventoryRecord& r : records) {
    const size_t slash = r.workspace.find('/');
    if (slash != std::string::npos && known.workspaces.count(r.workspace) == 0) {
      known.workspaces[r.workspace] = {r.workspace.substr(0, slash), r.workspace.substr(slash + 1)};
    }
  }
  return known;
}

api::Status SandboxSweeper::SweepOne(const std::string& workspace, const WorkspaceRef& ref,
                                     const Known& known, Enqueuer& out, std::stop_token stop) {
  ASSIGN_OR_RETURN(databricks::SandboxApi * api, clouds_.Sandboxes(ref.namespace_, ref.name));
  const uint64_t ticket = cache_.BeginSweep(workspace);
  // ListAll fails as a whole if any page fails: a partial LIST never reaches the cache or GC.
  ASSIGN_OR_RETURN(std::vector<databricks::Sandbox> listed, api->ListAll(options_.page_size, stop));
  sweeps_.fetch_add(1);
  const std::vector<std::string> changed = cache_.ReplaceSnapshot(workspace, ticket, listed);
  auto owners = known.owners.find(workspace);
  if (owners != known.owners.end()) {
    for (const std::string& id : changed) {
      auto key = owners->second.find(id);
      if (key != owners->second.end()) {
        out.Enqueue(key->second);
      }
    }
  }
  if (gc_ != nullptr) {
    RETURN_IF_ERROR(gc_->CollectSandboxes(workspace, *api, listed, stop).status());
    if (gc_->HasSessions(workspace)) {
      ASSIGN_OR_RETURN(openai::AgentsApi * agents, clouds_.Agents(ref.namespace_, ref.name));
      RETURN_IF_ERROR(gc_->CollectSessions(workspace, *agents, stop).status());
    }
  }
  return api::OkStatus();
}

api::Status SandboxSweeper::SweepAll(Enqueuer& out, std::stop_token stop) {
  ASSIGN_OR_RETURN(Known known, Discover());
  api::Status first;
  for (const auto& [ws, ref] : known.workspaces) {
    api::Status s = SweepOne(ws, ref, known, out, stop);
    if (!s.ok()) {
      errors_.fetch_add(1);
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
  };
  std::map<std::string, Schedule> schedule;  // per workspace
  std::optional<Known> known;
  int64_t known_at_revision = -1;
  while (!stop.stop_requested()) {
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
        const Clock::SteadyTime now = clock_.Steady();
        auto it = schedule.find(ws);
        const bool due =
            it == schedule.end() || now >= it->second.next ||
            (cache_.HasTransitions(ws) && now - it->second.last >= options_.fast_period);
        if (!due) {
          continue;
        }
        Schedule& s = schedule[ws];
        s.last = now;
        if (api::Status status = SweepOne(ws, ref, *known, out, stop); !status.ok()) {
          errors_.fetch_add(1);
          // Try again soon, but never in a hot loop.
          s.next = now + std::max(options_.fast_period, options_.period / 4);
          continue;
        }
        s.next = now + jitter_.Jittered(options_.period, options_.jitter);
      }
    }
    // Wake at the fast period to notice new transitions; sweeping happens only when due.
    clock_.SleepFor(options_.fast_period, stop);
  }
}

}  // namespace sbx::controller
