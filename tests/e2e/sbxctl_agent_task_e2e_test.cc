// End-to-end tests of the AgentTask verbs of issue #13 on the BUILT sbxctl binary: get
// agenttasks, describe, logs agenttask/NAME [-f], cancel, artifacts and run. sbxd is not
// needed: the tests write the task's status, log and artifacts into the store as the
// controller would (see sbxctl_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "api/rfc3339.h"
#include "tests/e2e/sbxctl_fixture.h"

namespace {

namespace fs = std::filesystem;
using sbx::api::Kind;
using sbx::api::Object;
using sbx::api::TaskPhase;
using sbx_e2e::CountLines;
using sbx_e2e::ReadAll;
using sbx_e2e::Result;
using sbx_e2e::SbxctlTest;
using sbx_e2e::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string TaskManifest(const std::string& name, const std::string& worker) {
  return "apiVersion: sbx.dev/v1alpha1\n"
         "kind: AgentTask\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n"
         "  workerRef: " +
         worker +
         "\n"
         "  input: |\n"
         "    $ echo hi > report.md\n"
         "  collect:\n"
         "    - path: report.md\n";
}

class AgentTaskTest : public SbxctlTest {
 protected:
  void ApplyTask(const std::string& name, const std::string& worker = "fixer") {
    WriteFile(dir_ / (name + ".yaml"), TaskManifest(name, worker));
    const Result r = Run({"apply", "-f", (dir_ / (name + ".yaml")).string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // Changes the task's status as the controller would (read, change, compare-and-swap).
  void UpdateTask(const std::string& name, const std::function<void(Object&)>& change) {
    auto store = OpenStore();
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto task = store->Get({Kind::kAgentTask, "default", name});
      ASSERT_TRUE(task.ok()) << task.status();
      change(*task);
      if (store->UpdateStatus(*task).ok()) {
        return;
      }
    }
    FAIL() << "cannot update the status of " << name;
  }

  // A task that ran two commands and succeeded.
  static void Succeed(Object& task) {
    auto& s = task.agent_task_status();
    s.phase = TaskPhase::kSucceeded;
    s.worker = "fixer";
    s.session_id = "sess_1";
    s.turn_id = "turn_1";
    s.submitted_at = "2026-01-01T00:00:00Z";
    s.started_at = "2026-01-01T00:00:01Z";
    s.completed_at = "2026-01-01T00:01:05Z";
    s.commands = 2;
    s.result.message = "Fixed the flaky test.\nDetails in report.md.";
    s.result.usage = {120, 30, 150};
  }
  static void Fail(Object& task) {
    Succeed(task);
    auto& s = task.agent_task_status();
    s.phase = TaskPhase::kFailed;
    s.result.message = "";
    s.result.error = {"connection_failed", "the executor went away"};
  }
};

// ---- get ---------------------------------------------------------------------------------------

TEST_F(AgentTaskTest, GetShowsPhaseWorkerDurationCommandsAndResult) {
  ApplyTask("done");
  ApplyTask("failed");
  ApplyTask("waiting");
  UpdateTask("done", Succeed);
  UpdateTask("failed", Fail);
  UpdateTask("waiting", [](Object& t) {
    t.agent_task_status().phase = TaskPhase::kQueued;
    t.agent_task_status().worker = "fixer";
    t.agent_task_status().queue_position = 2;
  });

  Result r = Run({"get", "agenttasks"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  EXPECT_THAT(header, StartsWith("NAME"));
  for (const char* column : {"PHASE", "WORKER", "AGE", "DURATION", "COMMANDS", "RESULT"}) {
    EXPECT_THAT(header, HasSubstr(column));
  }
  EXPECT_THAT(header, Not(HasSubstr("QUEUE")));
  EXPECT_THAT(r.out, HasSubstr("Succeeded"));
  EXPECT_THAT(r.out, HasSubstr("65s"));
  EXPECT_THAT(r.out, HasSubstr("Fixed the flaky test."));
  EXPECT_THAT(r.out, Not(HasSubstr("Details in report.md")));  // the first line only
  EXPECT_THAT(r.out, HasSubstr("connection_failed"));
  EXPECT_THAT(r.out, HasSubstr("Queued"));
  EXPECT_EQ(CountLines(r.out), 4);

  r = Run({"get", "at", "waiting", "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("QUEUE"));
  EXPECT_THAT(r.out, HasSubstr("SESSION"));
  EXPECT_THAT(r.out, HasSubstr("TURN"));
  r = Run({"get", "agenttask", "done", "-o", "wide", "--no-headers"});
  EXPECT_THAT(r.out, HasSubstr("sess_1"));
  EXPECT_THAT(r.out, HasSubstr("turn_1"));

  r = Run({"get", "at", "done", "-o", "jsonpath={.status.phase} {.status.commands}"});
  EXPECT_EQ(r.out, "Succeeded 2");
  r = Run({"get", "at", "-o", "custom-columns=NAME:.metadata.name,Q:.status.queuePosition"});
  EXPECT_THAT(r.out, HasSubstr("waiting"));
  r = Run({"get", "at", "done", "-o", "yaml"});
  EXPECT_THAT(r.out, HasSubstr("kind: AgentTask"));
  r = Run({"get", "at", "-o", "json"});
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"List\""));
}

// ---- describe ----------------------------------------------------------------------------------

TEST_F(AgentTaskTest, DescribeShowsResultErrorUsageArtifactsAndTimings) {
  ApplyTask("done");
  UpdateTask("done", [](Object& t) {
    Succeed(t);
    t.agent_task_status().artifacts = {
        {"report.md", 3, "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4", ""},
        {"missing.txt", 0, "", "no such file"}};
  });
  Result r = Run({"describe", "agenttask", "done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Kind:               AgentTask"));
  EXPECT_THAT(r.out, HasSubstr("Phase:"));
  EXPECT_THAT(r.out, HasSubstr("Succeeded"));
  EXPECT_THAT(r.out, HasSubstr("  Submitted At:     2026-01-01T00:00:00Z"));
  EXPECT_THAT(r.out, HasSubstr("  Completed At:     2026-01-01T00:01:05Z"));
  EXPECT_THAT(r.out, HasSubstr("  Duration:         65s"));
  EXPECT_THAT(r.out, HasSubstr("  Commands:         2"));
  EXPECT_THAT(r.out, HasSubstr("    Fixed the flaky test.\n    Details in report.md.\n"));
  EXPECT_THAT(r.out, HasSubstr("input 120, output 30, total 150"));
  EXPECT_THAT(r.out, HasSubstr("report.md"));
  EXPECT_THAT(r.out, HasSubstr("98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"));
  EXPECT_THAT(r.out, HasSubstr("no such file"));
  EXPECT_THAT(r.out, HasSubstr("Conditions:"));
  EXPECT_THAT(r.out, HasSubstr("Events:"));

  ApplyTask("failed");
  UpdateTask("failed", Fail);
  r = Run({"describe", "at/failed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("connection_failed: the executor went away"));
}

// ---- cancel ------------------------------------------------------------------------------------

TEST_F(AgentTaskTest, CancelWritesTheRequestForTheController) {
  ApplyTask("long");
  UpdateTask("long", [](Object& t) { t.agent_task_status().phase = TaskPhase::kRunning; });
  const int64_t generation =
      OpenStore()->Get({Kind::kAgentTask, "default", "long"})->metadata.generation;

  Result r = Run({"cancel", "agenttask/long"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "agenttask/long cancel requested\n");
  auto task = OpenStore()->Get({Kind::kAgentTask, "default", "long"});
  ASSERT_TRUE(task.ok());
  const auto& annotations = task->metadata.annotations;
  ASSERT_EQ(annotations.count("sbx.dev/cancel-requested"), 1u);
  const std::string first = annotations.at("sbx.dev/cancel-requested");
  EXPECT_TRUE(sbx::api::ParseRfc3339(first).has_value()) << first;
  EXPECT_EQ(task->metadata.generation, generation);  // an annotation, not a spec change

  // Asking again is fine and keeps the time of the first request.
  r = Run({"cancel", "at", "long"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(OpenStore()
                ->Get({Kind::kAgentTask, "default", "long"})
                ->metadata.annotations.at("sbx.dev/cancel-requested"),
            first);

  r = Run({"cancel", "agenttask/nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): agenttasks \"nope\" not found\n");

  ApplyTask("done");
  UpdateTask("done", Succeed);
  r = Run({"cancel", "agenttask/done"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "agenttask/done already finished (Succeeded)\n");
  EXPECT_EQ(OpenStore()
                ->Get({Kind::kAgentTask, "default", "done"})
                ->metadata.annotations.count("sbx.dev/cancel-requested"),
            0u);

  r = Run({"cancel", "sandbox/x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("not an agenttask"));
}

}  // namespace
