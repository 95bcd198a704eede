// Notices: what a status change tells a Notifier (DESIGN §8.3). A pure function of an object's
// status before and after one write; the store calls it inside that write's transaction and puts
// what it returns in its notification outbox, so a notice exists iff its change was committed.
//
// The triggers, each firing once per transition:
//   TaskSucceeded|TaskFailed|TaskTimedOut|TaskCancelled  an AgentTask's phase becomes that final
//                                                        phase (not per attempt: a retry is
//                                                        Queued, not final)
//   WorkerNotReady        an AgentWorker's Ready turns False; due 60 s later, and withdrawn if
//                         Ready turns True before (so it means "False for 60 s")
//   ExecutorCrashLooping  an AgentWorker's crash-loop back-off starts: a delay before the next
//                         launch is set after an exit, and the executor had not been restarted
//                         yet or the worker was Ready (the first exit of an episode)
//   GitSourceFailed       a GitSource's Ready turns False
//   BudgetExceeded        a Workspace's BudgetExceeded turns True
//   PoolScalingLimited    an AgentPool's ScalingLimited turns True
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"

namespace sbx::api {

namespace notice {
inline constexpr std::string_view kTaskSucceeded = "TaskSucceeded";
inline constexpr std::string_view kTaskFailed = "TaskFailed";
inline constexpr std::string_view kTaskTimedOut = "TaskTimedOut";
inline constexpr std::string_view kTaskCancelled = "TaskCancelled";
inline constexpr std::string_view kWorkerNotReady = "WorkerNotReady";
inline constexpr std::string_view kExecutorCrashLooping = "ExecutorCrashLooping";
inline constexpr std::string_view kGitSourceFailed = "GitSourceFailed";
inline constexpr std::string_view kBudgetExceeded = "BudgetExceeded";
inline constexpr std::string_view kPoolScalingLimited = "PoolScalingLimited";
// How long an AgentWorker's Ready stays False before WorkerNotReady is due.
inline constexpr std::chrono::seconds kWorkerNotReadyAfter{60};
}  // namespace notice

struct Notice {
  std::string reason;  // one of notice::k…
  std::string type;    // "Normal" (TaskSucceeded) | "Warning"
  std::string message;
  std::chrono::milliseconds delay{0};  // due this long after the write
  // An AgentTask's facts, as the payload's `task` (JSON: {"phase","worker","usage",
  // "durationSeconds"}); "" for other kinds.
  std::string task_json;
  friend bool operator==(const Notice&, const Notice&) = default;
};

struct NoticeChange {
  std::vector<Notice> add;
  // Reasons whose notices for this object, not yet due, are withdrawn (WorkerNotReady once Ready
  // is True again).
  std::vector<std::string> withdraw;
  bool empty() const { return add.empty() && withdraw.empty(); }
};

// Whether a status write that leaves `after` as it is can produce a notice at all: cheap, so
// that the store decodes the status before the write only when it can matter.
bool MayNotice(const Object& after);

// What the status write from `before` to `after` (the same object) tells.
NoticeChange NoticesOf(const Object& before, const Object& after);

// Whether `notifier` (a Notifier) hears notice `reason` about `object`: the same namespace, not
// suspended nor being deleted, `reason` in spec.events, and every spec.selector.matchLabels pair
// among the object's labels (no selector: every object of the namespace).
bool NotifierWants(const Object& notifier, const Object& object, std::string_view reason);

}  // namespace sbx::api
