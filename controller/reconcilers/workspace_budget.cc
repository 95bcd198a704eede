#include "controller/reconcilers/workspace_budget.h"

#include <chrono>
#include <utility>

#include "api/rfc3339.h"
#include "controller/cloud/cloud_clients.h"

namespace sbx::controller {
api::StatusOr<PeriodUsage> UsageOfPeriod(Store& store, const api::Object& workspace,
                                         Clock::WallTime now) {
  PeriodUsage usage;
  usage.period = api::PeriodAt(api::UsagePeriod(workspace.workspace_spec()), now);
  ASSIGN_OR_RETURN(
      usage.used,
      store.SumUsage(WorkspaceId(workspace.metadata.namespace_, workspace.metadata.name),
                     api::UnixMillis(usage.period.start), api::UnixMillis(usage.period.end)));
  return usage;
}

api::WorkspaceUsage UsageStatus(const api::WorkspaceSpec& spec, const PeriodUsage& usage) {
  api::WorkspaceUsage out;
  out.period = usage.period.name;
  out.input_tokens = usage.used.input_tokens;
  out.cached_input_tokens = usage.used.cached_input_tokens;
  out.output_tokens = usage.used.output_tokens;
  out.reasoning_tokens = usage.used.reasoning_tokens;
  out.compute_millis = usage.used.compute_millis;
  out.tasks = usage.used.tasks;
  if (spec.pricing) {
    out.cost = api::FormatCost(api::CostOf(*spec.pricing, usage.used));
  }
  return out;
}

api::StatusOr<std::optional<api::Object>> FindWorkspace(Store& store,
                                                        const std::string& workspace_id) {
  const auto parsed = ParseWorkspaceId(workspace_id);
  if (!parsed) {
    return std::optional<api::Object>();
  }
  api::StatusOr<api::Object> workspace =
      store.Get({api::Kind::kWorkspace, parsed->first, parsed->second});
  if (workspace.status().code() == api::StatusCode::kNotFound) {
    return std::optional<api::Object>();
  }
  ASSIGN_OR_RETURN(api::Object found, std::move(workspace));
  return std::optional<api::Object>(std::move(found));
}

api::StatusOr<std::optional<std::string>> BudgetHold(Store& store, const api::Object& workspace,
                                                     Clock::WallTime now) {
  const api::WorkspaceSpec& spec = workspace.workspace_spec();
  if (!spec.budget) {
    return std::optional<std::string>();
  }
  ASSIGN_OR_RETURN(const PeriodUsage usage, UsageOfPeriod(store, workspace, now));
  return api::BudgetReached(*spec.budget, spec.pricing, usage.used, usage.period);
}

}  // namespace sbx::controller
