// `sbxctl audit [--since 1h] [--actor NAME] [-o json]`: the audit log (DESIGN §8.3), oldest
// first: who wrote what, when, through which surface, and with what result. From a local store,
// or through a server (the admin role). Not thread-safe.
#pragma once

#include <string>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct AuditCommandOptions {
  std::string since;   // a duration ("1h", "7d"); "" = the whole retained log
  std::string actor;   // "" = everyone
  std::string output;  // "" = a table, "json" = the AuditList document
};

int RunAudit(CommandContext& ctx, const AuditCommandOptions& options);
void AddAuditCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
