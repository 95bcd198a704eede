// WorkspaceOf: which workspace an object belongs to, for replicas that split the work by
// workspace (DESIGN §7.4, controller/engine/workspace_leases.h). The answer is a WorkspaceId,
// "<namespace>/<workspaceRef>", read from the store top down:
//   Workspace    itself;
//   Sandbox      spec.workspaceRef;
//   AgentWorker  its inline sandbox's workspaceRef, else its sandboxRef's Sandbox's;
//   AgentTask    its worker's (spec.workerRef, else status.worker once a selector or its pool
//                picked one); a pool task not bound yet: its pool's;
//   AgentPool    its template's sandbox's workspaceRef.
// nullopt when it belongs to none: a GitSource, a Notifier, an object whose reference does not
// exist yet, a task no worker was picked for, an object already gone. sbxd gives those to the
// holder of the global "sbxd" lease (none of them calls a cloud until it belongs to a workspace).
#pragma once

#include <optional>
#include <string>

#include "api/resources.h"
#include "api/status.h"
#include "controller/store/store.h"

namespace sbx::controller {

api::StatusOr<std::optional<std::string>> WorkspaceOf(Store& store, const api::ObjectKey& key);

}  // namespace sbx::controller
