#include "controller/reconcilers/workspace_of.h"

#include "controller/cloud/cloud_clients.h"

namespace sbx::controller {

namespace {

using Answer = api::StatusOr<std::optional<std::string>>;

// The object, nullopt when it is not there.
api::StatusOr<std::optional<api::Object>> Find(Store& store, const api::ObjectKey& key) {
  api::StatusOr<api::Object> object = store.Get(key);
  if (object.status().code() == api::StatusCode::kNotFound) {
    return std::optional<api::Object>();
  }
  ASSIGN_OR_RETURN(api::Object found, std::move(object));
  return std::optional<api::Object>(std::move(found));
}

Answer OfSandbox(Store& store, const std::string& namespace_, const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<api::Object> sandbox,
                   Find(store, api::ObjectKey{api::Kind::kSandbox, namespace_, name}));
  if (!sandbox) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(
      WorkspaceId(namespace_, api::PlannedSandbox(*sandbox).workspace_ref));
}

Answer OfWorker(Store& store, const std::string& namespace_, const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<api::Object> worker,
                   Find(store, api::ObjectKey{api::Kind::kAgentWorker, namespace_, name}));
  if (!worker) {
    return std::optional<std::string>();
  }
  const api::AgentWorkerSpec& spec = worker->agent_worker_spec();
  if (spec.sandbox) {
    return std::optional<std::string>(WorkspaceId(namespace_, spec.sandbox->workspace_ref));
  }
  return OfSandbox(store, namespace_, spec.sandbox_ref);
}

// A pool's replicas all use its template's workspace.
Answer OfPool(Store& store, const std::string& namespace_, const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<api::Object> pool,
                   Find(store, {api::Kind::kAgentPool, namespace_, name}));
  if (!pool) {
    return std::optional<std::string>();
  }
  const api::AgentWorkerSpec& spec = pool->agent_pool_spec().template_.spec;
  const std::string workspace =
      spec.sandbox ? spec.sandbox->workspace_ref : std::string(api::kDefaultWorkspaceRef);
  return std::optional<std::string>(WorkspaceId(namespace_, workspace));
}

}  // namespace

Answer WorkspaceOf(Store& store, const api::ObjectKey& key) {
  switch (key.kind) {
    case api::Kind::kWorkspace:
      return std::optional<std::string>(WorkspaceId(key.namespace_, key.name));
    case api::Kind::kSandbox:
      return OfSandbox(store, key.namespace_, key.name);
    case api::Kind::kAgentWorker:
      return OfWorker(store, key.namespace_, key.name);
    case api::Kind::kAgentTask: {
      ASSIGN_OR_RETURN(std::optional<api::Object> task, Find(store, key));
      if (!task) {
        return std::optional<std::string>();
      }
      std::string worker = task->agent_task_spec().worker_ref;
      if (worker.empty()) {
        worker = task->agent_task_status().worker;
      }
      if (worker.empty() && !task->agent_task_spec().pool_ref.empty()) {
        // Not bound yet: the pool's, whose replicas it will run on.
        return OfPool(store, key.namespace_, task->agent_task_spec().pool_ref);
      }
      if (worker.empty()) {
        return std::optional<std::string>();
      }
      return OfWorker(store, key.namespace_, worker);
    }
    case api::Kind::kGitSource:
    case api::Kind::kNotifier:
      return std::optional<std::string>();
    case api::Kind::kAgentPool:
      return OfPool(store, key.namespace_, key.name);
  }
  return std::optional<std::string>();
}

}  // namespace sbx::controller
