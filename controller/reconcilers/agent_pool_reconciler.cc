#include "controller/reconcilers/agent_pool_reconciler.h"

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/conditions.h"
#include "api/defaults.h"
#include "api/duration.h"
#include "api/fingerprint.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/pool_binding.h"
#include "controller/reconcilers/reconcile_skeleton.h"
#include "controller/reconcilers/task_attempts.h"
#include "controller/reconcilers/workspace_budget.h"
#include "controller/reconcilers/workspace_of.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusOr;
using std::chrono::milliseconds;
using WallTime = Clock::WallTime;

std::string RandomSuffix() {
  // As Kubernetes' generated names: no vowels (no words), no look-alike characters.
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937 random{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string out;
  for (int i = 0; i < 5; ++i) {
    out += kAlphabet[pick(random)];
  }
  return out;
}

const std::string& Annotation(const Object& o, std::string_view key) {
  static const std::string kNone;
  auto it = o.metadata.annotations.find(std::string(key));
  return it == o.metadata.annotations.end() ? kNone : it->second;
}

const api::Condition* ReadyOf(const Object& o) {
  return api::FindCondition(o.conditions(), condition::kReady);
}

// One replica, as this pass sees it.
struct Replica {
  const Object* object = nullptr;
  bool deleting = false;
  bool busy = false;      // a live task holds it
  bool retiring = false;  // claimed for deletion
  bool ready = false;
  bool sleeping = false;  // Ready, its OnDemand sandbox asleep
  bool updated = false;   // made from the current template
  WallTime idle_since{};  // its creation, or when it was last unbound (IdleSince)
  bool idle() const { return ready && !busy && !retiring && !deleting && !sleeping; }
  bool free() const { return !busy && !retiring && !deleting; }
};

}  // namespace

struct AgentPoolReconciler::Target : ReconcileTarget {
  const api::AgentPoolSpec& spec() const { return object.agent_pool_spec(); }
  api::AgentPoolStatus& status() { return object.agent_pool_status(); }
};

AgentPoolReconciler::AgentPoolReconciler(Store& store, Clock& clock, DependencyIndex* dependencies,
                                         AgentPoolReconcilerOptions options)
    : store_(store),
      clock_(clock),
      dependencies_(dependencies),
      events_(store, clock),
      options_(std::move(options)) {
  if (!options_.suffix) {
    options_.suffix = RandomSuffix;
  }
}

std::string AgentPoolReconciler::TemplateHash(const Object& pool) {
  const api::AgentPoolSpec& spec = pool.agent_pool_spec();
  Object shape = api::MakeObject(api::Kind::kAgentWorker, "template", pool.metadata.namespace_);
  shape.metadata.labels = spec.template_.metadata.labels;
  shape.agent_worker_spec() = spec.template_.spec;
  return api::Fingerprint(api::EncodeObjectJson(shape, /*pretty=*/false) + "\nsession=" +
                          (spec.session == api::SessionMode::kShared ? "Shared" : "PerTask"));
}

StatusOr<ReconcileResult> AgentPoolReconciler::Reconcile(const api::ObjectKey& key,
                                                         std::stop_token stop) {
  ReconcileSteps<Target> steps;
  steps.converge = [this](Target& t) { return Converge(t); };
  steps.finalize = [this](Target& t) { return Finalize(t); };
  steps.record_outcome = [this](Target& t, const Status& s) { RecordSynced(t.object, s, clock_); };
  steps.dependencies = dependencies_;
  return RunReconcile(store_, key, stop, steps);
}

Status AgentPoolReconciler::CreateReplica(Target& t, const std::string& hash) {
  const std::string& ns = t.object.metadata.namespace_;
  // A name nobody has: Apply would otherwise configure an existing worker of that name.
  std::string name;
  for (int attempt = 0;; ++attempt) {
    name = t.object.metadata.name + "-" + options_.suffix();
    StatusOr<Object> existing = store_.Get({api::Kind::kAgentWorker, ns, name});
    if (existing.status().code() == api::StatusCode::kNotFound) {
      break;
    }
    RETURN_IF_ERROR(existing.status());
    if (attempt == 9) {
      return api::AbortedError("no free replica name for pool " + t.object.metadata.name);
    }
  }
  Object replica = api::MakeObject(api::Kind::kAgentWorker, name, ns);
  replica.agent_worker_spec() = t.spec().template_.spec;
  replica.agent_worker_spec().session = t.spec().session;  // the pool's, not the template's
  replica.metadata.labels = t.spec().template_.metadata.labels;
  replica.metadata.labels[std::string(api::kPoolLabel)] = t.object.metadata.name;
  replica.metadata.annotations[std::string(api::kTemplateHashAnnotation)] = hash;
  api::ApplyDefaults(replica);  // the sandbox's id and display name are the replica's
  const api::OwnerReference owner{api::Kind::kAgentPool, t.object.metadata.name,
                                  t.object.metadata.uid, true};
  RETURN_IF_ERROR(reconcilers_internal::CreateOwned(store_, std::move(replica), owner).status());
  events_.Normal(t.key(), "ReplicaCreated", "created AgentWorker " + name);
  return api::OkStatus();
}

StatusOr<bool> AgentPoolReconciler::Retire(Target& t, const Object& replica,
                                           const std::string& why) {
  if (BindingOf(replica) != kRetiring) {
    Status claimed = Bind(store_, replica, std::string(kRetiring));
    if (claimed.code() == api::StatusCode::kAborted) {
      return false;  // written meanwhile (a task may have bound it): look again next pass
    }
    RETURN_IF_ERROR(claimed);
  }
  StatusOr<DeleteOutcome> deleted = store_.Delete(api::KeyOf(replica));
  if (!deleted.ok() && deleted.status().code() != api::StatusCode::kNotFound) {
    return deleted.status();
  }
  events_.Normal(t.key(), "ReplicaDeleted",
                 "deleting AgentWorker " + replica.metadata.name + ": " + why);
  return true;
}

// What one pass sees and decides.
struct AgentPoolReconciler::Pass {
  std::string hash;  // the current templateHash
  WallTime now{};
  std::vector<Object> replicas;
  std::vector<Object> tasks;  // the namespace's unfinished ones
  std::vector<Replica> seen;  // one per replica, pointing into `replicas`
  int queued = 0;             // the pool's live tasks no replica is bound to
  int busy = 0;
  int active = 0;  // replicas that stay: busy ones, and free ones of the current template
  int demand = 0;  // busy + queued + warm
  int want = 0;    // demand within [min, max]
  int created = 0;
  std::optional<WallTime> next_due;  // the next scale-down or progress deadline

  void Due(WallTime at) { next_due = next_due ? std::min(*next_due, at) : at; }
};

StatusOr<ReconcileResult> AgentPoolReconciler::Converge(Target& t) {
  Pass p;
  p.hash = TemplateHash(t.object);
  p.now = clock_.Now();
  RETURN_IF_ERROR(Observe(t, p));
  RETURN_IF_ERROR(Scale(t, p));
  Report(t, p);
  milliseconds wait = options_.recheck;
  if (p.next_due) {
    wait = std::clamp(std::chrono::ceil<milliseconds>(*p.next_due - p.now), milliseconds(1), wait);
  }
  return ReconcileResult::RequeueAfter(wait);
}

Status AgentPoolReconciler::Observe(Target& t, Pass& p) {
  ASSIGN_OR_RETURN(p.replicas, ListReplicas(store_, t.object));
  ListOptions same_ns;
  same_ns.kind = api::Kind::kAgentTask;
  same_ns.namespace_ = t.object.metadata.namespace_;
  // The live tasks alone: a pass costs what is running and queued, not every task the stream
  // ever ran. A replica's idle time is on the replica (IdleSince).
  same_ns.unfinished_only = true;
  ASSIGN_OR_RETURN(p.tasks, store_.List(same_ns));
  const LiveTasks live = LiveTasksOf(p.tasks);
  std::set<std::string> bound;  // task uids bound to a replica
  std::vector<api::ObjectKey> keys;
  for (const Object& r : p.replicas) {
    Replica x;
    x.object = &r;
    x.deleting = !r.metadata.deletion_timestamp.empty();
    const std::string binding = BindingOf(r);
    x.busy = live.contains(binding);
    x.retiring = binding == kRetiring;
    const api::Condition* ready = ReadyOf(r);
    x.ready = !x.deleting && ready != nullptr && ready->status == ConditionStatus::kTrue;
    x.sleeping = x.ready && ready->reason == reason::kSleeping && !x.busy;
    x.updated = Annotation(r, api::kTemplateHashAnnotation) == p.hash;
    x.idle_since = IdleSince(r, p.now);
    if (x.busy) {
      bound.insert(binding);
    } else if (!binding.empty() && !x.retiring && !x.deleting) {
      // A finished or deleted task's: the replica is free again, idle from now on (its
      // annotation still tells an earlier idle time).
      RETURN_IF_ERROR(Unbind(store_, api::KeyOf(r), binding, p.now));
      x.idle_since = p.now;
    }
    if (x.retiring && !x.deleting) {
      // Claimed by an earlier pass that did not get to the delete.
      ASSIGN_OR_RETURN(x.deleting, Retire(t, r, "claimed for deletion earlier"));
    }
    keys.push_back(api::KeyOf(r));
    p.seen.push_back(x);
  }
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(t.key(), keys);
  }
  // While the Workspace's budget is used up (DESIGN §8.2) its queued tasks are held, and no
  // demand: no replica is made for them (the tasks' HoldForBudget reads the same ledger). With
  // limits.maxConcurrentTasks, no more of them than could hold a slot beside the busy ones.
  ASSIGN_OR_RETURN(const WorkspaceHolds holds, HeldByWorkspace(t, p.now));
  for (const auto& [uid, task] : live) {
    // A task waiting out a retry delay is not demand yet (its wake-up enqueues the pool).
    if (task->agent_task_spec().pool_ref == t.object.metadata.name && !bound.contains(uid) &&
        !AwaitingRetry(*task, p.now) && !holds.budget_reached) {
      ++p.queued;
    }
  }
  if (holds.max_concurrent_tasks > 0) {
    p.queued = std::min(p.queued,
                        std::max(0, holds.max_concurrent_tasks - static_cast<int>(bound.size())));
  }
  return api::OkStatus();
}

StatusOr<AgentPoolReconciler::WorkspaceHolds> AgentPoolReconciler::HeldByWorkspace(
    Target& t, Clock::WallTime now) {
  ASSIGN_OR_RETURN(const std::optional<std::string> workspace_id, WorkspaceOf(store_, t.key()));
  if (!workspace_id) {
    return WorkspaceHolds{};
  }
  ASSIGN_OR_RETURN(const std::optional<Object> workspace, FindWorkspace(store_, *workspace_id));
  if (!workspace) {
    return WorkspaceHolds{};
  }
  const api::WorkspaceSpec& spec = workspace->workspace_spec();
  WorkspaceHolds holds;
  holds.max_concurrent_tasks = spec.limits.max_concurrent_tasks;
  if (!spec.budget && holds.max_concurrent_tasks <= 0) {
    return holds;
  }
  if (dependencies_ != nullptr) {
    dependencies_->Track(t.key(), api::KeyOf(*workspace));  // a raise scales it at once
  }
  if (spec.budget) {
    ASSIGN_OR_RETURN(const std::optional<std::string> reached, BudgetHold(store_, *workspace, now));
    holds.budget_reached = reached.has_value();
  }
  return holds;
}

Status AgentPoolReconciler::Scale(Target& t, Pass& p) {
  const api::AgentPoolSpec& spec = t.spec();
  // Rollout: a replica of an older template goes as soon as it holds no task.
  for (Replica& x : p.seen) {
    if (!x.updated && x.free()) {
      ASSIGN_OR_RETURN(x.deleting, Retire(t, *x.object, "made from an older template"));
    }
  }
  for (const Replica& x : p.seen) {
    p.busy += x.busy ? 1 : 0;
    p.active += !x.deleting && !x.retiring && (x.busy || x.updated) ? 1 : 0;
  }
  p.demand = p.busy + p.queued + spec.warm;
  p.want = std::clamp(std::max(spec.replicas.min, p.demand), 0, spec.replicas.max);
  for (; p.active + p.created < p.want; ++p.created) {
    RETURN_IF_ERROR(CreateReplica(t, p.hash));
  }
  // Scale down: free replicas above the demand, idle for scaleDownAfter, the longest idle first.
  std::vector<Replica*> candidates;
  for (Replica& x : p.seen) {
    if (x.updated && x.free()) {
      candidates.push_back(&x);
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Replica* a, const Replica* b) { return a->idle_since < b->idle_since; });
  int excess = p.active - p.want;
  for (Replica* x : candidates) {
    if (excess <= 0) {
      break;
    }
    const WallTime due = x->idle_since + spec.scale_down_after;
    if (due > p.now) {
      p.Due(due);
      continue;
    }
    ASSIGN_OR_RETURN(
        bool retired,
        Retire(t, *x->object, "idle for " + api::FormatDuration(spec.scale_down_after)));
    if (retired) {
      x->deleting = true;
      --excess;
    }
  }
  return api::OkStatus();
}

void AgentPoolReconciler::Report(Target& t, Pass& p) {
  const api::AgentPoolSpec& spec = t.spec();
  api::AgentPoolStatus& st = t.status();
  {
    api::AgentPoolStatus fresh;
    fresh.observed_generation = st.observed_generation;
    fresh.conditions = std::move(st.conditions);
    st = std::move(fresh);
  }
  bool stuck = false;
  bool outdated = false;
  for (const Replica& x : p.seen) {
    if (x.deleting) {
      continue;
    }
    ++st.replicas;
    st.ready += x.ready ? 1 : 0;
    st.busy += x.busy ? 1 : 0;
    st.idle += x.idle() ? 1 : 0;
    st.sleeping += x.sleeping && !x.retiring ? 1 : 0;
    st.updated_replicas += x.updated ? 1 : 0;
    outdated = outdated || !x.updated;
    if (x.updated && !x.ready) {
      const WallTime created = ParseRfc3339(x.object->metadata.creation_timestamp).value_or(p.now);
      stuck = stuck || p.now - created >= spec.progress_deadline;
      if (p.now - created < spec.progress_deadline) {
        p.Due(created + spec.progress_deadline);
      }
    }
  }
  st.replicas += p.created;
  st.updated_replicas += p.created;
  st.queued = p.queued;
  st.template_hash = p.hash;
  const auto set = [&](std::string_view type, ConditionStatus status, std::string_view why,
                       std::string message) {
    reconcilers_internal::SetCondition(t.object, type, status, why, std::move(message), clock_);
  };
  const std::string counts = std::to_string(st.ready) + " of " + std::to_string(st.replicas) +
                             " replicas Ready, " + std::to_string(st.busy) + " busy, " +
                             std::to_string(p.queued) + " task(s) queued";
  if (st.ready > 0) {
    set(condition::kReady, ConditionStatus::kTrue, reason::kReady, counts);
  } else if (p.want == 0) {
    set(condition::kReady, ConditionStatus::kTrue, reason::kScaledToZero,
        "no replica is needed: nothing is queued");
  } else {
    set(condition::kReady, ConditionStatus::kFalse,
        st.replicas > 0 ? reason::kScalingUp : reason::kNoReplicas, counts);
  }
  if (stuck) {
    set(condition::kProgressing, ConditionStatus::kFalse, reason::kRolloutStuck,
        "a replica of the current template is not Ready after " +
            api::FormatDuration(spec.progress_deadline) + " (spec.progressDeadline)");
  } else if (outdated) {
    set(condition::kProgressing, ConditionStatus::kTrue, reason::kRollingOut,
        std::to_string(st.updated_replicas) + " of " + std::to_string(st.replicas) +
            " replicas made from the current template");
  } else {
    set(condition::kProgressing, ConditionStatus::kTrue, reason::kRolloutComplete, "");
  }
  if (p.demand > spec.replicas.max && p.queued > 0) {
    set(condition::kScalingLimited, ConditionStatus::kTrue, reason::kAtMaxReplicas,
        std::to_string(p.queued) + " task(s) queued at spec.replicas.max (" +
            std::to_string(spec.replicas.max) + ")");
  } else {
    set(condition::kScalingLimited, ConditionStatus::kFalse, reason::kWithinLimits, "");
  }
}

StatusOr<std::optional<ReconcileResult>> AgentPoolReconciler::Finalize(Target& t) {
  ASSIGN_OR_RETURN(std::vector<Object> replicas, ListReplicas(store_, t.object));
  if (replicas.empty()) {
    return std::optional<ReconcileResult>();
  }
  std::vector<api::ObjectKey> keys;
  for (const Object& r : replicas) {
    keys.push_back(api::KeyOf(r));
    if (r.metadata.deletion_timestamp.empty()) {
      StatusOr<DeleteOutcome> deleted = store_.Delete(api::KeyOf(r));
      if (!deleted.ok() && deleted.status().code() != api::StatusCode::kNotFound) {
        return deleted.status();
      }
    }
  }
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(t.key(), keys);  // each replica gone reconciles the pool
  }
  t.status().replicas = static_cast<int32_t>(replicas.size());
  reconcilers_internal::SetCondition(
      t.object, condition::kReady, ConditionStatus::kFalse, reason::kDeletingReplicas,
      "deleting " + std::to_string(replicas.size()) + " replica(s)", clock_);
  return std::optional<ReconcileResult>(ReconcileResult::RequeueAfter(std::chrono::seconds(5)));
}

}  // namespace sbx::controller
