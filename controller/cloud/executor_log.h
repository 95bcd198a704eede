// ExecutorLog: reads an AgentWorker's executor log (/home/sandbox-agent/.sbx/<worker>/log) from
// its sandbox through SandboxCommands, for `sbxctl logs agentworker/NAME` on a local store and
// for sbxd's API server (which proxies it, so the client needs no cloud credentials). One shell
// script per read (ReadTail: the last N lines; ReadFrom: what was appended after an offset,
// from the start again when a relaunch began a new file), both capped at `cap` bytes.
//
// Stateless functions; thread-safe as SandboxCommands is.
#pragma once

#include <cstddef>
#include <string>

#include "api/status.h"
#include "controller/cloud/sandbox_commands.h"

namespace sbx::controller {

struct ExecutorLogTarget {
  std::string namespace_;
  std::string workspace_ref;
  std::string sandbox_id;
  std::string worker;  // the AgentWorker's name: its log directory
};

struct ExecutorLogChunk {
  size_t size = 0;    // the log's size when read
  std::string inode;  // which file it was (a relaunch starts a new one)
  std::string bytes;  // what was read from it
};

// The last `tail_lines` lines (all when < 0), at most `cap` bytes. kUnavailable with the
// sandbox's words when the log is missing or the command failed.
api::StatusOr<ExecutorLogChunk> ReadExecutorLogTail(SandboxCommands& commands,
                                                    const ExecutorLogTarget& target, int tail_lines,
                                                    size_t cap);
// The bytes after `offset` of file `inode` (from 0 when the log is now another file or
// shorter), at most `cap`. A missing log reads empty.
api::StatusOr<ExecutorLogChunk> ReadExecutorLogFrom(SandboxCommands& commands,
                                                    const ExecutorLogTarget& target, size_t offset,
                                                    const std::string& inode, size_t cap);

}  // namespace sbx::controller
