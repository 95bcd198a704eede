#include "controller/reconcilers/workspace_of.h"

#include <gtest/gtest.h>

#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

using api::Kind;
using api::ObjectKey;

class WorkspaceOfTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{}); }
  void Apply(const api::Object& o) { ASSERT_TRUE(store_->Apply({o}, {}).ok()); }
  std::string Of(Kind kind, const std::string& name) {
    auto ws = WorkspaceOf(*store_, ObjectKey{kind, "team", name});
    EXPECT_TRUE(ws.ok()) << ws.status();
    return ws.ok() && ws->has_value() ? **ws : "<none>";
  }
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(WorkspaceOfTest, FollowsTheReferencesDownToTheSandboxsWorkspace) {
  api::Object sandbox = api::MakeObject(Kind::kSandbox, "sb", "team");
  sandbox.sandbox_spec().workspace_ref = "prod";
  Apply(sandbox);
  api::Object by_ref = api::MakeObject(Kind::kAgentWorker, "w-ref", "team");
  by_ref.agent_worker_spec().sandbox_ref = "sb";
  Apply(by_ref);
  api::Object inline_sb = api::MakeObject(Kind::kAgentWorker, "w-inline", "team");
  inline_sb.agent_worker_spec().sandbox = api::SandboxSpec{};
  inline_sb.agent_worker_spec().sandbox->workspace_ref = "staging";
  Apply(inline_sb);
  api::Object task = api::MakeObject(Kind::kAgentTask, "t", "team");
  task.agent_task_spec().worker_ref = "w-ref";
  Apply(task);
  api::Object picked = api::MakeObject(Kind::kAgentTask, "t-selector", "team");
  picked.agent_task_spec().worker_selector = api::WorkerSelector{};
  Apply(picked);

  EXPECT_EQ(Of(Kind::kWorkspace, "prod"), "team/prod");
  EXPECT_EQ(Of(Kind::kSandbox, "sb"), "team/prod");
  EXPECT_EQ(Of(Kind::kAgentWorker, "w-ref"), "team/prod");
  EXPECT_EQ(Of(Kind::kAgentWorker, "w-inline"), "team/staging");
  EXPECT_EQ(Of(Kind::kAgentTask, "t"), "team/prod");
  // No worker picked yet, gone, dangling reference, GitSource: the global leader's.
  EXPECT_EQ(Of(Kind::kAgentTask, "t-selector"), "<none>");
  EXPECT_EQ(Of(Kind::kSandbox, "gone"), "<none>");
  EXPECT_EQ(Of(Kind::kGitSource, "repo"), "<none>");
  // A Notifier names no workspace: it hears about objects of several.
  api::Object notifier = api::MakeObject(Kind::kNotifier, "alerts", "team");
  notifier.notifier_spec().url_from = {"", "hook"};
  notifier.notifier_spec().events = {"TaskFailed"};
  Apply(notifier);
  EXPECT_EQ(Of(Kind::kNotifier, "alerts"), "<none>");
  api::Object dangling = api::MakeObject(Kind::kAgentWorker, "w-dangling", "team");
  dangling.agent_worker_spec().sandbox_ref = "not-yet";
  Apply(dangling);
  EXPECT_EQ(Of(Kind::kAgentWorker, "w-dangling"), "<none>");

  // Once a selector picked a worker, the task follows it.
  auto stored = store_->Get(ObjectKey{Kind::kAgentTask, "team", "t-selector"});
  ASSERT_TRUE(stored.ok());
  stored->agent_task_status().worker = "w-inline";
  ASSERT_TRUE(store_->UpdateStatus(*stored).ok());
  EXPECT_EQ(Of(Kind::kAgentTask, "t-selector"), "team/staging");
}

}  // namespace
}  // namespace sbx::controller
