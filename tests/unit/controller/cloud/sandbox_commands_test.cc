#include "controller/cloud/sandbox_commands.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_cloud_clients.h"

namespace sbx::controller {
namespace {

namespace db = databricks;

class SandboxCommandsTest : public ::testing::Test {
 protected:
  SandboxCommandsTest() {
    db::Sandbox running;
    running.sandbox_id = "sbx-1";
    running.state = db::SandboxState::kRunning;
    clouds_.api("team/default").Put(running);
  }

  sbx::testing::FakeCloudClients clouds_;
  CloudSandboxCommands commands_{clouds_};
};

TEST_F(SandboxCommandsTest, RunsTheCommandInTheWorkspacesSandbox) {
  clouds_.api("team/default").SetExecHandler([](const std::string&, const db::ExecRequest& r) {
    db::ExecResult result;
    result.status = db::ExecStatus::kCompleted;
    result.exit_code = 3;
    result.stdout_text = "out:" + r.args.at(0);
    result.stderr_text = "err";
    result.truncated = true;
    return result;
  });
  CommandRequest request{
      .cmd = "/bin/echo", .args = {"hi"}, .env = {{"A", "1"}}, .timeout = std::chrono::seconds(9)};
  auto r = commands_.Run("team", "default", "sbx-1", request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, CommandOutcome::kCompleted);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out:hi");
  EXPECT_EQ(r->stderr_text, "err");
  EXPECT_TRUE(r->truncated);
  const std::vector<db::ExecRequest> sent = clouds_.api("team/default").execs();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].cmd, "/bin/echo");
  EXPECT_EQ(sent[0].envs.at("A"), "1");
  EXPECT_EQ(sent[0].execution_timeout, std::chrono::seconds(9));
}

TEST_F(SandboxCommandsTest, ATimeoutIsAnOutcomeNotAnError) {
  clouds_.api("team/default").SetExecHandler([](const std::string&, const db::ExecRequest&) {
    db::ExecResult result;
    result.status = db::ExecStatus::kTimedOut;
    return result;
  });
  auto r = commands_.Run("team", "default", "sbx-1", CommandRequest{.cmd = "/bin/sleep"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, CommandOutcome::kTimedOut);
  EXPECT_FALSE(r->exit_code.has_value());
}

TEST_F(SandboxCommandsTest, ErrorsOfTheWorkspaceAndTheSandboxPassThrough) {
  clouds_.SetMissing("team/gone");
  EXPECT_EQ(
      commands_.Run("team", "gone", "sbx-1", CommandRequest{.cmd = "/bin/true"}).status().code(),
      api::StatusCode::kNotFound);
  EXPECT_EQ(
      commands_.Run("team", "default", "sbx-2", CommandRequest{.cmd = "/bin/true"}).status().code(),
      api::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      commands_.Run("team", "default", "", CommandRequest{.cmd = "/bin/true"}).status().code(),
      api::StatusCode::kInvalidArgument);
  EXPECT_EQ(commands_.Run("team", "default", "sbx-1", CommandRequest{}).status().code(),
            api::StatusCode::kInvalidArgument);
  EXPECT_TRUE(clouds_.api("team/default").execs().empty());
}

}  // namespace
}  // namespace sbx::controller
