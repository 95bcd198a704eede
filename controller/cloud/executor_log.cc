#include "controller/cloud/executor_log.h"

#include <sstream>
#include <vector>

namespace sbx::controller {
namespace {

// Prints the log's size in bytes and its inode on the first line, then (a consistent prefix of)
// the log: the last N lines (or all), at most CAP bytes. $1 log, $2 N or "all", $3 CAP.
constexpr char kReadScript[] = R"sh(f=$1; n=$2; cap=$3
if [ ! -f "$f" ]; then echo "no executor log at $f (has the executor been launched?)" >&2; exit 3; fi
set -- "$f" "$n" "$cap" $(stat -c '%s %i' "$f"); size=$4
echo "$size $5"
if [ "$n" = all ]; then head -c "$size" "$f" | tail -c "$cap"
else head -c "$size" "$f" | tail -n "$n" | tail -c "$cap"; fi
)sh";

// Prints the log's size and inode on the first line, then the bytes after OFFSET (at most CAP
// of them) — from the start when the log is another file than INODE or shorter than OFFSET
// (a relaunch moved it to log.1 and began a new one). A missing log is empty.
// $1 log, $2 OFFSET, $3 CAP, $4 INODE.
constexpr char kFollowScript[] = R"sh(f=$1; off=$2; cap=$3; ino=$4
set -- $(stat -c '%s %i' "$f" 2>/dev/null || echo 0 0); size=$1
echo "$size $2"
if [ "$2" != "$ino" ] || [ "$size" -lt "$off" ]; then off=0; fi
n=$((size - off)); if [ "$n" -gt "$cap" ]; then n=$cap; fi
if [ "$n" -gt 0 ]; then tail -c +"$((off + 1))" "$f" | head -c "$n"; fi
)sh";

std::string LogPath(const ExecutorLogTarget& target) {
  return "/home/sandbox-agent/.sbx/" + target.worker + "/log";
}

api::StatusOr<ExecutorLogChunk> Read(SandboxCommands& commands, const ExecutorLogTarget& target,
                                     const char* script, const std::vector<std::string>& args) {
  CommandRequest request;
  request.cmd = "/bin/bash";
  request.args = {"-c", script, "sbx-logs"};
  request.args.insert(request.args.end(), args.begin(), args.end());
  request.timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(CommandResult r, commands.Run(target.namespace_, target.workspace_ref,
                                                 target.sandbox_id, request));
  if (r.outcome != CommandOutcome::kCompleted || r.exit_code != 0) {
    std::string why = r.stderr_text;
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) {
      why.pop_back();
    }
    return api::UnavailableError(why.empty() ? "reading the log failed (exit " +
                                                   std::to_string(r.exit_code.value_or(-1)) + ")"
                                             : why);
  }
  const size_t nl = r.stdout_text.find('\n');
  if (nl == std::string::npos) {
    return api::InternalError("unexpected answer from the sandbox: " + r.stdout_text);
  }
  ExecutorLogChunk c;
  std::istringstream header(r.stdout_text.substr(0, nl));
  header >> c.size >> c.inode;
  c.bytes = r.stdout_text.substr(nl + 1);
  return c;
}

}  // namespace

api::StatusOr<ExecutorLogChunk> ReadExecutorLogTail(SandboxCommands& commands,
                                                    const ExecutorLogTarget& target, int tail_lines,
                                                    size_t cap) {
  return Read(
      commands, target, kReadScript,
      {LogPath(target), tail_lines < 0 ? "all" : std::to_string(tail_lines), std::to_string(cap)});
}

api::StatusOr<ExecutorLogChunk> ReadExecutorLogFrom(SandboxCommands& commands,
                                                    const ExecutorLogTarget& target, size_t offset,
                                                    const std::string& inode, size_t cap) {
  return Read(commands, target, kFollowScript,
              {LogPath(target), std::to_string(offset), std::to_string(cap), inode});
}

}  // namespace sbx::controller
