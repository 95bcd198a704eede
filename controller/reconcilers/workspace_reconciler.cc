#include "controller/reconcilers/workspace_reconciler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "api/conditions.h"
#include "controller/base/classify_error.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/reconcile_skeleton.h"
#include "controller/reconcilers/workspace_budget.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusCode;
using api::StatusOr;

namespace condition = api::condition;
namespace reason = api::reason;
using condition::kDatabricksReady;
using condition::kOpenAiReady;
// How many users the Deleting condition names before "and N more".
constexpr size_t kUsersNamed = 5;

bool DatabricksSet(const api::DatabricksConnection& d) {
  return !d.host.empty() || !d.profile.empty() || !d.workspace_id.empty() ||
         !d.token_from.empty() || !d.client_id_from.empty() || !d.client_secret_from.empty();
}

bool OpenAiSet(const api::OpenAiConnection& o) {
  return !o.base_url.empty() || !o.api_key_from.empty();
}

// What one side's check found.
struct Side {
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;
  std::string message;
  bool retry_soon = false;  // not observed for sure: look again after retry_interval
};

// `resolving`: the error came from resolving the credentials, before any request.
Side FromError(const Status& error, bool resolving) {
  const ErrorClass error_class = ClassifyError(error);
  Side side{ConditionStatus::kFalse, error_class.reason, ConditionMessage(error), false};
  if (resolving && error.code() == StatusCode::kFailedPrecondition && error.reason().empty()) {
    side.reason = reason::kCredentialsMissing;  // a secret that is not there (file, variable)
  } else if (error.reason().empty() && (error.code() == StatusCode::kUnavailable ||
                                        error.code() == StatusCode::kDeadlineExceeded)) {
    side.reason = reason::kUnreachable;
    side.retry_soon = true;
  } else if (error_class.transient()) {
    side.status = ConditionStatus::kUnknown;  // 429, 500, …: not evidence either way
    side.retry_soon = true;
  }
  return side;
}

std::string KeyName(const api::ObjectKey& key) {
  return std::string(api::KindName(key.kind)) + " " + key.name;
}

}  // namespace

WorkspaceReconciler::WorkspaceReconciler(Store& store, CloudClients& clouds, Clock& clock,
                                         DependencyIndex* dependencies,
                                         WorkspaceReconcilerOptions options)
    : store_(store),
      clouds_(clouds),
      clock_(clock),
      dependencies_(dependencies),
      options_(options),
      events_(store, clock) {}

StatusOr<ReconcileResult> WorkspaceReconciler::Reconcile(const api::ObjectKey& key,
                                                         std::stop_token stop) {
  ReconcileSteps<ReconcileTarget> steps;
  steps.finalizer = kWorkspaceInUseFinalizer;
  steps.converge = [this](ReconcileTarget& t) -> StatusOr<ReconcileResult> {
    const Clock::WallTime now = clock_.Now();
    const std::chrono::milliseconds check = CheckWhenDue(t.object, t.stop);
    StatusOr<Clock::WallTime> period_end = ReportUsage(t.object, now);
    if (!period_end.ok()) {
      std::lock_guard lock(mu_);
      checks_.erase(t.object.metadata.uid);  // nothing is stored: check again on the retry
      return period_end.status();
    }
    return ReconcileResult::RequeueAfter(
        std::min(check, std::chrono::ceil<std::chrono::milliseconds>(*period_end - now)));
  };
  steps.finalize = [this](ReconcileTarget& t) { return Finalize(t.object); };
  steps.dependencies = dependencies_;
  return RunReconcile(store_, key, stop, steps);
}

std::chrono::milliseconds WorkspaceReconciler::CheckWhenDue(Object& workspace,
                                                            std::stop_token stop) {
  const Clock::WallTime now = clock_.Now();
  {
    std::lock_guard lock(mu_);
    auto it = checks_.find(workspace.metadata.uid);
    if (it != checks_.end() && it->second.generation == workspace.metadata.generation &&
        it->second.annotations == workspace.metadata.annotations && now < it->second.due) {
      return std::chrono::ceil<std::chrono::milliseconds>(it->second.due - now);
    }
  }
  const std::chrono::milliseconds next = Check(workspace, stop);
  std::lock_guard lock(mu_);
  checks_[workspace.metadata.uid] = {workspace.metadata.generation, workspace.metadata.annotations,
                                     now + next};
  return next;
}

StatusOr<Clock::WallTime> WorkspaceReconciler::ReportUsage(Object& workspace, Clock::WallTime now) {
  ASSIGN_OR_RETURN(const PeriodUsage usage, UsageOfPeriod(store_, workspace, now));
  const api::WorkspaceSpec& spec = workspace.workspace_spec();
  workspace.workspace_status().usage = UsageStatus(spec, usage);
  std::vector<api::Condition>& conditions = workspace.conditions();
  if (!spec.budget) {
    std::erase_if(conditions,
                  [](const api::Condition& c) { return c.type == condition::kBudgetExceeded; });
    return usage.period.end;
  }
  const bool was_exceeded =
      api::ConditionStatusOf(conditions, condition::kBudgetExceeded) == ConditionStatus::kTrue;
  const std::optional<std::string> reached =
      api::BudgetReached(*spec.budget, spec.pricing, usage.used, usage.period);
  if (reached) {
    const std::string message = *reached +
                                "; new tasks wait until the period rolls over or "
                                "the budget is raised";
    reconcilers_internal::SetCondition(workspace, condition::kBudgetExceeded,
                                       ConditionStatus::kTrue, reason::kBudgetExceeded, message,
                                       clock_);
    if (!was_exceeded) {
      events_.Warning(api::KeyOf(workspace), std::string(reason::kBudgetExceeded), message);
    }
  } else {
    reconcilers_internal::SetCondition(workspace, condition::kBudgetExceeded,
                                       ConditionStatus::kFalse, reason::kWithinBudget,
                                       "within budget for " + usage.period.name, clock_);
  }
  return usage.period.end;
}

std::chrono::milliseconds WorkspaceReconciler::Check(Object& workspace, std::stop_token stop) {
  const std::string& ns = workspace.metadata.namespace_;
  const std::string& name = workspace.metadata.name;
  const api::WorkspaceSpec& spec = workspace.workspace_spec();
  std::vector<std::pair<std::string_view, Side>> sides;

  if (DatabricksSet(spec.databricks)) {
    StatusOr<databricks::SandboxApi*> api = clouds_.Sandboxes(ns, name);
    Side side;
    if (!api.ok()) {
      side = FromError(api.status(), /*resolving=*/true);
    } else if (StatusOr<databricks::SandboxPage> page = (*api)->List(1, "", stop); !page.ok()) {
      side = FromError(page.status(), /*resolving=*/false);
    } else {
      side = {ConditionStatus::kTrue, std::string(reason::kAuthenticated),
              "listing sandboxes succeeded", false};
    }
    sides.emplace_back(kDatabricksReady, std::move(side));
  }
  if (OpenAiSet(spec.openai)) {
    StatusOr<openai::AgentsApi*> api = clouds_.Agents(ns, name);
    Side side;
    if (!api.ok()) {
      side = FromError(api.status(), /*resolving=*/true);
    } else if (StatusOr<openai::SessionPage> page =
                   (*api)->ListSessions(openai::ListSessionsParams{.limit = 1}, stop);
               !page.ok()) {
      side = FromError(page.status(), /*resolving=*/false);
    } else {
      side = {ConditionStatus::kTrue, std::string(reason::kAuthenticated),
              "listing agent sessions succeeded", false};
    }
    sides.emplace_back(kOpenAiReady, std::move(side));
  }

  // A section that is no longer set has no condition any more.
  std::vector<api::Condition>& conditions = workspace.conditions();
  std::erase_if(conditions, [&](const api::Condition& c) {
    return (c.type == kDatabricksReady || c.type == kOpenAiReady) &&
           std::none_of(sides.begin(), sides.end(),
                        [&](const auto& side) { return c.type == side.first; });
  });

  // Ready, derived: the first False side, else the first Unknown one, else True.
  Side ready{ConditionStatus::kTrue, std::string(reason::kReady), "", false};
  bool retry_soon = false;
  for (const auto& [type, side] : sides) {
    reconcilers_internal::SetCondition(workspace, type, side.status, side.reason, side.message,
                                       clock_);
    retry_soon = retry_soon || side.retry_soon;
    const std::string label = type == kDatabricksReady ? "Databricks" : "OpenAI";
    if (side.status == ConditionStatus::kTrue) {
      continue;
    }
    const bool worse =
        ready.status == ConditionStatus::kTrue ||
        (ready.status == ConditionStatus::kUnknown && side.status == ConditionStatus::kFalse);
    if (worse) {
      ready.status = side.status;
      ready.reason = side.reason;
    }
    ready.message += (ready.message.empty() ? "" : "; ") + label + ": " + side.message;
  }
  if (sides.empty()) {
    ready.reason = reason::kNothingToCheck;
    ready.message =
        "spec sets neither databricks nor openai: the controller's own credentials are used, "
        "and not checked here";
  } else if (ready.status == ConditionStatus::kTrue) {
    ready.message = "credentials accepted";
  }
  reconcilers_internal::SetCondition(workspace, condition::kReady, ready.status, ready.reason,
                                     ready.message, clock_);
  return retry_soon ? options_.retry_interval : options_.check_interval;
}

StatusOr<std::vector<api::ObjectKey>> WorkspaceReconciler::Users(const Object& workspace) {
  std::vector<api::ObjectKey> users;
  ListOptions sandboxes;
  sandboxes.kind = api::Kind::kSandbox;
  sandboxes.namespace_ = workspace.metadata.namespace_;
  ASSIGN_OR_RETURN(std::vector<Object> all, store_.List(sandboxes));
  for (const Object& o : all) {
    if (o.sandbox_spec().workspace_ref == workspace.metadata.name ||
        api::PlannedSandbox(o).workspace_ref == workspace.metadata.name) {
      users.push_back(api::KeyOf(o));
    }
  }
  // A worker's inline sandbox becomes a Sandbox object only when the worker is reconciled; until
  // then (and while it would create it again) the worker itself uses the Workspace.
  ListOptions workers;
  workers.kind = api::Kind::kAgentWorker;
  workers.namespace_ = workspace.metadata.namespace_;
  ASSIGN_OR_RETURN(all, store_.List(workers));
  for (const Object& o : all) {
    const auto& inline_sandbox = o.agent_worker_spec().sandbox;
    if (inline_sandbox && inline_sandbox->workspace_ref == workspace.metadata.name) {
      users.push_back(api::KeyOf(o));
    }
  }
  std::sort(users.begin(), users.end());
  return users;
}

StatusOr<std::optional<ReconcileResult>> WorkspaceReconciler::Finalize(Object& workspace) {
  ASSIGN_OR_RETURN(std::vector<api::ObjectKey> users, Users(workspace));
  if (dependencies_ != nullptr) {
    // A change to any user — its deletion above all — brings this Workspace back at once.
    dependencies_->SetDependencies(api::KeyOf(workspace), users);
  }
  if (users.empty()) {
    std::lock_guard lock(mu_);
    checks_.erase(workspace.metadata.uid);
    return std::optional<ReconcileResult>();  // nobody uses it: the finalizer comes off
  }
  std::string names;
  for (size_t i = 0; i < users.size() && i < kUsersNamed; ++i) {
    names += (i == 0 ? "" : ", ") + KeyName(users[i]);
  }
  if (users.size() > kUsersNamed) {
    names += " and " + std::to_string(users.size() - kUsersNamed) + " more";
  }
  reconcilers_internal::SetCondition(
      workspace, condition::kDeleting, ConditionStatus::kTrue, reason::kInUse,
      "waiting for " + std::to_string(users.size()) +
          (users.size() == 1 ? " object that uses" : " objects that use") +
          " this workspace to be deleted: " + names,
      clock_);
  return std::optional<ReconcileResult>(ReconcileResult::RequeueAfter(options_.in_use_recheck));
}

}  // namespace sbx::controller
