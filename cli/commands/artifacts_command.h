// `sbxctl artifacts agenttask/NAME [-o DIR]` (also `at/NAME` or NAME): writes each file the
// controller collected after the task's turn (spec.collect, read back from the sandbox) to
// DIR/<its collect path> (DIR defaults to the current directory), creating directories as
// needed, and prints one line per artifact: `wrote DIR/PATH (N bytes, sha256 HEX)`, or
// `error: artifact PATH: WHY` for one the controller could not collect.
//
// Defence in depth: validation already refuses absolute and `..` collect paths, but the store
// is not trusted to hold only valid ones — a path that would leave DIR (absolute, `..`, or
// through a symlink inside DIR that points out of it) is refused and nothing is written for
// it. A file is written through a temporary beside it and renamed into place, so a reader
// never sees half of it and a symlink planted at its name is replaced, not followed.
//
// Exit 0 when every artifact was written (also when there are none: a line on stderr says so,
// naming the phase of an unfinished task); 1 when any artifact has an error or cannot be
// written, or the task does not exist. Not thread-safe.
#pragma once

#include <string>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct ArtifactsCommandOptions {
  std::string target;            // agenttask/NAME, at/NAME or NAME
  std::string output_dir = ".";  // -o
};

int RunArtifacts(CommandContext& ctx, const ArtifactsCommandOptions& options);
void AddArtifactsCommand(CLI::App& app, CommandContext& ctx);

// Writes the artifacts of `task` (an AgentTask as read from `store`) under `dir` as described
// above, printing one line each. Returns true when every artifact was written. For `run`.
bool WriteArtifacts(CommandContext& ctx, controller::Store& store, const api::Object& task,
                    const std::string& dir);

}  // namespace sbx::cli
