#include "controller/reconcilers/pool_binding.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "api/conditions.h"
#include "api/rfc3339.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/task_attempts.h"

namespace sbx::controller {

api::StatusOr<std::vector<api::Object>> ListReplicas(Store& store, const api::Object& pool) {
  ListOptions options;
  options.kind = api::Kind::kAgentWorker;
  options.namespace_ = pool.metadata.namespace_;
  options.label_selector = {{std::string(api::kPoolLabel), pool.metadata.name}};
  ASSIGN_OR_RETURN(std::vector<api::Object> replicas, store.List(options));
  std::erase_if(replicas, [&](const api::Object& w) {
    return !reconcilers_internal::OwnedBy(w, pool.metadata.uid);
  });
  return replicas;  // List sorts by name
}

std::string BindingOf(const api::Object& replica) {
  auto it = replica.metadata.annotations.find(std::string(api::kBoundTaskAnnotation));
  return it == replica.metadata.annotations.end() ? "" : it->second;
}

LiveTasks LiveTasksOf(const std::vector<api::Object>& tasks) {
  LiveTasks live;
  for (const api::Object& t : tasks) {
    if (!api::IsFinished(t.agent_task_status().phase)) {
      live[t.metadata.uid] = &t;
    }
  }
  return live;
}

bool Held(const api::Object& replica, const LiveTasks& live) {
  const std::string binding = BindingOf(replica);
  return binding == kRetiring || live.contains(binding);
}

bool CreatedBefore(const api::Object& a, const api::Object& b) {
  return std::tie(a.metadata.creation_timestamp, a.metadata.name) <
         std::tie(b.metadata.creation_timestamp, b.metadata.name);
}

PoolPick PickReplica(const api::Object& task, const std::vector<api::Object>& replicas,
                     const std::vector<api::Object>& tasks, Clock::WallTime now) {
  PoolPick pick;
  const std::string& uid = task.metadata.uid;
  const LiveTasks live = LiveTasksOf(tasks);
  std::set<std::string> bound;
  for (const api::Object& r : replicas) {
    const std::string binding = BindingOf(r);
    if (binding == uid) {
      pick.bound = r.metadata.name;
      return pick;
    }
    bound.insert(binding);
  }
  for (const api::Object& o : tasks) {
    if (o.agent_task_spec().pool_ref == task.agent_task_spec().pool_ref && o.metadata.uid != uid &&
        !bound.contains(o.metadata.uid) && !AwaitingRetry(o, now) &&
        std::tie(o.metadata.creation_timestamp, o.metadata.name) <
            std::tie(task.metadata.creation_timestamp, task.metadata.name)) {
      ++pick.ahead;
    }
  }
  for (const api::Object& r : replicas) {
    const api::Condition* ready = api::FindCondition(r.conditions(), api::condition::kReady);
    if (r.metadata.deletion_timestamp.empty() && !Held(r, live) && ready != nullptr &&
        ready->status == api::ConditionStatus::kTrue) {
      pick.free.push_back(r);
    }
  }
  // A sleeping replica is woken by its task: an awake one first.
  std::stable_partition(pick.free.begin(), pick.free.end(), [](const api::Object& r) {
    return api::FindCondition(r.conditions(), api::condition::kReady)->reason !=
           api::reason::kSleeping;
  });
  return pick;
}

namespace {

// Writes `replica` (as read) with the binding set to `value`, or removed when empty (then idle
// since `idle_since`).
api::Status WriteBinding(Store& store, api::Object replica, const std::string& value,
                         const std::string& idle_since = "") {
  if (value.empty()) {
    replica.metadata.annotations.erase(std::string(api::kBoundTaskAnnotation));
    replica.metadata.annotations[std::string(api::kIdleSinceAnnotation)] = idle_since;
  } else {
    replica.metadata.annotations[std::string(api::kBoundTaskAnnotation)] = value;
  }
  ApplyOptions cas;
  cas.require_resource_version = true;
  return store.Apply({replica}, cas).status();
}

}  // namespace

api::Status Bind(Store& store, const api::Object& replica, const std::string& value) {
  return WriteBinding(store, replica, value);
}

api::Status Unbind(Store& store, const api::ObjectKey& key, const std::string& value,
                   Clock::WallTime now) {
  const std::string idle_since = api::FormatRfc3339(now);
  for (int attempt = 0;; ++attempt) {
    api::StatusOr<api::Object> replica = store.Get(key);
    if (replica.status().code() == api::StatusCode::kNotFound) {
      return api::OkStatus();
    }
    RETURN_IF_ERROR(replica.status());
    if (BindingOf(*replica) != value || !replica->metadata.deletion_timestamp.empty()) {
      return api::OkStatus();
    }
    api::Status written = WriteBinding(store, *std::move(replica), "", idle_since);
    if (written.code() != api::StatusCode::kAborted || attempt == 4) {
      return written.code() == api::StatusCode::kNotFound ? api::OkStatus() : written;
    }
  }
}

Clock::WallTime IdleSince(const api::Object& replica, Clock::WallTime now) {
  std::optional<Clock::WallTime> since = api::ParseRfc3339(replica.metadata.creation_timestamp);
  auto it = replica.metadata.annotations.find(std::string(api::kIdleSinceAnnotation));
  if (it != replica.metadata.annotations.end()) {
    if (std::optional<Clock::WallTime> unbound = api::ParseRfc3339(it->second)) {
      since = since ? std::max(*since, *unbound) : *unbound;
    }
  }
  return since.value_or(now);
}

}  // namespace sbx::controller
