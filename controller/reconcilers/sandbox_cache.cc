#include "controller/reconcilers/sandbox_cache.h"

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

void SandboxCache::Observe(const std::string& workspace, const databricks::Sandbox& sandbox) {
  std::lock_guard lock(mu_);
  workspaces_[workspace].entries[sandbox.sandbox_id] = Entry{true, sandbox, ++seq_};
}

void SandboxCache::Forget(const std::string& workspace, const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  workspaces_[workspace].entries[sandbox_id] = Entry{false, {}, ++seq_};
}

uint64_t SandboxCache::BeginSweep(const std::string& workspace) {
  std::lock_guard lock(mu_);
  workspaces_[workspace];  // make it known
  return ++seq_;
}

std::vector<std::string> SandboxCache::ReplaceSnapshot(
    const std::string& workspace, uint64_t ticket,
    const std::vector<databricks::Sandbox>& sandboxes) {
  std::lock_guard lock(mu_);
  Workspace& ws = workspaces_[workspace];
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
    next[sb.sandbox_id] = Entry{true, sb, ticket};
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

bool SandboxCache::HasTransitions(const std::string& workspace) const {
  std::lock_guard lock(mu_);
  auto ws = workspaces_.find(workspace);
  if (ws == workspaces_.end()) {
    return false;
  }
  for (const auto& [id, e] : ws->second.entries) {
    if (e.present && Transitional(e.sandbox.state)) {
      return true;
    }
  }
  return false;
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
