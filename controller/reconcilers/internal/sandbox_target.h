// What SandboxReconciler's two files share: the state of one pass. sandbox_reconciler.cc observes,
// creates, starts, stops and deletes the sandbox; sandbox_setup.cc runs spec.setup in it after
// every boot.
#pragma once

#include <string>
#include <variant>

#include "api/resources.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/reconcilers/reconcile_skeleton.h"
#include "controller/reconcilers/sandbox_reconciler.h"

namespace sbx::controller {

// Everything one reconcile works on. `object` is the store's copy with the status being built.
struct SandboxReconciler::Target : ReconcileTarget {
  databricks::SandboxApi* api = nullptr;
  // The sandbox this object stands for: the one it created (status), else the one its spec asks.
  std::string workspace_ref;
  std::string workspace;  // WorkspaceId(namespace, workspace_ref)
  std::string sandbox_id;
  // The workspace's LIST sweeps fail: the state is as last observed, so no checkpoint of its
  // RUNNING time is written for it alone (a long outage writes each status once).
  bool stale = false;
  std::string live_update_time;  // the observed sandbox's update_time

  const api::SandboxSpec& spec() const { return object.sandbox_spec(); }
  api::SandboxStatus& status() { return object.sandbox_status(); }
  // The status as the reconcile found it.
  const api::SandboxStatus& before() const { return std::get<api::SandboxStatus>(original_status); }
};

}  // namespace sbx::controller
