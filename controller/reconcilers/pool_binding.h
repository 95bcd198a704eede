// Which replica of an AgentPool runs which task (DESIGN §8.1). Shared by the AgentPool
// reconciler (it scales by the bindings) and the AgentTask reconciler (it binds).
//
// A binding is the annotation sbx.dev/bound-task=<task uid> on the replica (an AgentWorker),
// written by Store::Apply with require_resource_version: one transaction that fails (kAborted)
// when anybody wrote the replica since it was read. Two tasks — in one sbxd or in two sbxd
// replicas sharing a PostgreSQL store — therefore never hold the same replica: the second write
// loses and its task looks again. The pool claims a replica it is about to delete the same way
// (the value kRetiring), so no task binds a replica on its way out.
//
// A binding is live while its task exists and has not finished; after that it is stale and the
// replica is idle again, whether or not anybody removed the annotation yet (a task removes it
// after its final status is stored; a crash in between leaves a stale one, which the pool
// clears). A task that finds a replica bound to its own uid (after a crash) adopts it.
//
// Stateless functions; thread-safe as the Store is.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

// The binding of a replica the pool is deleting.
inline constexpr std::string_view kRetiring = "retiring";

// The pool's replicas: AgentWorkers of its namespace labelled sbx.dev/pool=<pool> that it owns
// (by uid), sorted by name.
api::StatusOr<std::vector<api::Object>> ListReplicas(Store& store, const api::Object& pool);

// The value of the replica's binding annotation ("" when unbound).
std::string BindingOf(const api::Object& replica);

// The unfinished tasks of a namespace by uid: what makes a binding live.
using LiveTasks = std::map<std::string, const api::Object*>;
LiveTasks LiveTasksOf(const std::vector<api::Object>& tasks);

// Whether the replica is held: by a live task, or retiring.
bool Held(const api::Object& replica, const LiveTasks& live);

// The order tasks are served in: creation, then name (same-second creations).
bool CreatedBefore(const api::Object& a, const api::Object& b);

// Where a pool task stands, as PickReplica sees it.
struct PoolPick {
  std::string bound;  // the replica already bound to the task (adopted after a crash)
  // The pool's unbound tasks created before it (first come first served), but for those waiting
  // out a retry delay (task_attempts.h).
  int ahead = 0;
  std::vector<api::Object> free;  // free Ready replicas, awake ones first
  // The one this task should try to bind: free[ahead], when there are enough free ones.
  const api::Object* Candidate() const {
    return ahead < static_cast<int>(free.size()) ? &free[static_cast<size_t>(ahead)] : nullptr;
  }
};

// The replica a pool task holds, or its place in the queue and the replica to try: the tasks
// ahead take the free replicas before it, so concurrent binders mostly ask for different ones.
// `replicas`: ListReplicas of its pool; `tasks`: the namespace's unfinished tasks.
PoolPick PickReplica(const api::Object& task, const std::vector<api::Object>& replicas,
                     const std::vector<api::Object>& tasks, Clock::WallTime now);

// Sets the binding to `value` on `replica` as it was read: kAborted if it changed since (another
// binding won), kFailedPrecondition if it is being deleted, kNotFound if gone.
api::Status Bind(Store& store, const api::Object& replica, const std::string& value);

// Removes the binding if it is still `value` (reads the replica again; retried over concurrent
// writes), and stamps the replica idle since `now` (api::kIdleSinceAnnotation) in the same
// write. A replica gone, or bound to something else by now, is fine.
api::Status Unbind(Store& store, const api::ObjectKey& replica, const std::string& value,
                   Clock::WallTime now);

// When the replica last became idle: its last unbinding (api::kIdleSinceAnnotation), else its
// creation; `now` if neither parses.
Clock::WallTime IdleSince(const api::Object& replica, Clock::WallTime now);

}  // namespace sbx::controller
