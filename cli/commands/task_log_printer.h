// TaskLogPrinter: `sbxctl logs agenttask/NAME [-f]` and the following part of `sbxctl run`.
// Prints the log the controller keeps in the store for an AgentTask (Store::ReadTaskLog):
// the assistant's text as it streamed, each command with its output and exit code, and at the
// end the outcome of the turn (phase, error code and message, duration, commands).
//
// Without follow it prints what is stored now, plus the outcome if the task has finished. With
// follow it keeps reading — it blocks in Store::WaitForChange, so it wakes on the controller's
// writes, not on a timer — until the task reaches a finished phase (Succeeded, Failed,
// Cancelled, TimedOut), then prints what remains of the log and the outcome. There is no
// deadline: the task's own timeout ends it. The task is read before its log on every pass, so
// once a finished phase is seen the log read after it is complete (the controller writes the
// log before the phase that ends it).
//
// Text from the sandbox and the service goes to a pipe or file unchanged and is escaped on a
// terminal (terminal_text.h). Progress lines (`progress`: phase changes such as "Queued
// (position 2)" and the Submitted condition's message, e.g. an unknown worker) go to stderr.
//
// Not thread-safe (one CommandContext).
#pragma once

#include "api/resources.h"
#include "api/status.h"
#include "cli/commands/command_context.h"
#include "controller/store/store.h"

namespace sbx::cli {

struct TaskLogOptions {
  bool follow = false;    // until the task is finished
  bool progress = false;  // phase changes on stderr (run)
};

// Prints the log of the AgentTask `key`. Returns the task as last read (finished when
// following). kNotFound (`Error from server (NotFound): agenttasks "x" not found`) when it does
// not exist or is deleted while followed; kCancelled when SIGINT/SIGTERM stopped following.
api::StatusOr<api::Object> PrintTaskLog(CommandContext& ctx, controller::Store& store,
                                        const api::ObjectKey& key, const TaskLogOptions& options);

// The outcome line of a finished task: "Succeeded in 3s, 2 commands", "Failed:
// connection_failed: executor went away". "" for an unfinished one.
std::string OutcomeLine(const api::Object& task);

}  // namespace sbx::cli
