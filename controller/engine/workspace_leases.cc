#include "controller/engine/workspace_leases.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <utility>

namespace sbx::controller {

namespace {

std::string LeaseName(std::string_view prefix, const std::string& id) {
  return std::string(prefix) + id;
}

// Rendezvous hashing: each replica ranks the workspaces in its own order, so replicas that
// take leases at the same moment mostly ask for different ones.
size_t Score(const std::string& identity, const std::string& id) {
  return std::hash<std::string>{}(identity + '\n' + id);
}

// What one round starts from: this replica's membership renewed, how many replicas are alive,
// the Workspace objects and the workspace lease rows.
struct World {
  int members = 1;                 // this replica and every other unexpired member
  std::set<std::string> existing;  // "namespace/name" of every Workspace object
  std::vector<Store::Lease> rows;  // every workspace lease
};

// `failed` names the store operation that failed, for the report.
api::StatusOr<World> ReadWorld(Store& store, const std::string& identity,
                               std::chrono::milliseconds lease_duration, Clock::WallTime wall,
                               std::string& failed) {
  World w;
  if (auto member = store.AcquireLease(LeaseName(WorkspaceLeases::kMemberPrefix, identity),
                                       identity, lease_duration);
      !member.ok()) {
    failed = "renew membership";
    return member.status();
  }
  auto members = store.ListLeases(std::string(WorkspaceLeases::kMemberPrefix));
  if (!members.ok()) {
    failed = "list members";
    return members.status();
  }
  for (const Store::Lease& m : *members) {
    if (m.holder != identity && m.expires_at > wall) {
      ++w.members;
    }
  }
  ListOptions workspaces;
  workspaces.kind = api::Kind::kWorkspace;
  auto objects = store.List(workspaces);
  if (!objects.ok()) {
    failed = "list workspaces";
    return objects.status();
  }
  auto rows = store.ListLeases(std::string(WorkspaceLeases::kWorkspacePrefix));
  if (!rows.ok()) {
    failed = "list workspace leases";
    return rows.status();
  }
  for (const api::Object& o : *objects) {
    w.existing.insert(o.metadata.namespace_ + "/" + o.metadata.name);
  }
  w.rows = *std::move(rows);
  return w;
}

}  // namespace

WorkspaceLeases::WorkspaceLeases(Store& store, Clock& clock, Options options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  if (options_.identity.empty() || options_.renew_interval.count() <= 0 ||
      options_.renew_interval >= options_.lease_duration) {
    std::abort();  // a bug in the caller: see the header
  }
}

bool WorkspaceLeases::Fresh(const Tenure& t, Clock::SteadyTime now) const {
  return now - t.renewed_at < options_.lease_duration;
}

void WorkspaceLeases::Report(std::string_view operation, const api::Status& error) const {
  if (options_.on_store_error) {
    options_.on_store_error(operation, error);
  }
}

void WorkspaceLeases::ExpireLocked(Clock::SteadyTime now, std::vector<std::string>& lost) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (!Fresh(it->second, now)) {
      lost.push_back(it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
}

api::StatusOr<WorkspaceLeases::Round> WorkspaceLeases::Tick() {
  Round round;
  // Expiries are counted from before the store stamps them: on the safe side.
  const Clock::SteadyTime attempt_at = clock_.Steady();
  const Clock::WallTime wall = clock_.Now();
  const auto fail = [&](std::string_view operation, const api::Status& error) {
    Report(operation, error);
    std::lock_guard lock(mu_);
    ExpireLocked(clock_.Steady(), round.lost);
    return error;
  };

  // 1. Membership, and who else is alive.
  std::string failed;
  api::StatusOr<World> world =
      ReadWorld(store_, options_.identity, options_.lease_duration, wall, failed);
  if (!world.ok()) {
    return fail(failed, world.status());
  }
  round.members = world->members;
  const std::set<std::string>& existing = world->existing;
  std::map<std::string, const Store::Lease*> row_of;  // by workspace id
  std::set<std::string> ids = existing;
  for (const Store::Lease& row : world->rows) {
    const std::string id = row.name.substr(kWorkspacePrefix.size());
    row_of[id] = &row;
    ids.insert(id);
  }
  std::map<std::string, Tenure> snapshot;
  {
    std::lock_guard lock(mu_);
    ids.insert(wanted_.begin(), wanted_.end());
    snapshot = held_;
  }

  // 2.–3. Renew what is held; give up what was marked in the round before.
  for (const auto& [id, tenure] : snapshot) {
    const std::string name = LeaseName(kWorkspacePrefix, id);
    if (tenure.releasing) {
      if (api::Status s = store_.ReleaseLease(name, options_.identity); !s.ok()) {
        Report("release " + name, s);  // it expires on its own
      }
      std::lock_guard lock(mu_);
      held_.erase(id);
      round.released.push_back(id);
      continue;
    }
    auto token = store_.AcquireLease(name, options_.identity, options_.lease_duration);
    if (!token.ok()) {
      Report("renew " + name, token.status());
      continue;  // kept until it is no longer fresh (below)
    }
    std::lock_guard lock(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) {
      continue;
    }
    if (!token->has_value()) {
      held_.erase(it);  // another replica took it: ours had lapsed in the store's eyes
      round.lost.push_back(id);
      continue;
    }
    if (**token != it->second.token) {
      // Ours had lapsed and nobody took it: a new tenure. What the old one started may have
      // been judged by others meanwhile, so it counts as lost and taken again.
      round.lost.push_back(id);
      round.acquired.push_back(id);
      it->second.token = **token;
    }
    it->second.renewed_at = attempt_at;
  }

  // Decided under the lock; the store is asked without it (Token() and Owns(), on every cloud
  // request and every reconcile, take the same lock).
  std::unique_lock lock(mu_);
  const Clock::SteadyTime now = clock_.Steady();
  ExpireLocked(now, round.lost);
  // A workspace with no object that nobody asked about for a while is gone: give it up.
  for (auto& [id, tenure] : held_) {
    if (!existing.contains(id) && now - tenure.used_at > 2 * options_.lease_duration) {
      tenure.releasing = true;
      wanted_.erase(id);
    }
  }
  round.workspaces = static_cast<int>(ids.size());
  round.share = (round.workspaces + round.members - 1) / round.members;
  std::vector<std::string> active;
  for (const auto& [id, tenure] : held_) {
    if (!tenure.releasing) {
      active.push_back(id);
    }
  }
  const auto by_score = [&](const std::string& a, const std::string& b) {
    return Score(options_.identity, a) > Score(options_.identity, b);
  };

  // 4. Above the share: mark the ones this replica ranks lowest.
  if (static_cast<int>(active.size()) > round.share) {
    std::sort(active.begin(), active.end(), by_score);
    for (size_t i = static_cast<size_t>(round.share); i < active.size(); ++i) {
      held_[active[i]].releasing = true;
    }
    return round;
  }

  // 5. Below the share: take free or expired leases, best-ranked first.
  std::vector<std::string> candidates;
  for (const std::string& id : ids) {
    if (held_.contains(id)) {
      continue;
    }
    auto row = row_of.find(id);
    if (row == row_of.end() || row->second->expires_at <= wall) {
      candidates.push_back(id);
    }
  }
  std::sort(candidates.begin(), candidates.end(), by_score);
  int wanted = round.share - static_cast<int>(active.size());
  lock.unlock();
  for (const std::string& id : candidates) {
    if (wanted <= 0) {
      break;
    }
    auto token = store_.AcquireLease(LeaseName(kWorkspacePrefix, id), options_.identity,
                                     options_.lease_duration);
    if (!token.ok()) {
      Report("acquire " + LeaseName(kWorkspacePrefix, id), token.status());
      break;
    }
    if (!token->has_value()) {
      continue;  // another replica was quicker
    }
    std::lock_guard relock(mu_);
    held_[id] = Tenure{.token = **token, .renewed_at = attempt_at, .used_at = now};
    others_.erase(id);
    round.acquired.push_back(id);
    --wanted;
  }
  return round;
}

void WorkspaceLeases::Run(std::stop_token stop, const std::function<void(const Round&)>& on_round) {
  while (!stop.stop_requested()) {
    const Clock::SteadyTime started = clock_.Steady();
    api::StatusOr<Round> round = Tick();
    if (round.ok() && on_round) {
      on_round(*round);
    }
    if (!clock_.SleepUntil(started + options_.renew_interval, stop)) {
      return;
    }
  }
}

void WorkspaceLeases::ReleaseAll() {
  std::map<std::string, Tenure> held;
  {
    std::lock_guard lock(mu_);
    held.swap(held_);
  }
  for (const auto& [id, tenure] : held) {
    const std::string name = LeaseName(kWorkspacePrefix, id);
    if (api::Status s = store_.ReleaseLease(name, options_.identity); !s.ok()) {
      Report("release " + name, s);
    }
  }
  const std::string member = LeaseName(kMemberPrefix, options_.identity);
  if (api::Status s = store_.ReleaseLease(member, options_.identity); !s.ok()) {
    Report("release " + member, s);
  }
}

api::StatusOr<bool> WorkspaceLeases::Owns(const std::string& workspace_id) {
  {
    std::lock_guard lock(mu_);
    const Clock::SteadyTime now = clock_.Steady();
    if (auto it = held_.find(workspace_id); it != held_.end()) {
      it->second.used_at = now;
      return !it->second.releasing && Fresh(it->second, now);
    }
    if (auto it = others_.find(workspace_id); it != others_.end() && it->second > clock_.Now()) {
      return false;
    }
  }
  ASSIGN_OR_RETURN(std::optional<Store::Lease> lease,
                   store_.GetLease(LeaseName(kWorkspacePrefix, workspace_id)));
  std::lock_guard lock(mu_);
  if (lease && lease->holder != options_.identity && lease->expires_at > clock_.Now()) {
    others_[workspace_id] = lease->expires_at;
  } else if (!lease) {
    wanted_.insert(workspace_id);  // nobody holds it: the next round takes it
  }
  return false;
}

api::Status WorkspaceLeases::CheckMutation(const std::string& workspace_id) {
  int64_t token = 0;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(workspace_id);
    if (it == held_.end() || it->second.releasing || !Fresh(it->second, clock_.Steady())) {
      return api::AbortedError("sbxd " + options_.identity +
                               " does not hold the lease of workspace " + workspace_id +
                               " (another replica reconciles it)");
    }
    token = it->second.token;
  }
  ASSIGN_OR_RETURN(std::optional<Store::Lease> lease,
                   store_.GetLease(LeaseName(kWorkspacePrefix, workspace_id)));
  if (!lease || lease->holder != options_.identity || lease->token != token ||
      lease->expires_at <= clock_.Now()) {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(workspace_id); it != held_.end() && it->second.token == token) {
      held_.erase(it);  // lost: the next round may take it anew
    }
    return api::AbortedError(
        "sbxd " + options_.identity + " lost the lease of workspace " + workspace_id +
        " (fencing token " + std::to_string(token) + "; the lease is now " +
        (lease ? "held by " + lease->holder + " with token " + std::to_string(lease->token)
               : std::string("free")) +
        ")");
  }
  return api::OkStatus();
}

std::optional<FenceToken> WorkspaceLeases::Token(const std::string& workspace_id) const {
  std::lock_guard lock(mu_);
  auto it = held_.find(workspace_id);
  // Not fresh: a replica that was paused past its lease must not act before its next round.
  if (it == held_.end() || it->second.releasing || !Fresh(it->second, clock_.Steady())) {
    return std::nullopt;
  }
  return FenceToken{.token = it->second.token, .checked_at = clock_.Now()};
}

std::map<std::string, int64_t> WorkspaceLeases::Held() const {
  std::lock_guard lock(mu_);
  std::map<std::string, int64_t> held;
  for (const auto& [id, tenure] : held_) {
    if (!tenure.releasing) {
      held[id] = tenure.token;
    }
  }
  return held;
}

}  // namespace sbx::controller
