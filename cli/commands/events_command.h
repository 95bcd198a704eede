// `sbxctl events [KIND NAME | KIND/NAME] [-n NS|-A]`: the event log, oldest first, as
// LAST SEEN, TYPE, REASON, OBJECT, COUNT, MESSAGE (NAMESPACE first with -A). Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct EventsCommandOptions {
  std::vector<std::string> args;
};

int RunEvents(CommandContext& ctx, const EventsCommandOptions& options);
void AddEventsCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
