// `sbxctl delete (KIND NAME… | KIND/NAME… | -f FILE…) [--wait] [--timeout 5m]
// [--ignore-not-found]`.
//
// Prints `sandbox "foo" deleted`, or `sandbox "foo" marked for deletion` when finalizers keep
// it until the controller has cleaned up; --wait then blocks until it is gone. A missing object
// is `Error from server (NotFound): …` and exit 1 unless --ignore-not-found. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct DeleteCommandOptions {
  std::vector<std::string> args;   // KIND NAME… or KIND/NAME…
  std::vector<std::string> files;  // -f
  bool recursive = false;          // -R
  bool wait = false;               // --wait
  std::string timeout = "5m";      // --timeout
  bool ignore_not_found = false;   // --ignore-not-found
};

int RunDelete(CommandContext& ctx, const DeleteCommandOptions& options);
void AddDeleteCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
