// `sbxctl completion bash|zsh|fish`: prints a shell completion script, as kubectl:
//   source <(sbxctl completion bash)      # ~/.bashrc
//   source <(sbxctl completion zsh)       # ~/.zshrc, after compinit
//   sbxctl completion fish | source       # ~/.config/fish/config.fish
// The scripts are thin: on <TAB> they run the hidden `sbxctl __complete -- WORD… CURRENT`,
// which prints the candidates for CURRENT, one per line — verbs and their flags (read from the
// CLI11 app itself, so a new verb completes without touching this file), kinds and their short
// names, -o formats, explain field paths (from the embedded schemas), namespaces, and object
// names read from the store of --db / $SBX_DB / -n found on the line (through the
// CommandContext, so a server will answer them too). A database that does not exist yet is not
// created by a <TAB>; errors print nothing. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

// The candidates for the last of `words` (the words after `sbxctl`; the last one may be "").
std::vector<std::string> CompletionCandidates(CLI::App& app, CommandContext& ctx,
                                              const std::vector<std::string>& words);

// Adds `completion` and the hidden `__complete`; `app` must outlive the run.
void AddCompletionCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
