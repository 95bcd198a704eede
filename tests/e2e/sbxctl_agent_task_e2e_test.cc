// End-to-end tests of the AgentTask verbs of issue #13 on the BUILT sbxctl binary: get
// agenttasks, describe, logs agenttask/NAME [-f], cancel, artifacts and run. sbxd is not
// needed: the tests write the task's status, log and artifacts into the store as the
// controller would (see sbxctl_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
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

  // The AgentWorker `run` names: it must exist (an unknown one is an error at once).
  void ApplyWorker(const std::string& name) {
    WriteFile(dir_ / (name + "-worker.yaml"),
              "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: " + name +
                  "\nspec:\n  sandboxRef: box\n");
    const Result r = Run({"apply", "-f", (dir_ / (name + "-worker.yaml")).string()});
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

  using LogKind = sbx::controller::Store::TaskLogKind;
  static sbx::controller::Store::TaskLogEntry Entry(LogKind kind, std::string text,
                                                    std::string item_id = "",
                                                    std::optional<int64_t> exit_code = {}) {
    sbx::controller::Store::TaskLogEntry e;
    e.kind = kind;
    e.text = std::move(text);
    e.item_id = std::move(item_id);
    e.exit_code = exit_code;
    return e;
  }
  // Appends to the task's log as the controller would.
  void AppendLog(const std::string& name,
                 const std::vector<sbx::controller::Store::TaskLogEntry>& entries) {
    auto store = OpenStore();
    auto task = store->Get({Kind::kAgentTask, "default", name});
    ASSERT_TRUE(task.ok()) << task.status();
    ASSERT_TRUE(store->AppendTaskLog(sbx::api::KeyOf(*task), task->metadata.uid, entries).ok());
  }
  // Stores a collected file and lists it in the status, as the controller would.
  void PutArtifact(const std::string& name, const std::string& path, const std::string& content) {
    auto store = OpenStore();
    auto task = store->Get({Kind::kAgentTask, "default", name});
    ASSERT_TRUE(task.ok()) << task.status();
    sbx::controller::Store::Artifact a;
    a.path = path;
    a.bytes = static_cast<int64_t>(content.size());
    a.sha256 = std::string(64, 'a');
    a.content = content;
    ASSERT_TRUE(store->PutArtifact(sbx::api::KeyOf(*task), task->metadata.uid, a).ok());
    UpdateTask(name, [&](Object& t) {
      t.agent_task_status().artifacts.push_back({path, a.bytes, a.sha256, ""});
    });
  }
  // The turn of a task that ran `echo hi > report.md` and said so, streamed then saved.
  void LogATurn(const std::string& name) {
    AppendLog(name, {Entry(LogKind::kStatus, "submitted to worker fixer (session sess_1)"),
                     Entry(LogKind::kAssistantDelta, "Writing ", "msg_1"),
                     Entry(LogKind::kAssistantDelta, "the report.", "msg_1"),
                     Entry(LogKind::kCommand, "$ echo hi > report.md && cat report.md", "cmd_1"),
                     Entry(LogKind::kOutputDelta, "hi\n", "cmd_1"),
                     Entry(LogKind::kCommandResult, "hi\n", "cmd_1", 0),
                     Entry(LogKind::kAssistant, "Writing the report.", "msg_1"),
                     Entry(LogKind::kCommand, "$ false", "cmd_2"),
                     Entry(LogKind::kCommandResult, "", "cmd_2", 1)});
  }
  // Waits (with a deadline) until the output file of run `n` contains `text`.
  void AwaitOutput(int n, const std::string& text) {
    sbx::testing::PollUntil(
        [&] {
          return ReadAll(dir_ / ("stdout" + std::to_string(n))).find(text) != std::string::npos;
        },
        sbx::testing::In(std::chrono::seconds(30)), std::chrono::milliseconds(10));
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
    s.usage = {.input_tokens = 170,
               .cached_input_tokens = 40,
               .output_tokens = 35,
               .reasoning_tokens = 12};  // two attempts'
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
  for (const char* column :
       {"PHASE", "WORKER", "AGE", "DURATION", "COMMANDS", "ATTEMPTS", "RESULT"}) {
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
  EXPECT_THAT(r.out, HasSubstr("TOKENS"));
  r = Run({"get", "agenttask", "done", "-o", "wide", "--no-headers"});
  EXPECT_THAT(r.out, HasSubstr("sess_1"));
  EXPECT_THAT(r.out, HasSubstr("turn_1"));
  EXPECT_THAT(r.out, HasSubstr(" 205")) << "input + output tokens of all attempts";

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
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "input 170 (cached 40), output 35 (reasoning 12) tokens, compute 0s, all attempts"));
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

// ---- logs --------------------------------------------------------------------------------------

TEST_F(AgentTaskTest, LogsOfAFinishedTaskShowTextCommandsOutputExitCodesAndTheOutcome) {
  ApplyTask("done");
  LogATurn("done");
  UpdateTask("done", Succeed);
  const Result r = Run({"logs", "agenttask/done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Each item once, though the log holds its streamed pieces and the whole item.
  EXPECT_EQ(r.out,
            "--- submitted to worker fixer (session sess_1)\n"
            "Writing the report.\n"
            "$ echo hi > report.md && cat report.md\n"
            "hi\n"
            "[exit 0]\n"
            "$ false\n"
            "[exit 1]\n"
            "=== Succeeded in 65s, 2 commands\n");

  ApplyTask("failed");
  UpdateTask("failed", Fail);
  EXPECT_EQ(Run({"logs", "at/failed"}).out,
            "=== Failed in 65s, 2 commands: connection_failed: the executor went away\n");

  // A task that has not run yet has an empty log; logs without -f returns at once.
  ApplyTask("new");
  Result empty = Run({"logs", "agenttask/new"});
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "");

  Result missing = Run({"logs", "agenttask/nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "Error from server (NotFound): agenttasks \"nope\" not found\n");
  Result tail = Run({"logs", "agenttask/done", "--tail", "3"});
  EXPECT_EQ(tail.exit_code, 1);
  EXPECT_THAT(tail.err, HasSubstr("--tail applies to agentworker logs only"));
}

TEST_F(AgentTaskTest, LogsFollowPrintsTheTurnAsItStreamsAndEndsWhenTheTaskFinishes) {
  ApplyTask("live");
  UpdateTask("live", [](Object& t) { t.agent_task_status().phase = TaskPhase::kRunning; });
  AppendLog("live", {Entry(LogKind::kAssistantDelta, "Working", "msg_1")});
  const int n = ++runs_;
  const pid_t follower = Start({"logs", "agenttask/live", "-f"}, "", n);
  AwaitOutput(n, "Working");
  // The controller streams more, then ends the task.
  AppendLog("live", {Entry(LogKind::kAssistantDelta, " on it.", "msg_1"),
                     Entry(LogKind::kCommand, "$ make test", "cmd_1")});
  AwaitOutput(n, "$ make test");
  AppendLog("live", {Entry(LogKind::kOutputDelta, "ok\n", "cmd_1"),
                     Entry(LogKind::kCommandResult, "ok\n", "cmd_1", 0),
                     Entry(LogKind::kAssistant, "Working on it.", "msg_1")});
  UpdateTask("live", Succeed);
  const Result r = Finish(follower, n);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Working on it.\n"
            "$ make test\n"
            "ok\n"
            "[exit 0]\n"
            "=== Succeeded in 65s, 2 commands\n");
}

// ---- artifacts ---------------------------------------------------------------------------------

TEST_F(AgentTaskTest, ArtifactsWriteEachFileUnderTheDirectoryAndRefuseEscapingPaths) {
  ApplyTask("done");
  UpdateTask("done", Succeed);
  PutArtifact("done", "report.md", "hi\n");
  PutArtifact("done", "out/nested/data.json", "{}");
  const fs::path out = dir_ / "out";
  Result r = Run({"artifacts", "agenttask/done", "-o", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadAll(out / "report.md"), "hi\n");
  EXPECT_EQ(ReadAll(out / "out" / "nested" / "data.json"), "{}");
  EXPECT_EQ(CountLines(r.out), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + (out / "report.md").string() + " (3 bytes, sha256 "));

  // Validation refuses such paths, but the store is not trusted to hold only valid ones.
  PutArtifact("done", "../escaped.txt", "x");
  const fs::path absolute = dir_ / "absolute.txt";
  PutArtifact("done", absolute.string(), "x");
  UpdateTask("done", [](Object& t) {
    t.agent_task_status().artifacts.push_back({"missing.txt", 0, "", "no such file"});
  });
  r = Run({"artifacts", "at/done", "-o", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir_ / "escaped.txt"));
  EXPECT_FALSE(fs::exists(absolute));
  EXPECT_THAT(r.err, HasSubstr("error: artifact ../escaped.txt: refusing a path with \"..\""));
  EXPECT_THAT(r.err,
              HasSubstr("error: artifact " + absolute.string() + ": refusing an absolute path"));
  EXPECT_THAT(r.err, HasSubstr("error: artifact missing.txt: no such file"));
  EXPECT_EQ(ReadAll(out / "report.md"), "hi\n");  // the good ones are still written

  // A symlink inside the directory that points out of it is not followed.
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  const fs::path linked = dir_ / "linked";
  fs::create_directories(linked);
  fs::create_directory_symlink(outside, linked / "out");
  r = Run({"artifacts", "at/done", "-o", linked.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("refusing to write through the symlink"));
  EXPECT_FALSE(fs::exists(outside / "nested"));

  ApplyTask("new");
  r = Run({"artifacts", "agenttask/new", "-o", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "agenttask/new has no artifacts yet (Pending; files are collected after the turn)\n");
  r = Run({"artifacts", "agenttask/nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): agenttasks \"nope\" not found\n");
}

// ---- run ---------------------------------------------------------------------------------------

TEST_F(AgentTaskTest, RunCreatesTheTaskFollowsItWritesItsArtifactsAndExitsZeroOnSucceeded) {
  ASSERT_NO_FATAL_FAILURE(ApplyWorker("fixer"));
  const fs::path out = dir_ / "results";
  const int n = ++runs_;
  const pid_t run = Start({"run", "fixer", "--input", "$ echo hi > report.md", "--collect",
                           "report.md", "--timeout", "10m", "-o", out.string()},
                          "", n);
  // The controller's part: find the task run created, run its turn, collect, succeed.
  std::string name;
  sbx::testing::PollUntil(
      [&] {
        sbx::controller::ListOptions list;
        list.kind = Kind::kAgentTask;
        auto tasks = OpenStore()->List(list);
        if (tasks.ok() && tasks->size() == 1) {
          name = (*tasks)[0].metadata.name;
        }
        return !name.empty();
      },
      sbx::testing::In(std::chrono::seconds(30)), std::chrono::milliseconds(10));
  ASSERT_THAT(name, StartsWith("fixer-"));
  EXPECT_EQ(name.size(), std::string("fixer-").size() + 5);
  auto task = OpenStore()->Get({Kind::kAgentTask, "default", name});
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->agent_task_spec().worker_ref, "fixer");
  EXPECT_EQ(task->agent_task_spec().input, "$ echo hi > report.md");
  EXPECT_EQ(task->agent_task_spec().timeout, std::chrono::minutes(10));
  ASSERT_EQ(task->agent_task_spec().collect.size(), 1u);
  EXPECT_EQ(task->agent_task_spec().collect[0].path, "report.md");
  AwaitOutput(n, "agenttask/" + name + " created\n");
  LogATurn(name);
  PutArtifact(name, "report.md", "hi\n");
  UpdateTask(name, Succeed);

  const Result r = Finish(run, n);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, StartsWith("agenttask/" + name + " created\n"));
  EXPECT_THAT(r.out, HasSubstr("$ echo hi > report.md && cat report.md\nhi\n[exit 0]\n"));
  EXPECT_THAT(r.out, HasSubstr("=== Succeeded in 65s, 2 commands\n"));
  EXPECT_THAT(r.out, HasSubstr("wrote " + (out / "report.md").string()));
  EXPECT_THAT(r.out, HasSubstr("agenttask/" + name + " Succeeded\n"));
  EXPECT_EQ(ReadAll(out / "report.md"), "hi\n");
}

TEST_F(AgentTaskTest, RunExitsOneWhenTheTaskFails) {
  ASSERT_NO_FATAL_FAILURE(ApplyWorker("fixer"));
  WriteFile(dir_ / "input.txt", "Fix it\n");
  const int n = ++runs_;
  const pid_t run = Start({"run", "fixer", "-f", (dir_ / "input.txt").string(), "--name", "t1",
                           "-o", (dir_ / "r").string()},
                          "", n);
  AwaitOutput(n, "agenttask/t1 created\n");
  EXPECT_EQ(OpenStore()->Get({Kind::kAgentTask, "default", "t1"})->agent_task_spec().input,
            "Fix it\n");
  UpdateTask("t1", Fail);
  const Result r = Finish(run, n);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("agenttask/t1 Failed\n"));
  EXPECT_THAT(r.err, HasSubstr("error: connection_failed: the executor went away"));
  EXPECT_THAT(r.err, Not(HasSubstr("artifacts")));  // none were asked for

  // The name is taken now: run creates, never reuses.
  const Result again = Run({"run", "fixer", "--input", "x", "--name", "t1"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err, "Error from server (AlreadyExists): agenttasks \"t1\" already exists\n");
}

TEST_F(AgentTaskTest, RunStoppedByTheUserLeavesTheTaskRunningAndSaysHowToCancelIt) {
  ASSERT_NO_FATAL_FAILURE(ApplyWorker("fixer"));
  const int n = ++runs_;
  const pid_t run = Start({"run", "fixer", "--input", "x", "--name", "t2"}, "", n);
  AwaitOutput(n, "agenttask/t2 created\n");
  kill(run, SIGINT);
  const Result r = Finish(run, n);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("sbxctl cancel agenttask/t2"));
  auto task = OpenStore()->Get({Kind::kAgentTask, "default", "t2"});
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->metadata.annotations.count("sbx.dev/cancel-requested"), 0u);
}

// ---- completion ---------------------------------------------------------------------------------

TEST_F(AgentTaskTest, CompletionOffersTaskNamesForCancelArtifactsAndLogs) {
  ApplyTask("fix-a");
  ApplyTask("fix-b");
  ApplyTask("other");
  WriteFile(dir_ / "sb.yaml",
            "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: fix-box\n");
  ASSERT_EQ(Run({"apply", "-f", (dir_ / "sb.yaml").string()}).exit_code, 0);
  const auto complete = [this](std::vector<std::string> words) {
    words.insert(words.begin(), {"__complete", "--"});
    const Result r = Run(words);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      lines.push_back(line);
    }
    return lines;
  };
  using ::testing::ElementsAre;
  using ::testing::IsEmpty;
  EXPECT_THAT(complete({"cancel", "agenttask/f"}),
              ElementsAre("agenttask/fix-a", "agenttask/fix-b"));
  EXPECT_THAT(complete({"cancel", "at/o"}), ElementsAre("at/other"));
  EXPECT_THAT(complete({"cancel", "a"}), ElementsAre("agenttask", "agenttasks", "at"));
  EXPECT_THAT(complete({"cancel", "at", "fix"}), ElementsAre("fix-a", "fix-b"));
  EXPECT_THAT(complete({"cancel", "agenttask/fix-a", "agenttask/"}),
              ElementsAre("agenttask/fix-a", "agenttask/fix-b", "agenttask/other"));
  EXPECT_THAT(complete({"cancel", "sandbox/"}), IsEmpty());  // only tasks are cancelled
  EXPECT_THAT(complete({"cancel", "sb", ""}), IsEmpty());
  EXPECT_THAT(complete({"artifacts", "agenttask/fix"}),
              ElementsAre("agenttask/fix-a", "agenttask/fix-b"));
  EXPECT_THAT(complete({"artifacts", "o"}), ElementsAre("other"));
  EXPECT_THAT(complete({"artifacts", "other", ""}), IsEmpty());
  EXPECT_THAT(complete({"artifacts", "-o", "x", "agenttask/"}),
              ElementsAre("agenttask/fix-a", "agenttask/fix-b", "agenttask/other"));
  EXPECT_THAT(complete({"logs", "agenttask/fix"}),
              ElementsAre("agenttask/fix-a", "agenttask/fix-b"));
  EXPECT_THAT(complete({"logs", "at/"}), ElementsAre("at/fix-a", "at/fix-b", "at/other"));
}

// ---- run: bad input ----------------------------------------------------------------------------

TEST_F(AgentTaskTest, RunRefusesBadInputWithOneLineAndCreatesNothing) {
  const auto expect_refused = [&](const std::vector<std::string>& args, const std::string& text) {
    const Result r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, StartsWith("error: "));
    EXPECT_THAT(r.err, HasSubstr(text));
    EXPECT_EQ(r.out, "");
  };
  expect_refused({"run", "fixer", "--input", ""}, "--input: must not be empty");
  expect_refused({"run", "fixer", "--input", "  \n"}, "--input: must not be empty");
  expect_refused({"run", "fixer"}, "exactly one of --input TEXT or -f FILE");
  WriteFile(dir_ / "in.txt", "hello");
  expect_refused({"run", "fixer", "--input", "x", "-f", (dir_ / "in.txt").string()},
                 "exactly one of --input TEXT or -f FILE");
  expect_refused({"run", "fixer", "--input", "x", "--collect", "/etc/passwd"},
                 "--collect /etc/passwd: must be relative");
  expect_refused({"run", "fixer", "--input", "x", "--collect", "a/../../b"},
                 "--collect a/../../b: must not contain \"..\"");
  expect_refused({"run", "fixer", "--input", "x", "--timeout", "25h"}, "--timeout");
  expect_refused({"run", "fixer", "--input", "x", "--timeout", "soon"}, "--timeout soon");
  expect_refused({"run", "Fixer!", "--input", "x", "--name", "t1"}, "WORKER");
  expect_refused({"run", "fixer", "-f", (dir_ / "none.txt").string()}, "cannot be read");
  const Result r = Run({"get", "at"});
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No resources found in default namespace.\n");
}

}  // namespace
