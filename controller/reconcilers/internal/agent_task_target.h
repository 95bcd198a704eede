// What AgentTaskReconciler's two files share: the state of one pass (Target) and one test both
// make of the worker. agent_task_admission.cc takes a task from Pending to runnable (budget,
// concurrency slot, pool binding, worker pick, its place on the worker); agent_task_reconciler.cc
// submits it, follows its turn and finishes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "api/resources.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/reconcilers/agent_task_reconciler.h"
#include "controller/reconcilers/reconcile_skeleton.h"

namespace sbx::controller {

struct AgentTaskReconciler::Target : ReconcileTarget {
  api::Object worker;
  api::Object sandbox;
  std::optional<api::Object> workspace;  // its Workspace, once HoldForBudget found it
  openai::AgentsApi* agents = nullptr;

  const api::AgentTaskSpec& spec() const { return object.agent_task_spec(); }
  api::AgentTaskStatus& status() { return object.agent_task_status(); }
  const std::string& session() { return status().session_id; }
};

namespace reconcilers_internal {

// The worker's executor is known to be gone (killed, its sandbox stopped): ExecutorConnected or
// ExecutorRunning is False.
inline bool ExecutorLost(const api::Object& worker) {
  const std::vector<api::Condition>& c = worker.conditions();
  return api::ConditionStatusOf(c, api::condition::kExecutorConnected) ==
             api::ConditionStatus::kFalse ||
         api::ConditionStatusOf(c, api::condition::kExecutorRunning) ==
             api::ConditionStatus::kFalse;
}

}  // namespace reconcilers_internal
}  // namespace sbx::controller
