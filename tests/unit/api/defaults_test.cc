#include "api/defaults.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

TEST(DefaultsTest, SandboxGetsWorkspaceIdAndDisplayName) {
  Object o = MakeObject(Kind::kSandbox, "box", "team");
  o.sandbox_spec().workspace_ref = "";
  ApplyDefaults(o);
  EXPECT_EQ(o.sandbox_spec().workspace_ref, "default");
  EXPECT_EQ(o.sandbox_spec().sandbox_id, "team-box");
  EXPECT_EQ(o.sandbox_spec().display_name, "box");
}

TEST(DefaultsTest, NeverOverridesSetFields) {
  Object o = MakeObject(Kind::kSandbox, "box");
  o.sandbox_spec().workspace_ref = "prod";
  o.sandbox_spec().sandbox_id = "custom";
  o.sandbox_spec().display_name = "Mine";
  const Object before = o;
  ApplyDefaults(o);
  EXPECT_EQ(o, before);
}

TEST(DefaultsTest, EmptyNamespaceBecomesDefault) {
  Object o = MakeObject(Kind::kSandbox, "box", "");
  ApplyDefaults(o);
  EXPECT_EQ(o.metadata.namespace_, "default");
  EXPECT_EQ(o.sandbox_spec().sandbox_id, "default-box");
}

TEST(DefaultsTest, AgentWorkerAndItsInlineTemplate) {
  Object o = MakeObject(Kind::kAgentWorker, "fixer", "ml");
  AgentWorkerSpec& s = o.agent_worker_spec();
  s.workspace_directory = "";
  s.executor.command = "";
  s.sandbox = SandboxSpec{};
  s.sandbox->workspace_ref = "";
  ApplyDefaults(o);
  EXPECT_EQ(s.workspace_directory, "/home/sandbox-agent/workspace");
  EXPECT_EQ(s.executor.command, "codex");
  EXPECT_EQ(s.sandbox->sandbox_id, "ml-fixer");
  EXPECT_EQ(s.sandbox->display_name, "fixer");
  EXPECT_EQ(s.sandbox->workspace_ref, "default");
}

TEST(DefaultsTest, IsIdempotent) {
  Object o = MakeObject(Kind::kAgentWorker, "w");
  o.agent_worker_spec().sandbox = SandboxSpec{};
  ApplyDefaults(o);
  const Object once = o;
  ApplyDefaults(o);
  EXPECT_EQ(o, once);
}

TEST(DefaultsTest, WorkspaceIsUnchanged) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  const Object before = o;
  ApplyDefaults(o);
  EXPECT_EQ(o, before);
}

}  // namespace
}  // namespace sbx::api
