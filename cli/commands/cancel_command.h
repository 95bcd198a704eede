// `sbxctl cancel agenttask/NAME…` (also `at/NAME`, or `cancel agenttask NAME…`): asks the
// controller to cancel AgentTasks. It writes the annotation api::kCancelRequestedAnnotation
// (`sbx.dev/cancel-requested`, the RFC 3339 time of the request) the way `annotate` writes
// (object_update.h: no new generation, a concurrent status write is read again); the controller
// sends agent.session.input.cancel, waits for turn.cancelled and ends the task Cancelled (a
// queued task is Cancelled without a turn).
//
// Prints `agenttask/NAME cancel requested` (exit 0); a task already asked keeps the time of the
// first request. A finished task is left unchanged: `agenttask/NAME already finished
// (Succeeded)`, exit 0. A task that does not exist is `Error from server (NotFound): …`, exit 1.
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct CancelCommandOptions {
  std::vector<std::string> args;  // agenttask/NAME… or agenttask NAME…
};

int RunCancel(CommandContext& ctx, const CancelCommandOptions& options);
void AddCancelCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
