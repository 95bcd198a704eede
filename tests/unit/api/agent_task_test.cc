// AgentTask (DESIGN §7.1) in the api layer: its manifest decoding (defaults, byte counts), and
// the validation errors a user sees at file:line:col.
#include <gtest/gtest.h>

#include <string>

#include "api/codec.h"
#include "api/defaults.h"
#include "api/validation.h"

namespace sbx::api {
namespace {

// Decodes, defaults and validates one manifest; "OK" or the located error.
std::string Apply(const std::string& spec_yaml) {
  const std::string yaml =
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: t\nspec:\n" + spec_yaml;
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "task.yaml");
  if (!ms.ok()) {
    return ms.status().message();
  }
  Manifest& m = (*ms)[0];
  ApplyDefaults(m.object);
  Status s = LocateError(m, Validate(m.object));
  return s.ok() ? "OK" : s.message();
}

TEST(AgentTaskTest, ShortNameAndPluralParse) {
  EXPECT_EQ(*ParseKind("at"), Kind::kAgentTask);
  EXPECT_EQ(*ParseKind("agenttasks"), Kind::kAgentTask);
  EXPECT_EQ(*ParseKind("AgentTask"), Kind::kAgentTask);
  EXPECT_EQ(KindName(Kind::kAgentTask), "AgentTask");
}

TEST(AgentTaskTest, DefaultsTimeoutAndMaxBytes) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata: {name: t}\nspec:\n"
      "  workerRef: fixer\n  input: hi\n  collect:\n    - path: report.md\n"
      "    - {path: big.log, maxBytes: 16Mi}\n    - {path: small, maxBytes: 512}\n",
      "t.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  const AgentTaskSpec& s = (*ms)[0].object.agent_task_spec();
  EXPECT_EQ(s.timeout, std::chrono::minutes(30));
  ASSERT_EQ(s.collect.size(), 3u);
  EXPECT_EQ(s.collect[0].max_bytes, 1 << 20);
  EXPECT_EQ(s.collect[1].max_bytes, 16 << 20);
  EXPECT_EQ(s.collect[2].max_bytes, 512);
  EXPECT_FALSE(s.ttl_after_finished.has_value());
  EXPECT_EQ((*ms)[0].object.agent_task_status().phase, TaskPhase::kPending);
}

TEST(AgentTaskTest, ValidTasks) {
  EXPECT_EQ(Apply("  workerRef: fixer\n  input: Fix it\n  timeout: 1s\n"), "OK");
  EXPECT_EQ(Apply("  workerSelector: {matchLabels: {team: agents}}\n  input: x\n  timeout: 24h\n"
                  "  collect: [{path: a/b.txt}]\n  ttlAfterFinished: 1h\n"),
            "OK");
}

TEST(AgentTaskTest, SeveralOrNoWorkerSourceIsRefusedAtItsPlace) {
  EXPECT_EQ(Apply("  workerRef: fixer\n  workerSelector: {matchLabels: {a: b}}\n  input: x\n"),
            "task.yaml:7:3: spec.workerSelector: set exactly one of workerRef, workerSelector or "
            "poolRef, not several");
  EXPECT_EQ(Apply("  workerRef: fixer\n  poolRef: fixers\n  input: x\n"),
            "task.yaml:7:3: spec.poolRef: set exactly one of workerRef, workerSelector or poolRef, "
            "not several");
  EXPECT_EQ(Apply("  input: x\n"),
            "task.yaml:5:1: spec: set exactly one of workerRef, workerSelector or poolRef");
  EXPECT_EQ(Apply("  poolRef: Fixers\n  input: x\n"),
            "task.yaml:6:3: spec.poolRef: invalid AgentPool name \"Fixers\": must consist of "
            "lowercase letters, digits and '-'");
  EXPECT_EQ(Apply("  poolRef: fixers\n  input: Fix it\n"), "OK");
}

TEST(AgentTaskTest, EmptyInputIsRefused) {
  EXPECT_EQ(Apply("  workerRef: fixer\n  input: \"  \"\n"),
            "task.yaml:7:3: spec.input: must not be empty: it is the user message of the turn");
  EXPECT_EQ(Apply("  workerRef: fixer\n"),
            "task.yaml:5:1: spec.input: must not be empty: it is the user message of the turn");
}

TEST(AgentTaskTest, CollectPathsStayInsideTheWorkspace) {
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - path: /etc/passwd\n"),
            "task.yaml:9:7: spec.collect[0].path: must be relative to the worker's "
            "workspaceDirectory, got \"/etc/passwd\"");
  EXPECT_EQ(
      Apply("  workerRef: w\n  input: x\n  collect:\n    - path: ok\n    - path: a/../../b\n"),
      "task.yaml:10:7: spec.collect[1].path: must not contain \"..\" (it would leave the "
      "workspace directory), got \"a/../../b\"");
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - path: ..\n"),
            "task.yaml:9:7: spec.collect[0].path: must not contain \"..\" (it would leave the "
            "workspace directory), got \"..\"");
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - path: a..b\n"), "OK");
}

TEST(AgentTaskTest, TimeoutOutsideOneSecondToADayIsRefused) {
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  timeout: 0\n"),
            "task.yaml:8:3: spec.timeout: must be between 1s and 24h, got 0s");
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  timeout: 25h\n"),
            "task.yaml:8:3: spec.timeout: must be between 1s and 24h, got 25h");
}

TEST(AgentTaskTest, MaxBytesIsAtMostSixteenMebibytes) {
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - {path: a, maxBytes: 17Mi}\n"),
            "task.yaml:9:17: spec.collect[0].maxBytes: must be between 1 and 16Mi (16777216), "
            "got 17825792");
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - {path: a, maxBytes: 0}\n"),
            "task.yaml:9:17: spec.collect[0].maxBytes: must be between 1 and 16Mi (16777216), "
            "got 0");
  EXPECT_EQ(Apply("  workerRef: w\n  input: x\n  collect:\n    - {path: a, maxBytes: 1MB}\n"),
            "task.yaml:9:17: spec.collect[0].maxBytes: expected a byte count like 1048576, "
            "\"512Ki\" or \"1Mi\", got \"1MB\"");
}

// Retries (DESIGN §8.1): backoffLimit counts retries, retryOn defaults to
// [InfrastructureFailure] when unset and [] means never; both are checked at their place.
TEST(AgentTaskTest, RetryFieldsDecodeDefaultAndAreValidated) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata: {name: t}\nspec:\n"
      "  workerRef: fixer\n  input: hi\n",
      "t.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  const AgentTaskSpec& plain = (*ms)[0].object.agent_task_spec();
  EXPECT_EQ(plain.backoff_limit, 0);
  EXPECT_FALSE(plain.retry_on.has_value());
  EXPECT_TRUE(RetriesOn(plain, RetryOn::kInfrastructureFailure));
  EXPECT_FALSE(RetriesOn(plain, RetryOn::kFailed));
  EXPECT_FALSE(RetriesOn(plain, RetryOn::kTimedOut));

  AgentTaskSpec never;
  never.retry_on = std::vector<RetryOn>{};
  EXPECT_FALSE(RetriesOn(never, RetryOn::kInfrastructureFailure));

  EXPECT_EQ(Apply("  workerRef: fixer\n  input: x\n  backoffLimit: 2\n"
                  "  retryOn: [InfrastructureFailure, TimedOut]\n"),
            "OK");
  EXPECT_EQ(Apply("  workerRef: fixer\n  input: x\n  backoffLimit: -1\n"),
            "task.yaml:8:3: spec.backoffLimit: must be between 0 and 100 (the number of retries "
            "after the first attempt), got -1");
  EXPECT_EQ(Apply("  workerRef: fixer\n  input: x\n  retryOn: [Failed, Crashed]\n"),
            "task.yaml:8:21: spec.retryOn[1]: unsupported value \"Crashed\" (expected "
            "InfrastructureFailure|Failed|TimedOut)");
  EXPECT_EQ(Apply("  workerRef: fixer\n  input: x\n  retryOn: [Failed, Failed]\n"),
            "task.yaml:8:21: spec.retryOn[1]: duplicate entry");
}

// The attempts round-trip through the store's JSON; an empty retryOn stays empty (never), an
// unset one stays unset.
TEST(AgentTaskTest, AttemptsAndRetryOnRoundTripThroughTheStoresJson) {
  Object o = MakeObject(Kind::kAgentTask, "t");
  o.agent_task_spec().worker_ref = "w";
  o.agent_task_spec().input = "x";
  o.agent_task_spec().backoff_limit = 1;
  o.agent_task_spec().retry_on = std::vector<RetryOn>{};
  AgentTaskStatus& st = o.agent_task_status();
  st.phase = TaskPhase::kQueued;
  st.next_attempt_at = "2026-12-04T10:00:10Z";
  st.attempts.push_back({1,
                         "w",
                         "turn_1",
                         TaskPhase::kFailed,
                         {"server_error", "boom"},
                         "2026-12-04T09:59:00Z",
                         "2026-12-04T10:00:00Z"});
  const std::string json = EncodeObjectJson(o, false);
  EXPECT_NE(json.find("\"retryOn\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"nextAttemptAt\":\"2026-12-04T10:00:10Z\""), std::string::npos) << json;
  StatusOr<Object> back = DecodeObjectJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, o);

  o.agent_task_spec().retry_on.reset();
  EXPECT_EQ(EncodeObjectJson(o, false).find("retryOn"), std::string::npos);
}

}  // namespace
}  // namespace sbx::api
