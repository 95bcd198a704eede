#include "api/codec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace sbx::api {
namespace {

using std::chrono::seconds;

// Every field set to a non-default value, so a dropped field shows up as a difference.
Object FullSandbox() {
  Object o = MakeObject(Kind::kSandbox, "dev-box", "team-a");
  o.metadata.labels = {{"app", "agent"}, {"tier", "dev"}};
  o.metadata.annotations = {{"note", "hello: world"}};
  o.metadata.uid = "4a1e";
  o.metadata.generation = 3;
  o.metadata.resource_version = 42;
  o.metadata.creation_timestamp = "2024-01-02T03:04:05Z";
  o.metadata.deletion_timestamp = "2024-01-03T03:04:05Z";
  o.metadata.finalizers = {std::string(kControllerFinalizer)};
  o.metadata.owner_references = {{Kind::kAgentWorker, "w1", "u1", false}};
  SandboxSpec& s = o.sandbox_spec();
  s.workspace_ref = "prod";
  s.sandbox_id = "team-a-dev-box";
  s.display_name = "Dev box";
  s.inactivity_timeout = seconds(5400);
  s.image = "ubuntu:22.04";
  s.power = Power::kStopped;
  s.setup = {{"deps", "apt-get install -y jq\necho done\n", seconds(600)},
             {"one-liner", "true", seconds(90)}};
  s.deletion_policy = DeletionPolicy::kOrphan;
  SandboxStatus& st = o.sandbox_status();
  st.observed_generation = 3;
  st.conditions = {{"Ready", ConditionStatus::kFalse, "Starting", "waiting for RUNNING",
                    "2024-01-02T03:04:06Z", 3}};
  st.sandbox_name = "sandboxes/team-a-dev-box";
  st.state = "RUNNING";
  st.create_time = "2024-01-02T03:04:05Z";
  st.boot_id = "b1";
  st.setup = {{"deps", "b1", 0, true, "", "2024-01-02T03:05:00Z"},
              {"one-liner", "b1", 2, false, "boom", ""}};
  return o;
}

Object FullWorkspace() {
  Object o = MakeObject(Kind::kWorkspace, "default");
  WorkspaceSpec& s = o.workspace_spec();
  s.databricks = {"https://x.cloud.databricks.com",
                  "DEFAULT",
                  "1234567890",
                  {"DATABRICKS_TOKEN", ""},
                  {"", "/etc/sbx/client-id"},
                  {"CLIENT_SECRET", ""}};
  s.openai = {"https://api.openai.com/v1", {"OPENAI_API_KEY", ""}};
  s.limits = {2.5, 40};
  o.workspace_status().observed_generation = 1;
  o.workspace_status().conditions = {{"Ready", ConditionStatus::kTrue, "Ok", "", "t", 1}};
  return o;
}

Object FullWorker() {
  Object o = MakeObject(Kind::kAgentWorker, "w1");
  AgentWorkerSpec& s = o.agent_worker_spec();
  s.sandbox = FullSandbox().sandbox_spec();
  s.agent = {"gpt-5", "Fix the bug.\nThen stop.\n"};
  s.workspace_directory = "/home/sandbox-agent/repo";
  s.executor = {"codex", {"exec-server", "--verbose"}, {"", "/run/secrets/key"}};
  s.restart_policy = RestartPolicy::kNever;
  AgentWorkerStatus& st = o.agent_worker_status();
  st.session_id = "sess_1";
  st.environment_id = "env_1";
  st.remote_url = "wss://x";
  st.executor = {1234, "2024-01-02T03:04:05Z", 2, "IPNotAuthorized"};
  st.environment_status = "connected";
  return o;
}

TEST(CodecTest, ObjectJsonRoundTripsEveryKind) {
  for (const Object& o :
       {FullSandbox(), FullWorkspace(), FullWorker(), MakeObject(Kind::kSandbox, "empty"),
        MakeObject(Kind::kWorkspace, "e"), MakeObject(Kind::kAgentWorker, "e")}) {
    for (bool pretty : {true, false}) {
      StatusOr<Object> back = DecodeObjectJson(EncodeObjectJson(o, pretty));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, o) << EncodeObjectJson(o);
    }
  }
}

TEST(CodecTest, SpecAndStatusJsonRoundTrip) {
  for (const Object& o : {FullSandbox(), FullWorkspace(), FullWorker()}) {
    StatusOr<Spec> spec = DecodeSpecJson(o.kind, EncodeSpecJson(o));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(*spec == o.spec) << EncodeSpecJson(o);
    StatusOr<ResourceStatus> status = DecodeStatusJson(o.kind, EncodeStatusJson(o));
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_TRUE(*status == o.status) << EncodeStatusJson(o);
  }
}

TEST(CodecTest, SpecJsonIsCanonicalSortedAndCompact) {
  Object o = MakeObject(Kind::kSandbox, "a");
  o.sandbox_spec().display_name = "A";
  o.sandbox_spec().inactivity_timeout = seconds(900);
  EXPECT_EQ(EncodeSpecJson(o),
            R"({"deletionPolicy":"Delete","displayName":"A","inactivityTimeout":"15m",)"
            R"("power":"Running","workspaceRef":"default"})");
  EXPECT_EQ(EncodeStatusJson(o), "{}");
  // Same object, same bytes; a copy encodes identically.
  Object copy = o;
  EXPECT_EQ(EncodeSpecJson(copy), EncodeSpecJson(o));
}

TEST(CodecTest, EmptySubObjectsAreOmitted) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  EXPECT_EQ(EncodeSpecJson(o), "{}");
  Object w = MakeObject(Kind::kAgentWorker, "w");
  EXPECT_EQ(EncodeSpecJson(w), R"({"executor":{"command":"codex"},"restartPolicy":"Always",)"
                               R"("workspaceDirectory":"/home/sandbox-agent/workspace"})");
}

TEST(CodecTest, DecodeSpecJsonIgnoresUnknownFields) {
  StatusOr<Spec> spec = DecodeSpecJson(Kind::kSandbox, R"({"image":"x","futureField":1})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(std::get<SandboxSpec>(*spec).image, "x");
}

TEST(CodecTest, DecodeSpecJsonReportsBadInput) {
  EXPECT_EQ(DecodeSpecJson(Kind::kSandbox, "{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeSpecJson(Kind::kSandbox, R"({"power":"Off"})").status().message(),
            "spec.power: unsupported value \"Off\" (expected Running|Stopped)");
}

TEST(CodecTest, YamlRoundTripsThroughManifestDecoding) {
  // Manifest decoding drops server-set fields and status, so compare specs and user metadata.
  for (const Object& o : {FullSandbox(), FullWorkspace(), FullWorker()}) {
    const std::string yaml = EncodeObjectYaml(o);
    StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "x.yaml");
    ASSERT_TRUE(ms.ok()) << ms.status() << "\n" << yaml;
    ASSERT_EQ(ms->size(), 1u);
    const Object& back = (*ms)[0].object;
    EXPECT_TRUE(back.spec == o.spec) << yaml;
    EXPECT_EQ(back.metadata.name, o.metadata.name);
    EXPECT_EQ(back.metadata.namespace_, o.metadata.namespace_);
    EXPECT_EQ(back.metadata.labels, o.metadata.labels);
    EXPECT_EQ(back.metadata.annotations, o.metadata.annotations);
  }
}

}  // namespace
}  // namespace sbx::api
