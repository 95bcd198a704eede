// `sbxctl apply -f FILE|DIR|- [-f …] [-R] [--dry-run] [--prune [--prune-allow-empty]
// --applyset NAME] [--wait]`.
//
// Reads, defaults and validates every document first; any error prints one line per error
// and changes nothing. No objects is an error; with --prune too (it would delete every member
// of the set), unless --prune-allow-empty says that is meant — also with --dry-run. Then ONE
// Store::Apply transaction, reported like kubectl
// (`sandbox/foo created|configured|unchanged|pruned`, ` (dry run)` with --dry-run).
// --wait then waits for Ready=True on each applied Sandbox and AgentWorker (Workspaces have no
// readiness to wait for). Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct ApplyCommandOptions {
  std::vector<std::string> files;  // -f
  bool recursive = false;          // -R
  bool dry_run = false;            // --dry-run
  bool prune = false;              // --prune (requires --applyset)
  bool prune_allow_empty = false;  // --prune-allow-empty: prune even when no objects are given
  std::string applyset;            // --applyset
  bool wait = false;               // --wait
  std::string timeout = "5m";      // --timeout (for --wait)
};

int RunApply(CommandContext& ctx, const ApplyCommandOptions& options);
void AddApplyCommand(CLI::App& app, CommandContext& ctx);

// "created", "configured", "unchanged", "pruned".
std::string ApplyActionName(controller::ApplyAction action);

}  // namespace sbx::cli
