// AgentPool (DESIGN §8.1) in the api layer: decoding with defaults, and the validation errors a
// user sees at file:line:col, the template's included.
#include <gtest/gtest.h>

#include <string>

#include "api/codec.h"
#include "api/defaults.h"
#include "api/kinds.h"
#include "api/validation.h"

namespace sbx::api {
namespace {

constexpr char kTemplate[] =
    "  template:\n"
    "    metadata: {labels: {team: a}}\n"
    "    spec:\n"
    "      sandbox: {power: OnDemand}\n"
    "      agent: {model: gpt-5-codex}\n";

// Decodes, defaults and validates one pool named `name`; "OK" or the located error.
std::string Apply(const std::string& spec_yaml, const std::string& name = "fixers") {
  const std::string yaml =
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentPool\nmetadata:\n  name: " + name +
      "\n  namespace: team-a\nspec:\n" + spec_yaml;
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "pool.yaml");
  if (!ms.ok()) {
    return ms.status().message();
  }
  Manifest& m = (*ms)[0];
  ApplyDefaults(m.object);
  Status s = LocateError(m, Validate(m.object));
  return s.ok() ? "OK" : s.message();
}

TEST(AgentPoolTest, KindWordsParse) {
  EXPECT_EQ(*ParseKind("ap"), Kind::kAgentPool);
  EXPECT_EQ(*ParseKind("agentpools"), Kind::kAgentPool);
  EXPECT_EQ(KindInfoOf(Kind::kAgentPool).schema, "agentpool.schema.json");
}

TEST(AgentPoolTest, DefaultsLeaveTheReplicasSandboxNamesToTheReplicas) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentPool\nmetadata: {name: p}\nspec:\n" +
          std::string(kTemplate) + "  session: Shared\n",
      "pool.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  Object& o = (*ms)[0].object;
  ApplyDefaults(o);
  const AgentPoolSpec& s = o.agent_pool_spec();
  EXPECT_EQ(s.replicas.min, 0);
  EXPECT_EQ(s.replicas.max, 1);
  EXPECT_EQ(s.warm, 0);
  EXPECT_EQ(s.scale_down_after, std::chrono::minutes(5));
  EXPECT_EQ(s.progress_deadline, std::chrono::minutes(10));
  EXPECT_EQ(s.template_.spec.executor.command, "codex");
  EXPECT_EQ(s.template_.spec.workspace_directory, kDefaultWorkspaceDirectory);
  ASSERT_TRUE(s.template_.spec.sandbox.has_value());
  EXPECT_EQ(s.template_.spec.sandbox->workspace_ref, "default");
  EXPECT_EQ(s.template_.spec.sandbox->idle_stop, kDefaultIdleStop);
  EXPECT_EQ(s.template_.spec.sandbox->sandbox_id, "");  // each replica's own
  EXPECT_EQ(s.template_.spec.sandbox->display_name, "");
  EXPECT_EQ(Validate(o), OkStatus());
}

TEST(AgentPoolTest, SessionPerTaskIsTheDefaultWithAnyPower) {
  const std::string running =
      "  template:\n    spec:\n      sandbox: {}\n      agent: {model: gpt-5-codex}\n";
  EXPECT_EQ(Apply(running + "  replicas: {min: 0, max: 20}\n"), "OK");
  // kTemplate's sandbox has power: OnDemand: replicas sleep between tasks.
  EXPECT_EQ(Apply(std::string(kTemplate) + "  replicas: {min: 0, max: 20}\n"), "OK");
  EXPECT_EQ(Apply(std::string(kTemplate) + "  replicas: {min: 0, max: 20}\n  session: Shared\n"),
            "OK");
  // The replicas' session mode is the pool's, not the template's.
  EXPECT_EQ(Apply("  template:\n    spec:\n      sandbox: {}\n      session: PerTask\n"),
            "pool.yaml:10:7: spec.template.spec.session: is set by the pool from its "
            "spec.session; set that instead");
}

TEST(AgentPoolTest, TheTemplateIsCheckedAsAReplicaWouldBeAtItsOwnLine) {
  const std::string shared = "  session: Shared\n";
  EXPECT_EQ(Apply("  template:\n    spec:\n      sandboxRef: box\n" + shared),
            "pool.yaml:8:5: spec.template.spec.sandbox: a pool's template needs an inline "
            "sandbox (each replica owns its own), not sandboxRef");
  EXPECT_EQ(Apply("  template:\n    spec:\n      sandbox: {sandboxId: fixed}\n" + shared),
            "pool.yaml:9:17: spec.template.spec.sandbox.sandboxId: must not be set: each "
            "replica's sandbox gets its own id (<namespace>-<replica name>)");
  EXPECT_EQ(
      Apply("  template:\n    spec:\n      sandbox: {}\n      workspaceDirectory: rel\n" + shared),
      "pool.yaml:10:7: spec.template.spec.workspaceDirectory: must be an absolute path, "
      "got \"rel\"");
  EXPECT_EQ(Apply("  template:\n    metadata: {labels: {sbx.dev/pool: x}}\n    spec:\n"
                  "      sandbox: {}\n" +
                  shared),
            "pool.yaml:8:16: spec.template.metadata.labels.sbx.dev/pool: is set by sbx on every "
            "replica (the pool's name)");
}

TEST(AgentPoolTest, ReplicaCountsAreBounded) {
  const std::string base = std::string(kTemplate) + "  session: Shared\n";
  EXPECT_EQ(Apply(base + "  replicas: {min: 3, max: 2}\n"),
            "pool.yaml:13:14: spec.replicas.min: must be between 0 and max (2), got 3");
  EXPECT_EQ(Apply(base + "  replicas: {max: 0}\n"),
            "pool.yaml:13:14: spec.replicas.max: must be between 1 and 1000, got 0");
  EXPECT_EQ(Apply(base + "  replicas: {max: 2}\n  warm: 3\n"),
            "pool.yaml:14:3: spec.warm: must be between 0 and replicas.max (2), got 3");
  EXPECT_EQ(Apply(base + "  progressDeadline: 0s\n"),
            "pool.yaml:13:3: spec.progressDeadline: must be between 1s and 24h, got 0s");
}

TEST(AgentPoolTest, ANameLeavesRoomForTheReplicasSandboxIds) {
  const std::string base = std::string(kTemplate) + "  session: Shared\n";
  // team-a-<pool>-xxxxx: 63 - 7 - 6 = 50 characters for the pool.
  EXPECT_EQ(Apply(base, std::string(50, 'p')), "OK");
  EXPECT_EQ(Apply(base, std::string(51, 'p')),
            "pool.yaml:4:3: metadata.name: an AgentPool's name must be at most 50 characters in "
            "namespace \"team-a\" (each replica's sandbox is <namespace>-<pool>-<5 chars>, at "
            "most 63)");
}

}  // namespace
}  // namespace sbx::api
