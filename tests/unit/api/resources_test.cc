#include "api/resources.h"

#include <gtest/gtest.h>

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
