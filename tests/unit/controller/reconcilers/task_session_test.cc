#include "controller/reconcilers/task_session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_agents_api.h"
#include "tests/fakes/fake_sandbox_api.h"
#include "tests/support/fake_clock.h"
#include "tests/support/script_sandbox.h"

namespace sbx::controller {
namespace {

namespace fs = std::filesystem;
using testing::Alive;
using testing::ScriptSandbox;
using testing::Slurp;

// The scripts run for real (ScriptSandbox: bash, a stand-in home, a `codex` that sleeps); the
// APIs are fakes.
class TaskSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sandbox_ = std::make_unique<ScriptSandbox>("sbx-ts-test-", "boot-1");
    sandbox_->SetCodex("echo \"codex $*\"; echo \"key=${CODEX_API_KEY:+set}\"; exec sleep 300");
    ASSERT_TRUE(sandboxes_.Create("sb-1", {}, {}).ok());
    sandboxes_.SetState("sb-1", databricks::SandboxState::kRunning);
    sandboxes_.SetExecHandler([this](const std::string&, const databricks::ExecRequest& req) {
      return sandbox_->Run(req);
    });
    // As if each task's turn had run: the service refuses to delete a session that never ran
    // one (reference §1.5, observed), which the last test but one covers.
    agents_.SetStrictDelete(false);
  }
  void TearDown() override { sandbox_.reset(); }

  TaskSessionTarget Target(const std::string& uid = "u-1", bool keep = false) {
    return TaskSessionTarget{
        .owner = {{api::Kind::kAgentTask, "default", "fix-1"}, uid, "default/default", "w-1"},
        .sandbox_id = "sb-1",
        .command = "codex",
        .keep_workspace = keep};
  }
  static TaskSessionSpec Spec() {
    TaskSessionSpec spec;
    spec.session.model = "gpt-5-codex";
    spec.launch.envs = {{"CODEX_API_KEY", "sk-executor"}};
    return spec;
  }
  fs::path TaskDir(const std::string& uid) const { return sandbox_->home() / "tasks" / uid; }
  fs::path ExecutorDir(const std::string& uid) const {
    return sandbox_->executor_dir("tasks/" + uid);
  }
  int ExecutorPid(const std::string& uid) const { return sandbox_->ExecutorPid("tasks/" + uid); }
  // The executor writes its log asynchronously: poll for the line.
  bool LogHas(const std::string& uid, const std::string& text) {
    for (int i = 0; i < 300; ++i) {
      if (Slurp(ExecutorDir(uid) / "log").find(text) != std::string::npos) {
        return true;
      }
      usleep(10'000);
    }
    return false;
  }

  std::unique_ptr<ScriptSandbox> sandbox_;
  ::sbx::testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
  EventRecorder events_{*store_, clock_};
  SessionLifecycle lifecycle_{*store_, events_, clock_};
  ::sbx::testing::FakeAgentsApi agents_;
  ::sbx::testing::FakeSandboxApi sandboxes_;
  ExecutorControl executor_{""};
  TaskSession sessions_{lifecycle_, executor_, events_, {}};
};

TEST_F(TaskSessionTest, OpensASessionInTheTasksDirectoryWithItsOwnExecutorAndClosesAll) {
  executor_ = ExecutorControl(sandbox_->boot_marker());
  auto opened = sessions_.Open(Target(), Spec(), agents_, sandboxes_, {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->metadata.at("sbx.dev/uid"), "u-1");
  // The worker it runs on, for whoever reads the service's sessions (and the pool chaos test).
  EXPECT_EQ(opened->metadata.at("sbx.dev/worker"), "default/w-1");
  EXPECT_EQ(opened->metadata.at("sbx.dev/task"), "default/fix-1");
  EXPECT_EQ(TaskSession::WorkspaceDirectory("u-1"), "/home/sandbox-agent/tasks/u-1");
  EXPECT_TRUE(fs::is_directory(TaskDir("u-1"))) << "made by the launch";
  ASSERT_TRUE(Alive(ExecutorPid("u-1")));
  EXPECT_TRUE(LogHas("u-1", "exec-server --remote http://127.0.0.1:9/v1 --environment-id " +
                                opened->environment.id));
  EXPECT_TRUE(LogHas("u-1", "key=set"));
  EXPECT_EQ(Slurp(ExecutorDir("u-1") / "env"), opened->environment.id + "\n");
  EXPECT_TRUE(*sessions_.HasOpen(Target()));

  // Opening again (a pass after a crash) adopts the session and leaves the executor running.
  const int pid = ExecutorPid("u-1");
  auto again = sessions_.Open(Target(), Spec(), agents_, sandboxes_, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, opened->id);
  EXPECT_EQ(agents_.Calls("create"), 1);
  EXPECT_EQ(ExecutorPid("u-1"), pid);

  // A file the agent wrote; another task's directory is not touched.
  std::ofstream(TaskDir("u-1") / "out.txt") << "done\n";
  fs::create_directories(TaskDir("u-2"));

  auto closed = sessions_.Close(Target(), agents_, &sandboxes_, {});
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(*closed);
  EXPECT_FALSE(Alive(pid));
  EXPECT_FALSE(fs::exists(TaskDir("u-1")));
  EXPECT_FALSE(fs::exists(ExecutorDir("u-1")));
  EXPECT_TRUE(fs::exists(TaskDir("u-2")));
  EXPECT_FALSE(agents_.HasSession(opened->id));
  EXPECT_FALSE(*sessions_.HasOpen(Target()));

  // Closing again changes nothing and costs no delete and no exec.
  const int deletes = agents_.Calls("delete");
  const int execs = sandboxes_.Calls("exec");
  ASSERT_TRUE(*sessions_.Close(Target(), agents_, &sandboxes_, {}));
  EXPECT_EQ(agents_.Calls("delete"), deletes);
  EXPECT_EQ(sandboxes_.Calls("exec"), execs);
}

TEST_F(TaskSessionTest, KeepWorkspaceKeepsTheTasksFilesAndAGoneSandboxStillClosesTheSession) {
  executor_ = ExecutorControl(sandbox_->boot_marker());
  auto opened = sessions_.Open(Target("u-3", /*keep=*/true), Spec(), agents_, sandboxes_, {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::ofstream(TaskDir("u-3") / "report.md") << "# kept\n";
  ASSERT_TRUE(*sessions_.Close(Target("u-3", true), agents_, &sandboxes_, {}));
  EXPECT_EQ(Slurp(TaskDir("u-3") / "report.md"), "# kept\n");
  EXPECT_FALSE(fs::exists(ExecutorDir("u-3"))) << "the executor's own directory goes anyway";

  // The sandbox is gone (deleted with its worker): only the session is left to close.
  auto other = sessions_.Open(Target("u-4"), Spec(), agents_, sandboxes_, {});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(*sessions_.Close(Target("u-4"), agents_, /*sandboxes=*/nullptr, {}));
  EXPECT_FALSE(agents_.HasSession(other->id));
  EXPECT_FALSE(*sessions_.HasOpen(Target("u-4")));
}

TEST_F(TaskSessionTest, AMissingCommandIsAFailedPreconditionAndTheSessionStaysToBeClosed) {
  executor_ = ExecutorControl(sandbox_->boot_marker());
  TaskSessionTarget t = Target("u-5");
  t.command = "no-such-codex";
  auto opened = sessions_.Open(t, Spec(), agents_, sandboxes_, {});
  ASSERT_EQ(opened.status().code(), api::StatusCode::kFailedPrecondition) << opened.status();
  EXPECT_NE(opened.status().message().find("no-such-codex"), std::string::npos);
  EXPECT_TRUE(*sessions_.HasOpen(t)) << "the session was made: Close must find it";
  // No turn ran in it: the service refuses the delete; it is tried again, then abandoned.
  agents_.SetStrictDelete(true);
  auto closed = sessions_.Close(t, agents_, &sandboxes_, {});
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(*closed) << "a refusal still being retried";
  EXPECT_TRUE(*sessions_.HasOpen(t));
  clock_.Advance(reconcilers_internal::SessionDeletePolicy{}.give_up_after +
                 std::chrono::seconds(1));
  ASSERT_TRUE(*sessions_.Close(t, agents_, &sandboxes_, {}));
  EXPECT_FALSE(*sessions_.HasOpen(t)) << "abandoned: recorded, not retried for ever";
}

// A failed close (the exec-sync fails) keeps the rows: nothing is forgotten before it is done.
TEST_F(TaskSessionTest, ACloseThatCannotReachTheSandboxForgetsNothing) {
  executor_ = ExecutorControl(sandbox_->boot_marker());
  auto opened = sessions_.Open(Target(), Spec(), agents_, sandboxes_, {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  sandboxes_.FailNext("exec", api::UnavailableError("HTTP 503"));
  EXPECT_EQ(sessions_.Close(Target(), agents_, &sandboxes_, {}).status().code(),
            api::StatusCode::kUnavailable);
  EXPECT_TRUE(agents_.HasSession(opened->id));
  EXPECT_TRUE(*sessions_.HasOpen(Target()));
  ASSERT_TRUE(*sessions_.Close(Target(), agents_, &sandboxes_, {}));
  EXPECT_FALSE(agents_.HasSession(opened->id));
}

}  // namespace
}  // namespace sbx::controller
