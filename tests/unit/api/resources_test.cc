#include "api/resources.h"

#include <gtest/gtest.h>

#include <iterator>

namespace sbx::api {
namespace {

TEST(KindTest, ParsesNamesPluralsAndShortNames) {
  EXPECT_EQ(*ParseKind("Sandbox"), Kind::kSandbox);
  EXPECT_EQ(*ParseKind("sandboxes"), Kind::kSandbox);
  EXPECT_EQ(*ParseKind("sb"), Kind::kSandbox);
  EXPECT_EQ(*ParseKind("aw"), Kind::kAgentWorker);
  EXPECT_EQ(*ParseKind("AgentWorkers"), Kind::kAgentWorker);
  EXPECT_EQ(*ParseKind("ws"), Kind::kWorkspace);
  EXPECT_EQ(ParseKind("pod").status().code(), StatusCode::kInvalidArgument);
}

// Kinds are stored and sent by name, but their values must not move either: new kinds are
// appended.
TEST(KindTest, ValuesOfExistingKindsDoNotChange) {
  EXPECT_EQ(static_cast<int>(Kind::kWorkspace), 0);
  EXPECT_EQ(static_cast<int>(Kind::kSandbox), 1);
  EXPECT_EQ(static_cast<int>(Kind::kAgentWorker), 2);
  EXPECT_EQ(static_cast<int>(Kind::kAgentTask), 3);
  EXPECT_EQ(static_cast<int>(Kind::kGitSource), 4);
  EXPECT_EQ(static_cast<int>(Kind::kAgentPool), 5);
  EXPECT_EQ(static_cast<int>(Kind::kNotifier), 6);
  EXPECT_EQ(kAllKinds[std::size(kAllKinds) - 1], Kind::kNotifier);
}

TEST(KindTest, NotifierWordsParse) {
  EXPECT_EQ(*ParseKind("Notifier"), Kind::kNotifier);
  EXPECT_EQ(*ParseKind("notifiers"), Kind::kNotifier);
  EXPECT_EQ(*ParseKind("nt"), Kind::kNotifier);
  EXPECT_EQ(KindName(Kind::kNotifier), "Notifier");
}

TEST(NotifierTest, TypeNamesParseBack) {
  for (NotifierType type : {NotifierType::kWebhook, NotifierType::kSlack}) {
    EXPECT_EQ(*ParseNotifierType(NotifierTypeName(type)), type);
  }
  EXPECT_EQ(NotifierTypeName(NotifierType::kWebhook), "webhook");
  EXPECT_EQ(NotifierTypeName(NotifierType::kSlack), "slack");
  EXPECT_EQ(ParseNotifierType("Slack").status().message(),
            "unsupported notifier type \"Slack\" (expected webhook|slack)");
}

TEST(NotifierTest, EventsAreExactlyTheDesignsReasons) {
  for (std::string_view event : kNotifierEvents) {
    EXPECT_TRUE(IsNotifierEvent(event)) << event;
  }
  EXPECT_EQ(std::size(kNotifierEvents), 9u);
  EXPECT_TRUE(IsNotifierEvent("PoolScalingLimited"));
  EXPECT_FALSE(IsNotifierEvent("taskfailed"));
  EXPECT_FALSE(IsNotifierEvent("TaskFailed "));
  EXPECT_FALSE(IsNotifierEvent(""));
}

TEST(ObjectTest, MakeObjectHasMatchingSpecAndStatus) {
  Object o = MakeObject(Kind::kAgentWorker, "w1");
  EXPECT_EQ(o.agent_worker_spec().executor.command, "codex");
  EXPECT_EQ(o.agent_worker_spec().workspace_directory, "/home/sandbox-agent/workspace");
  EXPECT_TRUE(o.conditions().empty());
  EXPECT_EQ(KeyOf(o).ToString(), "AgentWorker/default/w1");
}

TEST(ObjectDeathTest, WrongKindAccessorAborts) {
  Object o = MakeObject(Kind::kSandbox, "s");
  EXPECT_DEATH((void)o.agent_worker_spec(), "is a Sandbox, not a AgentWorker");
}

TEST(ConditionTest, SetConditionKeepsTransitionTimeWhileStatusIsUnchanged) {
  std::vector<Condition> cs;
  EXPECT_TRUE(SetCondition(cs, {"Ready", ConditionStatus::kFalse, "Creating", "", "", 1}, "t1"));
  EXPECT_TRUE(SetCondition(cs, {"Ready", ConditionStatus::kFalse, "Starting", "", "", 1}, "t2"));
  EXPECT_EQ(FindCondition(cs, "Ready")->last_transition_time, "t1");
  EXPECT_FALSE(SetCondition(cs, {"Ready", ConditionStatus::kFalse, "Starting", "", "", 1}, "t3"));
  EXPECT_TRUE(SetCondition(cs, {"Ready", ConditionStatus::kTrue, "Running", "", "", 1}, "t4"));
  EXPECT_EQ(FindCondition(cs, "Ready")->last_transition_time, "t4");
  EXPECT_EQ(cs.size(), 1u);
  EXPECT_EQ(FindCondition(cs, "Synced"), nullptr);
}

}  // namespace
}  // namespace sbx::api
