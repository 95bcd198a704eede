#include "controller/reconcilers/sandbox_cache.h"

#include <algorithm>
#include <set>

#include "api/conditions.h"
#include "controller/base/classify_error.h"

namespace sbx::controller {
namespace {

bool Transitional(databricks::SandboxState s) {
  return s == databricks::SandboxState::kPending || s == databricks::SandboxState::kStopping;
}

bool SameObservedState(const databricks::Sandbox& a, const databricks::Sandbox& b) {
  return a.state == b.state && a.create_time == b.create_time && a.display_name == b.display_name &&
         a.inactivity_timeout == b.inactivity_timeout && a.image_uri == b.image_uri;
}

}  // namespace

SandboxCache::Lookup SandboxCache::Get(const std::string& workspace,
                                       const std::string& sandbox_id) const {
  std::lock_guard lock(mu_);
  auto ws = workspaces_.find(workspace);
  if (ws == workspaces_.end()) {
    return {};
  }
  auto it = ws->second.entries.find(sandbox_id);
  if (it == ws->second.entries.end()) {
    // Not listed by a complete snapshot means absent (we record our own creates at once).
    return {ws->second.has_snapshot ? Knowledge::kAbsent : Knowledge::kUnknown, {}};
  }
  if (!it->second.present) {
    return {Knowledge::kAbsent, {}};
  }
  return {Knowledge::kPresent, it->second.sandbox};
}

void SandboxCache::Track(Workspace& ws, const Entry* old, Entry& next, Clock::SteadyTime seen_at,
                         bool ours) {
  using databricks::SandboxState;
  const auto since = [&](Clock::SteadyTime t) {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(seen_at - t));
  };
  const bool was_pending =
      old != nullptr && old->present && old->sandbox.state == SandboxState::kPending;
  if (next.sandbox.state == SandboxState::kPending) {
    if (was_pending) {
      next.provisioning = old->provisioning;
      if (!next.provisioning || ours) {
        return;  // only the sweeps' looks were aimed
      }
      Provisioning& p = *next.provisioning;
      const bool aim_missed = p.aim && seen_at >= *p.aim;
      const bool probe_missed = p.probe && seen_at >= *p.probe;
      for (auto [look, again] :
           {std::pair{&p.probe, p.probe_again}, std::pair{&p.aim, p.aim_again}}) {
        if (*look && seen_at >= **look) {
          if (!again) {
            ws.pending[p.start ? 1 : 0].Missed(since(p.answered));
          }
          ++aimed_.misses;
          look->reset();
        }
      }
      if (aim_missed) {
        // This PENDING outlasts what was learned: look again soon rather than on the fast
        // cadence, and again after each miss, never later than the cadence (measured: a missed
        // aim left 0.5-0.7 s to the cadence, the OnDemand wake's p95 tail).
        p.aim = seen_at + kLookAgainAfterAMiss;
        p.aim_again = true;
        p.prior = true;
      } else if (probe_missed && p.aim && seen_at + kLookAgainAfterAMiss < *p.aim) {
        // The same after a probe, up to the aim (measured: a workspace's first starts, aimed by
        // its creates' 1.7 s, probed at 0.86 s and waited for the aim, 0.7 s after RUNNING).
        p.probe = seen_at + kLookAgainAfterAMiss;
        p.probe_again = true;
      }
    } else if (ours) {
      Provisioning p{
          .answered = seen_at,
          .start = old != nullptr && old->present && old->sandbox.state == SandboxState::kStopped,
          .probe = std::nullopt,
          .aim = std::nullopt,
          .prior = false,
          .probe_again = false,
          .aim_again = false};
      // Only a start is aimed at: creates come in bursts (a convergence), whose observations
      // wait behind the creates in the work queue anyway, and aimed looks at them cost LIST pages
      // and time (measured, bench/converge.sh 100: 13.2–13.4 s and 11–13 pages with them,
      // 12.6–12.8 s and 7–8 without). A create's time is still learned.
      // The first starts of a workspace (an OnDemand wake: each run's first one or two were the
      // wake's p95 tail, measured) borrow the creates' estimate, as a prior.
      std::optional<reconcilers_internal::PendingEstimate::Looks> looks;
      if (p.start) {
        looks = ws.pending[1].Next();
        if (!looks) {
          looks = ws.pending[0].Next();
          p.prior = looks.has_value();
        }
      }
      if (looks) {
        if (looks->probe) {
          p.probe = seen_at + *looks->probe;
        }
        p.aim = seen_at + looks->aim;
      }
      next.provisioning = p;
    }
    return;
  }
  if (next.sandbox.state == SandboxState::kRunning && was_pending && old->provisioning) {
    const Provisioning& p = *old->provisioning;
    ws.pending[p.start ? 1 : 0].Sighted(since(p.answered));
    if ((p.probe && seen_at >= *p.probe) || (p.aim && seen_at >= *p.aim)) {
      ++aimed_.hits;
    }
  }
}

void SandboxCache::Observe(const std::string& workspace, const databricks::Sandbox& sandbox) {
  bool aimed = false;
  {
    std::lock_guard lock(mu_);
    Workspace& ws = workspaces_[workspace];
    Entry next{true, sandbox, ++seq_, std::nullopt};
    if (clock_ != nullptr) {
      auto old = ws.entries.find(sandbox.sandbox_id);
      const bool had_looks = old != ws.entries.end() && old->second.provisioning &&
                             old->second.provisioning->aim.has_value();
      Track(ws, old == ws.entries.end() ? nullptr : &old->second, next, clock_->Steady(),
            /*ours=*/true);
      aimed = !had_looks && next.provisioning && next.provisioning->aim.has_value();
    }
    ws.entries[sandbox.sandbox_id] = std::move(next);
  }
  if (aimed) {
    std::lock_guard lock(hook_mu_);
    if (look_hook_) {
      look_hook_();
    }
  }
}

void SandboxCache::SetLookHook(std::function<void()> hook) {
  std::lock_guard lock(hook_mu_);
  look_hook_ = std::move(hook);
}

void SandboxCache::Forget(const std::string& workspace, const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  workspaces_[workspace].entries[sandbox_id] = Entry{false, {}, ++seq_, std::nullopt};
}

uint64_t SandboxCache::BeginSweep(const std::string& workspace) {
  std::lock_guard lock(mu_);
  Workspace& ws = workspaces_[workspace];  // make it known
  ws.sweep_ticket = ++seq_;
  ws.sweep_began = clock_ != nullptr ? clock_->Steady() : Clock::SteadyTime{};
  return ws.sweep_ticket;
}

std::vector<std::string> SandboxCache::ReplaceSnapshot(
    const std::string& workspace, uint64_t ticket,
    const std::vector<databricks::Sandbox>& sandboxes) {
  std::lock_guard lock(mu_);
  Workspace& ws = workspaces_[workspace];
  // Only the latest sweep's begin time is kept: an older one's result teaches nothing.
  const bool timed = clock_ != nullptr && ticket == ws.sweep_ticket;
  std::vector<std::string> changed;
  std::map<std::string, Entry> next;
  std::set<std::string> listed;
  for (const databricks::Sandbox& sb : sandboxes) {
    listed.insert(sb.sandbox_id);
    auto old = ws.entries.find(sb.sandbox_id);
    if (old != ws.entries.end() && old->second.seq > ticket) {
      next[sb.sandbox_id] = old->second;  // observed directly after the LIST began: newer
      continue;
    }
    if (old == ws.entries.end() || !old->second.present ||
        !SameObservedState(old->second.sandbox, sb)) {
      changed.push_back(sb.sandbox_id);
    }
    Entry entry{true, sb, ticket, std::nullopt};
    if (timed) {
      Track(ws, old == ws.entries.end() ? nullptr : &old->second, entry, ws.sweep_began,
            /*ours=*/false);
    }
    next[sb.sandbox_id] = std::move(entry);
  }
  for (auto& [id, entry] : ws.entries) {
    if (listed.count(id) != 0) {
      continue;
    }
    if (entry.seq > ticket) {
      next[id] = entry;  // created (or deleted) by us after the LIST began
      continue;
    }
    if (entry.present) {
      changed.push_back(id);  // gone behind our back
    }
  }
  ws.entries = std::move(next);
  ws.has_snapshot = true;
  ws.failing.reset();
  return changed;
}

bool SandboxCache::RecordSweepFailure(const std::string& workspace, const api::Status& error,
                                      Clock::WallTime now) {
  // An error while observing is not evidence about the sandboxes: only what needs a person
  // (credentials, permissions) keeps its own reason; everything retried is "Unavailable".
  const ErrorClass error_class = ClassifyError(error);
  const std::string reason =
      error_class.transient() ? std::string(api::reason::kUnavailable) : error_class.reason;
  std::lock_guard lock(mu_);
  std::optional<SweepFailure>& failing = workspaces_[workspace].failing;
  if (failing && failing->reason == reason) {
    ++failing->failures;  // the same outage: what the objects show stays as it is
    return false;
  }
  const Clock::WallTime since = failing ? failing->since : now;
  const int64_t failures = failing ? failing->failures + 1 : 1;
  failing = SweepFailure{reason,
                         "the LIST sweeps of workspace " + workspace + " have failed since " +
                             FormatRfc3339(since) +
                             "; state and Ready are as last observed: " + ConditionMessage(error),
                         since, failures};
  return true;
}

std::optional<SandboxCache::SweepFailure> SandboxCache::FailingSweep(
    const std::string& workspace) const {
  std::lock_guard lock(mu_);
  auto ws = workspaces_.find(workspace);
  if (ws == workspaces_.end()) {
    return std::nullopt;
  }
  return ws->second.failing;
}

std::optional<Clock::SteadyTime> SandboxCache::NextLook(const std::string& workspace,
                                                        Clock::SteadyTime fallback) const {
  std::lock_guard lock(mu_);
  auto ws = workspaces_.find(workspace);
  if (ws == workspaces_.end()) {
    return std::nullopt;
  }
  std::optional<Clock::SteadyTime> next;
  for (const auto& [id, e] : ws->second.entries) {
    if (!e.present || !Transitional(e.sandbox.state)) {
      continue;
    }
    Clock::SteadyTime look = fallback;
    if (e.provisioning && e.sandbox.state == databricks::SandboxState::kPending) {
      look = e.provisioning->probe.value_or(e.provisioning->aim.value_or(fallback));
      if (e.provisioning->prior) {
        look = std::min(look, fallback);
      }
    }
    next = std::min(next.value_or(look), look);
  }
  return next;
}

SandboxCache::AimedLooks SandboxCache::aimed_looks() const {
  std::lock_guard lock(mu_);
  return aimed_;
}

std::map<std::string, int64_t> SandboxCache::CountByState() const {
  std::lock_guard lock(mu_);
  std::map<std::string, int64_t> counts;
  for (const auto& [name, ws] : workspaces_) {
    for (const auto& [id, e] : ws.entries) {
      if (e.present) {
        ++counts[std::string(databricks::SandboxStateName(e.sandbox.state))];
      }
    }
  }
  return counts;
}

std::optional<int64_t> SandboxCache::SnapshotSize(const std::string& workspace) const {
  std::lock_guard lock(mu_);
  auto ws = workspaces_.find(workspace);
  if (ws == workspaces_.end() || !ws->second.has_snapshot) {
    return std::nullopt;
  }
  int64_t n = 0;
  for (const auto& [id, e] : ws->second.entries) {
    n += e.present ? 1 : 0;
  }
  return n;
}

}  // namespace sbx::controller
