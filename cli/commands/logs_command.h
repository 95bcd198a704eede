// `sbxctl logs agentworker/NAME [--tail N] [-f]`: prints the executor log of an AgentWorker
// (/home/sandbox-agent/.sbx/<NAME>/log, written by the `codex exec-server` the controller
// launched), read through exec-sync in the worker's sandbox — spec.sandboxRef, or the Sandbox
// the worker owns (named after it). Like `kubectl logs`: --tail N prints the last N lines
// (default: the whole log, capped at the last kLogsMaxBytes bytes); -f keeps polling every
// second and prints only the bytes appended since (tracked as a byte offset, `tail -c +OFFSET`)
// until SIGINT/SIGTERM. A relaunch rotates the log (log → log.1); -f then starts the new log
// from its first byte. As kubectl does, a pipe or file gets the log's bytes unchanged; a
// terminal gets control characters escaped (terminal_text.h).
//
// `sbxctl logs agenttask/NAME [-f]` (also `at/NAME`) prints an AgentTask's log from the store
// instead (task_log_printer.h: assistant text, commands with output and exit code, the
// outcome); -f follows until the task finishes. --tail is for worker logs only. A bare NAME is
// still an agentworker.
//
// The Databricks client is built the way sbxd builds it (as `sbxctl exec` does). Not
// thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

// The most log bytes one read prints (the start of a longer log is left out).
inline constexpr size_t kLogsMaxBytes = 1 << 20;

struct LogsCommandOptions {
  std::string target;  // "agentworker/NAME", "aw/NAME" or "NAME"
  int tail = -1;       // last N lines; -1 = all
  bool follow = false;
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};  // for -f
};

// kExitOk after printing (or after an interrupted -f); kExitError with one error line when the
// worker, its sandbox or the log cannot be read.
int RunLogs(CommandContext& ctx, const LogsCommandOptions& options);
void AddLogsCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
