// `sbxctl diff -f FILE|DIR|- [-R] [--prune --applyset NAME]`: what `apply` would change.
//
// For every object that apply would create, change or prune: a unified diff of the stored
// object (labels, annotations and spec, as YAML) against the defaulted manifest; a new object
// diffs against nothing, a pruned one to nothing. The store decides what changes (a dry-run
// Apply), so diff and apply never disagree. Exit 0: no differences; 1: differences; 2: error.
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "api/resources.h"
#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct DiffCommandOptions {
  std::vector<std::string> files;
  bool recursive = false;
  bool prune = false;
  std::string applyset;
};

int RunDiff(CommandContext& ctx, const DiffCommandOptions& options);
void AddDiffCommand(CLI::App& app, CommandContext& ctx);

// The user-owned part of an object as YAML (apiVersion, kind, name, namespace, labels,
// annotations, spec): server-set metadata and status removed.
std::string DiffView(const api::Object& object);

}  // namespace sbx::cli
