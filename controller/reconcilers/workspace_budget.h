// A Workspace's usage and budget (DESIGN §8.2, issue #28), read from the usage ledger
// (Store::RecordUsage / SumUsage) for the Workspace reconciler, which shows them
// (status.usage, condition BudgetExceeded), and the AgentTask reconciler, which holds new tasks
// while the budget is used up and prices what each task used.
//
// The period is the budget's (spec.budget.period), else the UTC month. A budget is checked
// against the ledger at the moment a task would start, not against the Workspace's status (which
// may lag): a task that ends pushes the sum up at once for the next one.
//
// Stateless functions over the store; thread-safe as the store is.
#pragma once

#include <optional>
#include <string>

#include "api/resources.h"
#include "api/usage.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct PeriodUsage {
  api::BudgetPeriodBounds period;
  api::UsageSum used;
};

// What `workspace`'s tasks used in its current period at `now`.
api::StatusOr<PeriodUsage> UsageOfPeriod(Store& store, const api::Object& workspace,
                                         Clock::WallTime now);

// status.usage of a Workspace with `spec` that used `usage`.
api::WorkspaceUsage UsageStatus(const api::WorkspaceSpec& spec, const PeriodUsage& usage);

// The Workspace named by a WorkspaceId ("<namespace>/<name>"); nullopt when it does not exist
// (a task of a workspace nobody declared has no budget).
api::StatusOr<std::optional<api::Object>> FindWorkspace(Store& store,
                                                        const std::string& workspace_id);

// Why a new task of `workspace` may not start at `now` ("tokens: 1200 used of 1000 today
// (2026-12-04)"); nullopt when it may: no budget, or room left.
api::StatusOr<std::optional<std::string>> BudgetHold(Store& store, const api::Object& workspace,
                                                     Clock::WallTime now);

}  // namespace sbx::controller
