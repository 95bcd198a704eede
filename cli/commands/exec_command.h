// `sbxctl exec sandbox/NAME [--timeout 60s] -- CMD [ARG…]`: runs one command in the Databricks
// sandbox of a Sandbox object through exec-sync (DESIGN §4), prints its stdout and stderr and
// exits with its exit code, like `kubectl exec`. CMD is a program, not a shell line: wrap it in
// `/bin/bash -c '…'` for pipes and redirections. Its stdout and stderr reach a pipe or file
// unchanged and a terminal with control characters escaped (terminal_text.h).
//
// The Databricks client is built the way sbxd builds it (HttpCloudClients over the cpprest
// transport and the process environment), so the Sandbox's workspaceRef and its credentials
// (secret references, or DATABRICKS_HOST/DATABRICKS_TOKEN for the default Workspace) resolve
// exactly as they do in the controller. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct ExecCommandOptions {
  std::string target;                // "sandbox/NAME", "sb/NAME" or "NAME"
  std::vector<std::string> command;  // CMD ARG…
  std::string timeout = "60s";       // exec-sync execution timeout
};

// Returns the command's exit code; kExitError (with a one-line error) when the command could
// not be run, timed out or was killed by a signal.
int RunExec(CommandContext& ctx, const ExecCommandOptions& options);
void AddExecCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
