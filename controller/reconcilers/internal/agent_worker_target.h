// What AgentWorkerReconciler's two files share: the state of one pass and one test of a look's
// error. agent_worker_reconciler.cc converges the worker (sandbox, session, executor launch,
// deletion); agent_worker_connection.cc reads the executor's connection and reports it, or why
// there is none (missing directory or command, a dead executor, a lost session).
#pragma once

#include <string>
#include <variant>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/classify_error.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/reconcilers/agent_worker_reconciler.h"
#include "controller/reconcilers/reconcile_skeleton.h"

namespace sbx::controller {

struct AgentWorkerReconciler::Target : ReconcileTarget {
  Cache cache;
  bool woken = false;   // the service asked for this worker's executor (a webhook): look now
  ExecutorFacts facts;  // as the status recorded them when the sandbox was found Ready
  api::Object sandbox;
  // The sandbox sbx created for it (api::CreatedSandbox), set once it is found Ready: every call
  // into the sandbox goes there, never to what the Sandbox's spec says now (#24).
  api::SandboxIdentity created;
  databricks::SandboxApi* sandboxes = nullptr;
  openai::AgentsApi* agents = nullptr;

  const api::AgentWorkerSpec& spec() const { return object.agent_worker_spec(); }
  api::AgentWorkerStatus& status() { return object.agent_worker_status(); }
  const api::AgentWorkerStatus& before() const {
    return std::get<api::AgentWorkerStatus>(original_status);
  }
  const std::string& sandbox_id() const { return created.sandbox_id; }
  SessionOwner owner() const {
    return {key(), object.metadata.uid,
            WorkspaceId(object.metadata.namespace_, api::PlannedSandbox(sandbox).workspace_ref),
            /*worker=*/""};  // the worker's own standing session
  }
  ExecutorTarget executor() const {
    return {sandbox_id(), object.metadata.name, spec().workspace_directory,
            spec().executor.command};
  }
};

namespace reconcilers_internal {

// A routine look that was not sent (the pacing had no spare token) or was throttled (429): no
// answer about the executor, and nothing wrong with it either.
inline bool PacedOut(const api::Status& s) {
  return s.code() == api::StatusCode::kResourceExhausted && ClassifyError(s).transient();
}

}  // namespace reconcilers_internal
}  // namespace sbx::controller
