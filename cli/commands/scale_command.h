// `sbxctl scale agentpool/NAME --min N --max M` (either flag alone; also `ap/NAME`, `ap NAME`),
// as kubectl scale: the pool's spec.replicas written as apply writes it (object_update.h: the
// same validation, so min > max is refused with the field named; a concurrent change is read
// again). Prints `agentpool/NAME scaled` (`not scaled` when nothing changed). Any error:
// exit 1. Not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct ScaleCommandOptions {
  std::vector<std::string> args;  // agentpool/NAME, or agentpool NAME
  std::optional<int> min;         // --min
  std::optional<int> max;         // --max
};

int RunScale(CommandContext& ctx, const ScaleCommandOptions& options);
void AddScaleCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
