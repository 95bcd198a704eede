// TaskLogWriter: the one way an AgentTask's log is written (Store::AppendTaskLog), shared by the
// session's event stream (live events as they arrive) and the AgentTask reconciler (the turn's
// saved items, reference §2.6, after a restart, a dropped stream, or at the end of the turn).
//
// Item-level entries — a command line (kCommand), a command's result (kCommandResult) and a
// whole assistant message (kAssistant) — are keyed by (kind, item id) and go in once however
// many writers see them, so a recovery fills the gaps the saved items can fill with no
// duplicates. Deltas (kAssistantDelta, kOutputDelta) and status lines have no identity and are
// appended as given; a delta of an item whose result is already logged is dropped (reference
// §2.6 step 4: "discard updates for items already final").
// What is logged is remembered per task uid (loaded from the log on first use, so a restart
// starts from the store); Forget drops that memory when the task is finished.
//
// Thread-safety: every method may be called from any thread (one mutex; appends are short
// SQLite transactions). The store must outlive the writer.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/cloud/openai/agents_api.h"
#include "controller/store/store.h"

namespace sbx::controller {

class TaskLogWriter {
 public:
  explicit TaskLogWriter(Store& store) : store_(store) {}

  // Appends `entries` in order, skipping item-level entries already logged and deltas of items
  // already final. Returns how many were appended (the store's error otherwise; the log is
  // information, callers usually ignore a failure).
  api::StatusOr<int> Append(const api::ObjectKey& task, const std::string& task_uid,
                            const std::vector<Store::TaskLogEntry>& entries);

  // Forgets what was logged for the task (it is finished; a later Append reloads from the log).
  void Forget(const std::string& task_uid);

 private:
  using Key = std::pair<Store::TaskLogKind, std::string>;
  struct Book {
    std::set<Key> logged;            // item-level entries in the log
    std::set<std::string> finished;  // item ids whose result (or whole message) is logged
  };
  Book& BookLocked(const std::string& task_uid);

  Store& store_;
  std::mutex mu_;
  std::map<std::string, Book> books_;  // Guarded by mu_.
};

// One entry of a task's log.
Store::TaskLogEntry TaskLogLine(Store::TaskLogKind kind, std::string text,
                                std::string item_id = "");

// The log entries a turn's saved items stand for, in order: a command line for every command
// (as soon as it is saved), its result once it ended, and every assistant message once done.
// With `final` (the turn is over) unfinished items count as done.
std::vector<Store::TaskLogEntry> ItemLogEntries(const std::vector<openai::Item>& items, bool final);

}  // namespace sbx::controller
