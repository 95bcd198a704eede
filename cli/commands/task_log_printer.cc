#include "cli/commands/task_log_printer.h"

#include <map>
#include <set>
#include <string>

#include "api/conditions.h"
#include "cli/commands/object_printer.h"
#include "cli/commands/terminal_text.h"

namespace sbx::cli {
namespace {

using LogKind = controller::Store::TaskLogKind;

// How long one WaitForChange may block before the interruption flag is checked.
constexpr std::chrono::milliseconds kMaxBlock{200};
// Log entries read per store call.
constexpr int kPageSize = 500;

// Turns log entries into text. The store keeps both the streamed pieces (deltas) of an item and,
// once it is done, the whole item; a follower that printed the pieces must not print the item
// again, and a reader that finds the whole item in the same page prints it instead of its
// pieces (the oldest pieces may have been dropped by the store's bound). Item ids tie the two.
class LogRenderer {
 public:
  explicit LogRenderer(ProgramOutput& output) : output_(output) {}

  void Page(const std::vector<controller::Store::TaskLogEntry>& entries) {
    std::map<std::string, const controller::Store::TaskLogEntry*> whole_here;
    for (const auto& e : entries) {
      if (!e.item_id.empty() &&
          (e.kind == LogKind::kAssistant || e.kind == LogKind::kCommandResult)) {
        whole_here.try_emplace(e.item_id, &e);
      }
    }
    for (const auto& e : entries) {
      Entry(e, whole_here);
    }
  }

  // An sbx line (not the agent's): on a line of its own.
  void Note(std::string_view text) {
    EndLine();
    Write("--- " + std::string(text) + "\n");
  }

  void EndLine() {
    if (!at_line_start_) {
      Write("\n");
    }
  }

 private:
  void Entry(const controller::Store::TaskLogEntry& e,
             const std::map<std::string, const controller::Store::TaskLogEntry*>& whole_here) {
    const bool done = !e.item_id.empty() && done_.count(e.item_id) > 0;
    switch (e.kind) {
      case LogKind::kAssistantDelta:
      case LogKind::kOutputDelta: {
        if (done || covered_.count(e.item_id) > 0) {
          return;
        }
        const auto whole = whole_here.find(e.item_id);
        if (whole != whole_here.end() && streamed_.count(e.item_id) == 0) {
          // The whole item is in this page: print it where its first piece was, once.
          if (e.kind == LogKind::kAssistantDelta) {
            EndLine();
          }
          Write(whole->second->text);
          covered_.insert(e.item_id);
        } else {
          Write(e.text);
        }
        streamed_.insert(e.item_id);
        return;
      }
      case LogKind::kAssistant:
        if (done) {
          return;
        }
        if (e.item_id.empty() || streamed_.count(e.item_id) == 0) {
          EndLine();
          Write(e.text);
        }
        EndLine();
        done_.insert(e.item_id);
        return;
      case LogKind::kCommand:
        if (!e.item_id.empty() && !commands_.insert(e.item_id).second) {
          return;  // the same command again (recovery re-reads the turn's items)
        }
        EndLine();
        Write(e.text + "\n");
        return;
      case LogKind::kCommandResult:
        if (done) {
          return;
        }
        if (e.item_id.empty() || streamed_.count(e.item_id) == 0) {
          Write(e.text);
        }
        EndLine();
        Write("[exit " + (e.exit_code ? std::to_string(*e.exit_code) : std::string("?")) + "]\n");
        done_.insert(e.item_id);
        return;
      case LogKind::kStatus:
        Note(e.text);
        return;
    }
  }

  void Write(std::string_view text) {
    if (text.empty()) {
      return;
    }
    output_.Write(text);
    at_line_start_ = text.back() == '\n';
  }

  ProgramOutput& output_;
  bool at_line_start_ = true;
  std::set<std::string> streamed_;  // items whose pieces were printed
  std::set<std::string> done_;      // items printed whole (or ended)
  std::set<std::string> commands_;  // command lines printed
  std::set<std::string> covered_;   // items printed whole at their first piece
};

// Prints the log entries after `after`, advancing it. Says once when the store dropped old
// entries to keep the log within its bound.
api::Status PrintNewEntries(controller::Store& store, const std::string& uid, int64_t& after,
                            bool& told_dropped, LogRenderer& renderer) {
  while (true) {
    ASSIGN_OR_RETURN(controller::Store::TaskLogPage page, store.ReadTaskLog(uid, after, kPageSize));
    if (page.dropped > 0 && !told_dropped && after == 0) {
      renderer.Note("(" + std::to_string(page.dropped) +
                    " older log entries were dropped: the store keeps a bounded log per task)");
      told_dropped = true;
    }
    renderer.Page(page.entries);
    if (!page.entries.empty()) {
      after = page.entries.back().seq;
    }
    if (static_cast<int>(page.entries.size()) < kPageSize) {
      return api::OkStatus();
    }
  }
}

// "Queued (position 2) on agentworker/fixer", "Pending: WorkerNotFound: …": where the task is,
// for run's stderr.
std::string ProgressLine(const api::Object& task) {
  const auto& s = task.agent_task_status();
  std::string line(api::TaskPhaseName(s.phase));
  if (s.phase == api::TaskPhase::kQueued && s.queue_position > 0) {
    line += " (position " + std::to_string(s.queue_position) + ")";
  }
  if (!s.worker.empty()) {
    line += " on agentworker/" + s.worker;
  }
  const api::Condition* submitted = api::FindCondition(s.conditions, api::condition::kSubmitted);
  if (submitted != nullptr && submitted->status != api::ConditionStatus::kTrue &&
      !submitted->message.empty()) {
    line += ": " + submitted->reason + ": " + submitted->message;
  }
  return line;
}

}  // namespace

std::string OutcomeLine(const api::Object& task) {
  const auto& s = task.agent_task_status();
  if (!api::IsFinished(s.phase)) {
    return "";
  }
  std::string line(api::TaskPhaseName(s.phase));
  if (const std::string took = TaskDuration(s, {}); took != "<none>") {
    line += " in " + took;
  }
  line += ", " + std::to_string(s.commands) + (s.commands == 1 ? " command" : " commands");
  const api::TaskError& error = s.result.error;
  if (!error.code.empty() || !error.message.empty()) {
    line += ": " + error.code + (error.code.empty() || error.message.empty() ? "" : ": ") +
            error.message;
  }
  return line;
}

api::StatusOr<api::Object> PrintTaskLog(CommandContext& ctx, controller::Store& store,
                                        const api::ObjectKey& key, const TaskLogOptions& options) {
  ProgramOutput output(ctx.out(), ctx.out_is_terminal());
  LogRenderer renderer(output);
  const auto done = [&] {
    renderer.EndLine();
    output.Finish();
  };
  std::string uid;  // the task followed; another uid under its name is another task
  int64_t after = 0;
  bool told_dropped = false;
  std::string last_progress;
  while (true) {
    // The task before its log: a finished phase read here means the log below is complete.
    auto task = store.Get(key);
    if (task.ok() && !uid.empty() && task->metadata.uid != uid) {
      task = api::NotFoundError("replaced");
    }
    if (!task.ok()) {
      done();
      if (task.status().code() == api::StatusCode::kNotFound) {
        return api::NotFoundError(NotFoundMessage(key));
      }
      return task.status();
    }
    uid = task->metadata.uid;
    if (api::Status printed = PrintNewEntries(store, uid, after, told_dropped, renderer);
        !printed.ok()) {
      done();
      return printed;
    }
    const bool finished = api::IsFinished(task->agent_task_status().phase);
    if (options.progress && !finished) {
      if (std::string progress = ProgressLine(*task); progress != last_progress) {
        ctx.err() << QualifiedName(key) << " "
                  << EscapeTerminalText(progress, TerminalLayout::kSingleLine) << "\n";
        last_progress = std::move(progress);
      }
    }
    if (finished || !options.follow) {
      done();
      if (finished) {
        ctx.out() << "=== " << EscapeTerminalText(OutcomeLine(*task), TerminalLayout::kSingleLine)
                  << "\n";
        ctx.out().flush();
      }
      return task;
    }
    if (ctx.interrupted()) {
      done();
      return api::CancelledError("interrupted while following " + QualifiedName(key));
    }
    store.WaitForChange(kMaxBlock);
  }
}

}  // namespace sbx::cli
