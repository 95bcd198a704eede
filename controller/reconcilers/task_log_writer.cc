#include "controller/reconcilers/task_log_writer.h"

#include <algorithm>

namespace sbx::controller {
namespace {

using LogKind = Store::TaskLogKind;

bool ItemLevel(LogKind kind) {
  return kind == LogKind::kCommand || kind == LogKind::kCommandResult ||
         kind == LogKind::kAssistant;
}

bool Delta(LogKind kind) {
  return kind == LogKind::kAssistantDelta || kind == LogKind::kOutputDelta;
}

}  // namespace

Store::TaskLogEntry TaskLogLine(LogKind kind, std::string text, std::string item_id) {
  Store::TaskLogEntry e;
  e.kind = kind;
  e.text = std::move(text);
  e.item_id = std::move(item_id);
  return e;
}

TaskLogWriter::Book& TaskLogWriter::BookLocked(const std::string& task_uid) {
  auto [it, inserted] = books_.try_emplace(task_uid);
  if (inserted) {
    if (api::StatusOr<Store::TaskLogPage> page = store_.ReadTaskLog(task_uid); page.ok()) {
      for (const Store::TaskLogEntry& e : page->entries) {
        if (ItemLevel(e.kind)) {
          it->second.logged.emplace(e.kind, e.item_id);
        }
        if (e.kind == LogKind::kCommandResult || e.kind == LogKind::kAssistant) {
          it->second.finished.insert(e.item_id);
        }
      }
    }
  }
  return it->second;
}

api::StatusOr<int> TaskLogWriter::Append(const api::ObjectKey& task, const std::string& task_uid,
                                         const std::vector<Store::TaskLogEntry>& entries) {
  std::lock_guard lock(mu_);
  Book& book = BookLocked(task_uid);
  std::vector<Store::TaskLogEntry> fresh;
  std::vector<Key> added;
  std::set<std::string> finished;
  for (const Store::TaskLogEntry& e : entries) {
    if (Delta(e.kind) && (book.finished.count(e.item_id) != 0 || finished.count(e.item_id) != 0)) {
      continue;
    }
    if (ItemLevel(e.kind)) {
      Key key{e.kind, e.item_id};
      if (book.logged.count(key) != 0 ||
          std::find(added.begin(), added.end(), key) != added.end()) {
        continue;
      }
      added.push_back(std::move(key));
      if (e.kind != LogKind::kCommand) {
        finished.insert(e.item_id);
      }
    }
    fresh.push_back(e);
  }
  if (fresh.empty()) {
    return 0;
  }
  RETURN_IF_ERROR(store_.AppendTaskLog(task, task_uid, fresh).status());
  book.logged.insert(added.begin(), added.end());
  book.finished.insert(finished.begin(), finished.end());
  return static_cast<int>(fresh.size());
}

void TaskLogWriter::Forget(const std::string& task_uid) {
  std::lock_guard lock(mu_);
  books_.erase(task_uid);
}

std::vector<Store::TaskLogEntry> ItemLogEntries(const std::vector<openai::Item>& items,
                                                bool final) {
  std::vector<Store::TaskLogEntry> out;
  for (const openai::Item& item : items) {
    const bool done = final || item.status != openai::ItemStatus::kInProgress;
    if (item.type == openai::ItemType::kMessage && item.role == "assistant" && done) {
      out.push_back(TaskLogLine(LogKind::kAssistant, item.text, item.id));
    } else if (item.type == openai::ItemType::kCommandExecution) {
      out.push_back(TaskLogLine(LogKind::kCommand, "$ " + item.command, item.id));
      if (done) {
        Store::TaskLogEntry result = TaskLogLine(LogKind::kCommandResult, item.output, item.id);
        result.exit_code = item.exit_code;
        out.push_back(std::move(result));
      }
    }
  }
  return out;
}

}  // namespace sbx::controller
