// Notices (DESIGN §8.3): each trigger fires once, on its transition only, and NotifierWants
// applies a Notifier's namespace, events, selector and suspend.
#include "api/notices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/conditions.h"

namespace sbx::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void Set(std::vector<Condition>& conditions, std::string_view type, ConditionStatus status,
         std::string reason = "Because", std::string message = "it says so") {
  SetCondition(conditions,
               Condition{std::string(type), status, std::move(reason), std::move(message), "", 0},
               "2026-12-06T12:00:00Z");
}

std::vector<std::string> Reasons(const NoticeChange& change) {
  std::vector<std::string> out;
  for (const Notice& n : change.add) {
    out.push_back(n.reason);
  }
  return out;
}

TEST(NoticesTest, ATaskTellsItsFinalPhaseOnceWithItsFacts) {
  Object before = MakeObject(Kind::kAgentTask, "t");
  before.agent_task_status().phase = TaskPhase::kRunning;
  Object after = before;
  AgentTaskStatus& s = after.agent_task_status();
  s.phase = TaskPhase::kFailed;
  s.worker = "pool-a-0";
  s.submitted_at = "2026-12-06T12:00:00Z";
  s.completed_at = "2026-12-06T12:00:42Z";
  s.usage.input_tokens = 1000;
  s.usage.output_tokens = 200;
  s.result.error = {"connection_failed", "the executor went away"};
  NoticeChange change = NoticesOf(before, after);
  ASSERT_EQ(change.add.size(), 1u);
  const Notice& n = change.add[0];
  EXPECT_EQ(n.reason, "TaskFailed");
  EXPECT_EQ(n.type, "Warning");
  EXPECT_EQ(n.message, "connection_failed: the executor went away");
  EXPECT_THAT(n.task_json, HasSubstr(R"("durationSeconds":42)"));
  EXPECT_THAT(n.task_json, HasSubstr(R"("phase":"Failed")"));
  EXPECT_THAT(n.task_json, HasSubstr(R"("worker":"pool-a-0")"));
  EXPECT_THAT(n.task_json, HasSubstr(R"("inputTokens":1000)"));
  // A later write of the finished task (its TTL, a label) tells nothing again.
  EXPECT_TRUE(NoticesOf(after, after).empty());
  // Each final phase has its reason; a retry (Queued) is no final phase.
  for (const auto& [phase, reason] : {std::pair{TaskPhase::kSucceeded, "TaskSucceeded"},
                                      std::pair{TaskPhase::kTimedOut, "TaskTimedOut"},
                                      std::pair{TaskPhase::kCancelled, "TaskCancelled"}}) {
    after.agent_task_status().phase = phase;
    EXPECT_THAT(Reasons(NoticesOf(before, after)), ElementsAre(reason));
  }
  after.agent_task_status().phase = TaskPhase::kSucceeded;
  EXPECT_EQ(NoticesOf(before, after).add[0].type, "Normal");
  after.agent_task_status().phase = TaskPhase::kQueued;
  EXPECT_TRUE(NoticesOf(before, after).empty());
}

TEST(NoticesTest, AWorkerNotReadyIsDueAfterSixtySecondsAndWithdrawnWhenReadyAgain) {
  Object before = MakeObject(Kind::kAgentWorker, "w");
  Set(before.agent_worker_status().conditions, condition::kReady, ConditionStatus::kTrue);
  Object after = before;
  Set(after.agent_worker_status().conditions, condition::kReady, ConditionStatus::kFalse,
      "ExecutorNotConnected", "no executor has registered");
  NoticeChange down = NoticesOf(before, after);
  ASSERT_THAT(Reasons(down), ElementsAre("WorkerNotReady"));
  EXPECT_EQ(down.add[0].delay, std::chrono::seconds(60));
  EXPECT_EQ(down.add[0].message, "ExecutorNotConnected: no executor has registered");
  // Still False: nothing new.
  EXPECT_TRUE(NoticesOf(after, after).empty());
  // True again: the pending notice is withdrawn.
  NoticeChange up = NoticesOf(after, before);
  EXPECT_THAT(up.add, IsEmpty());
  EXPECT_THAT(up.withdraw, ElementsAre("WorkerNotReady"));
}

TEST(NoticesTest, TheFirstExitOfACrashLoopTellsAndTheNextOnesDoNot) {
  Object running = MakeObject(Kind::kAgentWorker, "w");
  Set(running.agent_worker_status().conditions, condition::kReady, ConditionStatus::kTrue);
  running.agent_worker_status().executor.restarts = 3;  // restarted before, then ran fine
  Object crashed = running;
  Set(crashed.agent_worker_status().conditions, condition::kReady, ConditionStatus::kFalse);
  crashed.agent_worker_status().executor.last_exit_reason = "exit code 1";
  crashed.agent_worker_status().executor.next_launch_after = "2026-12-06T12:00:10Z";
  EXPECT_THAT(Reasons(NoticesOf(running, crashed)),
              ElementsAre("WorkerNotReady", "ExecutorCrashLooping"));
  // Relaunched (the delay cleared), crashed again while not Ready: the loop goes on, no repeat.
  Object relaunched = crashed;
  relaunched.agent_worker_status().executor.next_launch_after.clear();
  relaunched.agent_worker_status().executor.restarts = 4;
  Object again = relaunched;
  again.agent_worker_status().executor.next_launch_after = "2026-12-06T12:00:30Z";
  EXPECT_TRUE(NoticesOf(relaunched, again).empty());
}

TEST(NoticesTest, ConditionsTurningTellOnceForGitSourcesWorkspacesAndPools) {
  Object gs = MakeObject(Kind::kGitSource, "g");
  Object gs_failed = gs;
  Set(gs_failed.git_source_status().conditions, condition::kReady, ConditionStatus::kFalse,
      "FetchFailed", "cannot reach the repository");
  EXPECT_THAT(Reasons(NoticesOf(gs, gs_failed)), ElementsAre("GitSourceFailed"));
  EXPECT_TRUE(NoticesOf(gs_failed, gs_failed).empty());

  Object ws = MakeObject(Kind::kWorkspace, "ws");
  Object over = ws;
  Set(over.workspace_status().conditions, condition::kBudgetExceeded, ConditionStatus::kTrue);
  EXPECT_THAT(Reasons(NoticesOf(ws, over)), ElementsAre("BudgetExceeded"));
  EXPECT_TRUE(NoticesOf(over, over).empty());

  Object pool = MakeObject(Kind::kAgentPool, "p");
  Object limited = pool;
  Set(limited.agent_pool_status().conditions, condition::kScalingLimited, ConditionStatus::kTrue);
  EXPECT_THAT(Reasons(NoticesOf(pool, limited)), ElementsAre("PoolScalingLimited"));

  // Every reason a notice can have is one a Notifier may subscribe to.
  for (std::string_view reason :
       {notice::kTaskSucceeded, notice::kTaskFailed, notice::kTaskTimedOut, notice::kTaskCancelled,
        notice::kWorkerNotReady, notice::kExecutorCrashLooping, notice::kGitSourceFailed,
        notice::kBudgetExceeded, notice::kPoolScalingLimited}) {
    EXPECT_TRUE(IsNotifierEvent(reason)) << reason;
  }
}

TEST(NoticesTest, ANotifierHearsItsEventsAboutSelectedObjectsOfItsNamespace) {
  Object nt = MakeObject(Kind::kNotifier, "alerts", "team-a");
  nt.notifier_spec().events = {"TaskFailed"};
  nt.notifier_spec().selector.match_labels = {{"team", "a"}};
  Object task = MakeObject(Kind::kAgentTask, "t", "team-a");
  task.metadata.labels = {{"team", "a"}, {"x", "y"}};
  EXPECT_TRUE(NotifierWants(nt, task, "TaskFailed"));
  EXPECT_FALSE(NotifierWants(nt, task, "TaskSucceeded"));  // not in its events
  Object other_team = task;
  other_team.metadata.labels = {{"team", "b"}};
  EXPECT_FALSE(NotifierWants(nt, other_team, "TaskFailed"));
  Object elsewhere = MakeObject(Kind::kAgentTask, "t", "team-b");
  elsewhere.metadata.labels = task.metadata.labels;
  EXPECT_FALSE(NotifierWants(nt, elsewhere, "TaskFailed"));  // another namespace
  Object everything = nt;
  everything.notifier_spec().selector.match_labels.clear();
  EXPECT_TRUE(NotifierWants(everything, other_team, "TaskFailed"));
  Object suspended = nt;
  suspended.notifier_spec().suspend = true;
  EXPECT_FALSE(NotifierWants(suspended, task, "TaskFailed"));
  Object deleting = nt;
  deleting.metadata.deletion_timestamp = "2026-12-06T12:00:00Z";
  EXPECT_FALSE(NotifierWants(deleting, task, "TaskFailed"));
}

}  // namespace
}  // namespace sbx::api
