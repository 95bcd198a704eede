// `sbxctl run WORKER --input TEXT | -f FILE [--collect PATH…] [--timeout D] [-o DIR]
// [--name N]`: the one-liner of an agent turn (DESIGN §7.1). Creates an AgentTask for the
// AgentWorker WORKER (named N, else `WORKER-<5 random characters>`), follows its log to the end
// as `logs agenttask/NAME -f` does (task_log_printer.h), then (when --collect was given) writes
// the collected files to DIR/<collect path> (DIR defaults to the current directory) as
// `artifacts` does. Progress (the phase, why the task waits) goes to stderr.
//
// Output: `agenttask/NAME created`, the log, one line per artifact, and
// `agenttask/NAME PHASE` (with the error code and message of a failed task on stderr). Exit 0
// only when the task Succeeded and every artifact was written; 1 otherwise (Failed, Cancelled,
// TimedOut, an artifact error, bad flags). Bad flags are one `error:` line naming the flag and
// create nothing: an empty input, an absolute or `..` --collect path, a --timeout outside
// 1s–24h (the rules of the AgentTask manifest). An unknown WORKER is accepted: the controller
// reports it on the task, and the progress lines on stderr show it.
//
// SIGINT/SIGTERM stops following and leaves the task running; a line on stderr says how to
// cancel or follow it again; exit 1. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct RunCommandOptions {
  std::string worker;                // WORKER: the AgentWorker's name (or --pool)
  std::string pool;                  // --pool NAME: an AgentPool's idle replica runs it
  std::string input;                 // --input TEXT
  bool input_given = false;          // --input was on the line (an empty one is an error)
  std::string input_file;            // -f FILE ("-": stdin)
  std::vector<std::string> collect;  // --collect PATH…
  std::string timeout;               // --timeout; "" = the AgentTask default (30m)
  std::string output_dir = ".";      // -o DIR
  std::string name;                  // --name; "" = WORKER-<random> (or POOL-<random>)
};

int RunRun(CommandContext& ctx, const RunCommandOptions& options);
void AddRunCommand(CLI::App& app, CommandContext& ctx);

// `worker` + "-" + 5 random characters of [a-z0-9] (the worker part shortened to fit a
// 63-character name).
std::string GenerateTaskName(std::string_view worker);

}  // namespace sbx::cli
