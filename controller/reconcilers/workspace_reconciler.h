// WorkspaceReconciler: tells whether a Workspace's credentials work, and keeps a Workspace that is
// still in use from disappearing under the objects that need its credentials (DESIGN §2
// Workspace; issue #12 item 10).
//
// Readiness is information only: it gates nothing (Sandboxes and AgentWorkers report their own
// errors). At once after a change of spec or annotations (and after a restart), then every
// `check_interval` — not on every reconcile: an AgentTask's end reconciles its Workspace for the
// usage below, and that costs no cloud call — each section the Workspace sets is checked with its
// cheapest authenticated call:
//   spec.databricks → one LIST page of size 1             → condition DatabricksReady,
//   spec.openai     → GET /agents/sessions?limit=1        → condition OpenAIReady.
// A section left unset (every field empty: its objects use the controller's own credentials) is
// not checked and has no condition. `Ready` is derived from the two: False with the reason of the
// first side that is False, else Unknown if a side is Unknown, else True. A side's reason:
//   CredentialsMissing / SecretNotAllowed (credentials cannot be resolved: nothing was sent),
//   Unauthenticated (401), PermissionDenied (403), InvalidSpec, Unreachable (connection refused,
//   503, timeout) → status False;
//   any other transient answer (429, 500, …) → status Unknown with ClassifyError's reason: an
//   error while observing is not evidence either way. Such a side is looked at again after
//   `retry_interval` instead of `check_interval`.
//
// Usage and budget (DESIGN §8.2, workspace_budget.h), on every reconcile: status.usage is the
// current period's sum of the usage ledger (tokens, finished tasks, cost at spec.pricing); with
// spec.budget, the condition BudgetExceeded is True (reason BudgetExceeded, naming the limit) while
// a limit is reached — with a Warning event BudgetExceeded when it turns True — and False (reason
// WithinBudget) otherwise; without a budget there is no such condition. The Workspace is looked
// at again when the period rolls over, at the latest.
//
// Deletion: the finalizer kWorkspaceInUseFinalizer holds a Workspace that is being deleted while
// any object in its namespace still uses it — a Sandbox with workspaceRef = it (the ones
// AgentWorkers own included), or an AgentWorker whose inline sandbox template names it — since
// their finalizers need its credentials to delete what sbx created. The Workspace's `Deleting`
// condition names them. While it waits, the Workspace declares them as its dependencies in the
// DependencyIndex, so that a change to any of them (their deletion above all) reconciles it again
// at once; it also looks again every `in_use_recheck` for users that appeared meanwhile. When none
// is left, the finalizer goes and the store removes the Workspace.
//
// Thread-safety: Reconcile may run on several workers at once for different keys. Collaborators
// must outlive the reconciler; `dependencies` may be null (no dependency tracking, e.g. --once).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/store/store.h"

namespace sbx::controller {

// Held on a Workspace by its reconciler; removed once no object uses the Workspace.
inline constexpr std::string_view kWorkspaceInUseFinalizer = "sbx.dev/workspace-in-use";

struct WorkspaceReconcilerOptions {
  // A Workspace whose checks gave an answer (either way) is checked again after this long.
  std::chrono::milliseconds check_interval{std::chrono::minutes(5)};
  // A side that could not be observed (Unreachable, or status Unknown) is checked again sooner.
  std::chrono::milliseconds retry_interval{std::chrono::seconds(30)};
  // While being deleted and still in use: look for users again after this long at the latest
  // (the DependencyIndex usually brings the Workspace back sooner).
  std::chrono::milliseconds in_use_recheck{std::chrono::seconds(30)};
};

class WorkspaceReconciler final : public Reconciler {
 public:
  WorkspaceReconciler(Store& store, CloudClients& clouds, Clock& clock,
                      DependencyIndex* dependencies, WorkspaceReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kWorkspace; }
  // Errors: the store's (kUnavailable, kAborted on a lost compare-and-swap), retried by the
  // Manager. A failed check is not an error: it is the Workspace's status.
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

 private:
  // Check, unless the last check of this spec and these annotations is not due yet; returns
  // when to check again.
  std::chrono::milliseconds CheckWhenDue(api::Object& workspace, std::stop_token stop);
  // Sets DatabricksReady / OpenAIReady and Ready; returns when to look again.
  std::chrono::milliseconds Check(api::Object& workspace, std::stop_token stop);
  // status.usage and BudgetExceeded; returns the end of the period.
  api::StatusOr<Clock::WallTime> ReportUsage(api::Object& workspace, Clock::WallTime now);
  // nullopt once no object uses the workspace any more.
  api::StatusOr<std::optional<ReconcileResult>> Finalize(api::Object& workspace);
  // The objects in the Workspace's namespace that use it, sorted.
  api::StatusOr<std::vector<api::ObjectKey>> Users(const api::Object& workspace);

  Store& store_;
  CloudClients& clouds_;
  Clock& clock_;
  DependencyIndex* dependencies_;
  const WorkspaceReconcilerOptions options_;
  EventRecorder events_;

  // The last credentials check of each Workspace (by uid): what it checked and when the next is
  // due. In memory: a restarted sbxd checks every Workspace once.
  struct LastCheck {
    int64_t generation = 0;
    std::map<std::string, std::string> annotations;
    Clock::WallTime due;
  };
  std::mutex mu_;
  std::map<std::string, LastCheck> checks_;
};

}  // namespace sbx::controller
