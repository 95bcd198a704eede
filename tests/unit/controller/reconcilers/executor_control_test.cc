#include "controller/reconcilers/executor_control.h"

#include <gtest/gtest.h>

#include "controller/reconcilers/scripts/executor_scripts.h"

namespace sbx::controller {
namespace {

TEST(ExecutorReportTest, ParsesTheFieldsAndTheLogTail) {
  const ExecutorReport r = ParseExecutorReport(
      "action=probed\npid=4242\nalive=1\nenv=env_1\nboot=b1\ncurrent_boot=b1\nworkspace=1\n"
      "command=0\n---log---\nline one\nx=y is log, not a field\n");
  EXPECT_EQ(r.action, "probed");
  EXPECT_EQ(r.pid, 4242);
  EXPECT_TRUE(r.alive);
  EXPECT_EQ(r.env, "env_1");
  EXPECT_EQ(r.boot, "b1");
  EXPECT_EQ(r.current_boot, "b1");
  EXPECT_TRUE(r.workspace_exists);
  EXPECT_FALSE(r.command_found);
  EXPECT_EQ(r.log_tail, "line one\nx=y is log, not a field\n");
  EXPECT_TRUE(r.Running("env_1"));
  EXPECT_FALSE(r.Running("env_2"));
}

TEST(ExecutorReportTest, EmptyFieldsAndJunkLeaveTheDefaults) {
  const ExecutorReport r =
      ParseExecutorReport("bash: warning\naction=launched\npid=\nalive=0\nenv=\nboot=\nweird=1\n");
  EXPECT_EQ(r.action, "launched");
  EXPECT_EQ(r.pid, 0);
  EXPECT_FALSE(r.alive);
  EXPECT_EQ(r.log_tail, "");
  // No boot recorded: nothing was launched in this boot, even for an empty environment id.
  EXPECT_FALSE(r.LaunchedThisBoot(""));
}

TEST(ExecutorReportTest, ALaunchOfAnotherBootOrEnvironmentIsNotOurs) {
  ExecutorReport r = ParseExecutorReport("alive=1\nenv=env_1\nboot=b1\ncurrent_boot=b2\n");
  EXPECT_FALSE(r.LaunchedThisBoot("env_1"));
  EXPECT_FALSE(r.Running("env_1"));
  r.current_boot = "b1";
  EXPECT_TRUE(r.LaunchedThisBoot("env_1"));
  r.alive = false;
  EXPECT_TRUE(r.LaunchedThisBoot("env_1"));
  EXPECT_FALSE(r.Running("env_1"));
}

TEST(ExecutorReportTest, LastLineSkipsBlankLinesAndKeepsTheEnd) {
  EXPECT_EQ(LastLine("first\nsecond\n  \n\n"), "second");
  EXPECT_EQ(LastLine(std::string(400, 'x') + "END").size(), 300u);
}

// The scripts are the files in the tree, with their contract on top.
TEST(ExecutorScriptsTest, AreCompiledInWhole) {
  EXPECT_EQ(scripts::kExecutor.substr(0, 12), "#!/bin/bash\n");
  EXPECT_NE(scripts::kExecutor.find("report launched"), std::string_view::npos);
  EXPECT_EQ(scripts::kExecutor.back(), '\n');
  EXPECT_NE(scripts::kStopExecutor.find("rm -f \"$d/pid\""), std::string_view::npos);
}

}  // namespace
}  // namespace sbx::controller
