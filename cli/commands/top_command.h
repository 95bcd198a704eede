// `sbxctl top workspaces|pools|tasks [-n NS|-A] [--sort-by …] [-o json]` (DESIGN §8.2, like
// `kubectl top`): what the work consumed, read from the objects' status.
//   workspaces  NAME PERIOD TASKS TOKENS COST BUDGET — the current period's usage
//               (Workspace.status.usage) and the largest share of spec.budget it used
//               ("80% tokens"), "-" without a budget;
//   pools       NAME TASKS TOKENS COST — the sums over the pool's AgentTasks still stored;
//   tasks       NAME PHASE TOKENS COST — each AgentTask's status.usage over all its attempts.
// TOKENS is input + output. A task's or pool's COST is at its Workspace's prices ("-" without
// pricing). Rows are sorted by --sort-by: tokens (default, most first), cost, or name.
// `-o json` prints the rows as a JSON array (numbers as numbers, costs as decimal strings).
// Compute-seconds are not counted yet (issue #28). Not thread-safe.
#pragma once

#include <string>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct TopCommandOptions {
  std::string what{};  // workspaces | pools | tasks (and their short names)
  std::string sort_by = "tokens";
  std::string output{};  // "" or "json"
};

int RunTop(CommandContext& ctx, const TopCommandOptions& options);
void AddTopCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
