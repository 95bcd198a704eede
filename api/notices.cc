#include "api/notices.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/conditions.h"
#include "api/rfc3339.h"

namespace sbx::api {
namespace {

std::string MessageOf(const std::vector<Condition>& conditions, std::string_view type) {
  const Condition* c = FindCondition(conditions, type);
  return c != nullptr ? (c->reason.empty() ? c->message : c->reason + ": " + c->message) : "";
}

// Whether condition `type` turns to `to` in this write.
bool Turns(const std::vector<Condition>& before, const std::vector<Condition>& after,
           std::string_view type, ConditionStatus to) {
  return ConditionStatusOf(before, type) != to && ConditionStatusOf(after, type) == to;
}

std::string_view TaskReason(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kSucceeded:
      return notice::kTaskSucceeded;
    case TaskPhase::kFailed:
      return notice::kTaskFailed;
    case TaskPhase::kTimedOut:
      return notice::kTaskTimedOut;
    case TaskPhase::kCancelled:
      return notice::kTaskCancelled;
    default:
      return "";
  }
}

std::string TaskJson(const AgentTaskStatus& s) {
  nlohmann::json usage{{"inputTokens", s.usage.input_tokens},
                       {"cachedInputTokens", s.usage.cached_input_tokens},
                       {"outputTokens", s.usage.output_tokens},
                       {"reasoningTokens", s.usage.reasoning_tokens},
                       {"computeSeconds", static_cast<double>(s.usage.compute_millis) / 1000.0}};
  if (!s.usage.cost.empty()) {
    usage["cost"] = s.usage.cost;
  }
  nlohmann::json task{
      {"phase", std::string(TaskPhaseName(s.phase))}, {"worker", s.worker}, {"usage", usage}};
  // From the first submission to the end; null when either is unknown.
  const std::optional<WallTime> from = ParseRfc3339(s.submitted_at);
  const std::optional<WallTime> to = ParseRfc3339(s.completed_at);
  task["durationSeconds"] =
      from && to && *to >= *from
          ? nlohmann::json(std::chrono::duration_cast<std::chrono::seconds>(*to - *from).count())
          : nlohmann::json(nullptr);
  return task.dump();
}

std::string TaskMessage(const AgentTaskStatus& s) {
  if (!s.result.error.message.empty()) {
    return s.result.error.code.empty() ? s.result.error.message
                                       : s.result.error.code + ": " + s.result.error.message;
  }
  return "task " + std::string(TaskPhaseName(s.phase));
}

}  // namespace

bool MayNotice(const Object& after) {
  switch (after.kind) {
    case Kind::kAgentTask:
      return IsFinished(after.agent_task_status().phase);
    case Kind::kAgentWorker:
      return ConditionStatusOf(after.agent_worker_status().conditions, condition::kReady) !=
                 ConditionStatus::kUnknown ||
             !after.agent_worker_status().executor.next_launch_after.empty();
    case Kind::kGitSource:
      return ConditionStatusOf(after.git_source_status().conditions, condition::kReady) ==
             ConditionStatus::kFalse;
    case Kind::kWorkspace:
      return ConditionStatusOf(after.workspace_status().conditions, condition::kBudgetExceeded) ==
             ConditionStatus::kTrue;
    case Kind::kAgentPool:
      return ConditionStatusOf(after.agent_pool_status().conditions, condition::kScalingLimited) ==
             ConditionStatus::kTrue;
    default:
      return false;
  }
}

NoticeChange NoticesOf(const Object& before, const Object& after) {
  NoticeChange change;
  if (!MayNotice(after) || before.kind != after.kind) {
    return change;
  }
  const auto warn = [&](std::string_view reason, std::string message) {
    change.add.push_back({std::string(reason), "Warning", std::move(message), {}, ""});
  };
  switch (after.kind) {
    case Kind::kAgentTask: {
      const AgentTaskStatus& a = after.agent_task_status();
      if (IsFinished(before.agent_task_status().phase)) {
        break;
      }
      Notice n{std::string(TaskReason(a.phase)),
               a.phase == TaskPhase::kSucceeded ? "Normal" : "Warning",
               TaskMessage(a),
               {},
               TaskJson(a)};
      change.add.push_back(std::move(n));
      break;
    }
    case Kind::kAgentWorker: {
      const AgentWorkerStatus& b = before.agent_worker_status();
      const AgentWorkerStatus& a = after.agent_worker_status();
      if (Turns(b.conditions, a.conditions, condition::kReady, ConditionStatus::kFalse)) {
        change.add.push_back({std::string(notice::kWorkerNotReady), "Warning",
                              MessageOf(a.conditions, condition::kReady),
                              notice::kWorkerNotReadyAfter, ""});
      } else if (Turns(b.conditions, a.conditions, condition::kReady, ConditionStatus::kTrue)) {
        change.withdraw.emplace_back(notice::kWorkerNotReady);
      }
      const bool backoff_starts =
          b.executor.next_launch_after.empty() && !a.executor.next_launch_after.empty();
      const bool first_of_episode =
          b.executor.restarts == 0 ||
          ConditionStatusOf(b.conditions, condition::kReady) == ConditionStatus::kTrue;
      if (backoff_starts && first_of_episode) {
        warn(notice::kExecutorCrashLooping, "the executor exited (" + a.executor.last_exit_reason +
                                                "); the next launch waits until " +
                                                a.executor.next_launch_after);
      }
      break;
    }
    case Kind::kGitSource:
      if (Turns(before.git_source_status().conditions, after.git_source_status().conditions,
                condition::kReady, ConditionStatus::kFalse)) {
        warn(notice::kGitSourceFailed,
             MessageOf(after.git_source_status().conditions, condition::kReady));
      }
      break;
    case Kind::kWorkspace:
      if (Turns(before.workspace_status().conditions, after.workspace_status().conditions,
                condition::kBudgetExceeded, ConditionStatus::kTrue)) {
        warn(notice::kBudgetExceeded,
             MessageOf(after.workspace_status().conditions, condition::kBudgetExceeded));
      }
      break;
    case Kind::kAgentPool:
      if (Turns(before.agent_pool_status().conditions, after.agent_pool_status().conditions,
                condition::kScalingLimited, ConditionStatus::kTrue)) {
        warn(notice::kPoolScalingLimited,
             MessageOf(after.agent_pool_status().conditions, condition::kScalingLimited));
      }
      break;
    default:
      break;
  }
  return change;
}

bool NotifierWants(const Object& notifier, const Object& object, std::string_view reason) {
  if (notifier.kind != Kind::kNotifier ||
      notifier.metadata.namespace_ != object.metadata.namespace_ ||
      !notifier.metadata.deletion_timestamp.empty()) {
    return false;
  }
  const NotifierSpec& spec = notifier.notifier_spec();
  if (spec.suspend ||
      std::find(spec.events.begin(), spec.events.end(), reason) == spec.events.end()) {
    return false;
  }
  for (const auto& [key, value] : spec.selector.match_labels) {
    const auto it = object.metadata.labels.find(key);
    if (it == object.metadata.labels.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

}  // namespace sbx::api
