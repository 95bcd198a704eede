// AgentTaskReconciler against the fakes: exactly one turn per task (the uid as Idempotency-Key,
// recorded before the POST), the outcome from the root turn only, the per-worker queue, timeout
// and cancel, the log and the collected artifacts.
#include "controller/reconcilers/agent_task_reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "api/conditions.h"
#include "api/rfc3339.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using api::Kind;
using api::TaskPhase;
namespace oa = openai;
namespace db = databricks;

class AgentTaskReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStore::Options options;
    options.clock = &clock_;
    store_ = *SqliteStore::Open(":memory:", options);
    reconciler_ = std::make_unique<AgentTaskReconciler>(*store_, clouds_, clock_, nullptr);
    // A Ready worker "w" on sandbox "box" with a session.
    Object box = api::MakeObject(Kind::kSandbox, "box");
    box.sandbox_spec().sandbox_id = "default-box";
    Object worker = api::MakeObject(Kind::kAgentWorker, "w");
    worker.agent_worker_spec().sandbox_ref = "box";
    worker.metadata.labels = {{"team", "agents"}};
    ASSERT_TRUE(store_->Apply({box, worker}, {}).ok());
    db::Sandbox sb;
    sb.sandbox_id = "default-box";
    sb.name = "sandboxes/default-box";
    sb.state = db::SandboxState::kRunning;
    clouds_.api().Put(sb);
    oa::CreateSessionRequest create;
    create.model = "m";
    create.workspace_directory = "/w";
    session_ = clouds_.agents().CreateSession(create, {})->id;
    Object stored = *store_->Get({Kind::kAgentWorker, "default", "w"});
    stored.agent_worker_status().session_id = session_;
    stored.agent_worker_status().conditions = {
        {"Ready", api::ConditionStatus::kTrue, "Ready", "", "t", 1}};
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
    Object created = *store_->Get({Kind::kSandbox, "default", "box"});
    created.sandbox_status().sandbox_name = "sandboxes/default-box";  // what sbx created
    created.sandbox_status().workspace_ref = "default";
    ASSERT_TRUE(store_->UpdateStatus(created).ok());
  }

  std::string CreateTask(const std::string& name, std::string input = "$ echo hi > out.txt") {
    Object o = api::MakeObject(Kind::kAgentTask, name);
    o.agent_task_spec().worker_ref = "w";
    o.agent_task_spec().input = std::move(input);
    o.agent_task_spec().timeout = std::chrono::seconds(60);
    o.agent_task_spec().collect = {{"out.txt", 1 << 20}};
    return (*store_->Apply({o}, {}))[0].object.metadata.uid;
  }
  Object Reconcile(const std::string& name) {
    auto r = reconciler_->Reconcile({Kind::kAgentTask, "default", name}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return *store_->Get({Kind::kAgentTask, "default", name});
  }

  testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  testing::FakeCloudClients clouds_;
  std::unique_ptr<AgentTaskReconciler> reconciler_;
  std::string session_;
};

TEST_F(AgentTaskReconcilerTest, RunsOneTurnWithTheUidAsKeyAndSucceedsFromTheRootTurn) {
  const std::string uid = CreateTask("t1");
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(t.agent_task_status().idempotency_key, uid);
  EXPECT_EQ(t.agent_task_status().session_id, session_);
  EXPECT_EQ(clouds_.agents().IdempotencyKeys(), std::vector<std::string>{uid});
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 1);

  t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kRunning);
  ASSERT_FALSE(t.agent_task_status().turn_id.empty());

  clouds_.agents().AddCommand(session_, "echo hi > out.txt", "", 0);
  clouds_.agents().EmitSubagentTurn(session_, "sub_1");  // never ends the task
  t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kRunning);

  clouds_.agents().AddAssistantMessage(session_, "wrote out.txt");
  clouds_.agents().CompleteTurn(session_, oa::Usage{10, 5, 15, {}});
  clouds_.api().SetExecHandler([](const std::string&, const db::ExecRequest& r) {
    db::ExecResult out;
    out.status = db::ExecStatus::kCompleted;
    out.exit_code = r.args.size() > 4 && r.args[4] == "out.txt" ? 0 : 3;
    out.stdout_text = "3\naGkK\n";  // "hi\n"
    return out;
  });
  t = Reconcile("t1");
  const api::AgentTaskStatus& st = t.agent_task_status();
  EXPECT_EQ(st.phase, TaskPhase::kSucceeded);
  EXPECT_EQ(st.commands, 1);
  EXPECT_EQ(st.result.message, "wrote out.txt");
  EXPECT_EQ(st.result.usage.total_tokens, 15);
  EXPECT_EQ(st.usage.input_tokens, 10);
  EXPECT_EQ(st.usage.output_tokens, 5);
  ASSERT_EQ(st.artifacts.size(), 1u);
  EXPECT_EQ(st.artifacts[0].bytes, 3);
  EXPECT_EQ(st.artifacts[0].sha256,
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4");
  EXPECT_EQ(store_->GetArtifact(uid, "out.txt")->content, "hi\n");
  const api::Condition* done = api::FindCondition(st.conditions, api::condition::kCompleted);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->reason, "Succeeded");

  std::string log;
  const Store::TaskLogPage page = *store_->ReadTaskLog(uid);
  for (const Store::TaskLogEntry& e : page.entries) {
    log += e.text + "\n";
  }
  EXPECT_NE(log.find("$ echo hi > out.txt"), std::string::npos) << log;
  EXPECT_NE(log.find("wrote out.txt"), std::string::npos) << log;
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 1);
}

// #24 item 9: the executor key is in the sandbox's environment, so a task can write it to a
// collected file. The file is scrubbed of known secret values before its sha256 is taken and it
// is stored, and the task's log says so (without the value).
TEST_F(AgentTaskReconcilerTest, ACollectedFileIsScrubbedOfKnownSecretsBeforeItIsHashedAndStored) {
  AgentTaskReconcilerOptions options;
  options.scrub_artifact = [](std::string_view text) {
    std::string out(text);
    for (size_t at = out.find("sk-SECRET"); at != std::string::npos; at = out.find("sk-SECRET")) {
      out.replace(at, 9, "[REDACTED]");
    }
    return out;
  };
  reconciler_ = std::make_unique<AgentTaskReconciler>(*store_, clouds_, clock_, nullptr, options);
  const std::string uid = CreateTask("t1");
  Reconcile("t1");
  Reconcile("t1");
  clouds_.agents().AddAssistantMessage(session_, "done");
  clouds_.agents().CompleteTurn(session_, oa::Usage{1, 1, 2, {}});
  const std::string leaked = "OPENAI_API_KEY=sk-SECRET\n";
  clouds_.api().SetExecHandler([&](const std::string&, const db::ExecRequest&) {
    db::ExecResult out;
    out.status = db::ExecStatus::kCompleted;
    out.exit_code = 0;
    out.stdout_text = std::to_string(leaked.size()) + "\n" + api::Base64Encode(leaked) + "\n";
    return out;
  });
  const Object t = Reconcile("t1");
  const api::AgentTaskStatus& st = t.agent_task_status();
  ASSERT_EQ(st.phase, TaskPhase::kSucceeded);
  ASSERT_EQ(st.artifacts.size(), 1u);
  const std::string clean = "OPENAI_API_KEY=[REDACTED]\n";
  EXPECT_EQ(store_->GetArtifact(uid, "out.txt")->content, clean);
  EXPECT_EQ(st.artifacts[0].bytes, static_cast<int64_t>(clean.size()));
  EXPECT_EQ(st.artifacts[0].sha256, store_->GetArtifact(uid, "out.txt")->sha256);
  std::string log;
  const Store::TaskLogPage page = *store_->ReadTaskLog(uid);  // a range-for over ->entries of a
                                                              // temporary would outlive it
  for (const Store::TaskLogEntry& e : page.entries) {
    log += e.text + "\n";
  }
  EXPECT_NE(log.find("artifact out.txt: known secret values were replaced"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("sk-SECRET"), std::string::npos) << log;
}

TEST_F(AgentTaskReconcilerTest, TheLogFollowsTheRunningTurnWithoutRepeats) {
  const std::string uid = CreateTask("t1");
  Reconcile("t1");
  Reconcile("t1");
  clouds_.agents().AddCommand(session_, "ls", "a\n", 0);
  Reconcile("t1");
  Reconcile("t1");  // a second poll adds nothing
  auto texts = [&] {
    std::vector<std::string> out;
    const Store::TaskLogPage page = *store_->ReadTaskLog(uid);
    for (const Store::TaskLogEntry& e : page.entries) {
      if (e.kind != Store::TaskLogKind::kStatus) {
        out.push_back(e.text);
      }
    }
    return out;
  };
  EXPECT_EQ(texts(), (std::vector<std::string>{"$ ls", "a\n"}));
  clouds_.agents().AddAssistantMessage(session_, "listed");
  clouds_.agents().CompleteTurn(session_);
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSucceeded);
  EXPECT_EQ(texts(), (std::vector<std::string>{"$ ls", "a\n", "listed"}));
}

TEST_F(AgentTaskReconcilerTest, TasksOfAWorkerRunOneAtATimeInCreationOrder) {
  CreateTask("t1");
  CreateTask("t2");
  Object t2 = Reconcile("t2");
  EXPECT_EQ(t2.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(t2.agent_task_status().queue_position, 1);
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(Reconcile("t2").agent_task_status().phase, TaskPhase::kQueued);
  Reconcile("t1");
  clouds_.agents().CompleteTurn(session_);
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSucceeded);
  t2 = Reconcile("t2");
  EXPECT_EQ(t2.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(t2.agent_task_status().queue_position, 0);
}

TEST_F(AgentTaskReconcilerTest, ALostPostIsRepeatedWithTheSameKeyAndStartsOneTurn) {
  const std::string uid = CreateTask("t1");
  clouds_.agents().FailNext("send", api::UnavailableError("connection reset"));
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 0);
  clock_.Advance(std::chrono::seconds(11));
  Reconcile("t1");  // no turn yet: the same key again
  Reconcile("t1");
  Reconcile("t1");  // a repeat of an accepted key starts nothing
  clock_.Advance(std::chrono::seconds(11));
  Reconcile("t1");
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 1);
  EXPECT_EQ(clouds_.agents().Turns(session_).size(), 1u);
  for (const std::string& key : clouds_.agents().IdempotencyKeys()) {
    EXPECT_EQ(key, uid);
  }
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kRunning);
}

// With an enqueuer the input POST runs in the background: a POST the service holds (no executor
// connected) returns the reconcile at once, the task says WaitingForExecutor while the worker's
// executor is gone, and a delete waits for the POST's answer, then cancels the turn it started
// (a turn left behind would be taken by the worker's next task for its own).
TEST_F(AgentTaskReconcilerTest, AHeldInputPostHoldsNoReconcileAndADeleteWaitsForItsAnswer) {
  testing::RecordingEnqueuer enqueuer;
  AgentTaskReconcilerOptions options;
  options.enqueuer = &enqueuer;
  reconciler_ = std::make_unique<AgentTaskReconciler>(*store_, clouds_, clock_, nullptr, options);
  clouds_.agents().HoldSends();
  CreateTask("t1");
  Object t = Reconcile("t1");  // returns while the POST is held
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 0);

  Object w = *store_->Get({Kind::kAgentWorker, "default", "w"});
  w.agent_worker_status().conditions.push_back(
      {"ExecutorConnected", api::ConditionStatus::kFalse, "EnvironmentDisconnected", "", "t", 1});
  ASSERT_TRUE(store_->UpdateStatus(w).ok());
  t = Reconcile("t1");
  const api::Condition* c =
      api::FindCondition(t.agent_task_status().conditions, api::condition::kCompleted);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->reason, "WaitingForExecutor");
  EXPECT_EQ(clouds_.agents().IdempotencyKeys().size(), 0u);  // no second POST meanwhile

  ASSERT_TRUE(store_->Delete({Kind::kAgentTask, "default", "t1"}).ok());
  t = Reconcile("t1");  // the finalizer stays while the POST is held
  EXPECT_FALSE(t.metadata.deletion_timestamp.empty());

  clouds_.agents().ReleaseSends();  // accepted: a turn starts
  ASSERT_TRUE(testing::PollUntil([&] { return enqueuer.count() > 0; },
                                 testing::In(std::chrono::milliseconds(10'000))));
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 1);
  for (int pass = 0; pass < 3 && store_->Get({Kind::kAgentTask, "default", "t1"}).ok(); ++pass) {
    (void)reconciler_->Reconcile({Kind::kAgentTask, "default", "t1"}, {});
  }
  EXPECT_EQ(store_->Get({Kind::kAgentTask, "default", "t1"}).status().code(),
            api::StatusCode::kNotFound);
  oa::ListParams newest;
  newest.limit = 1;
  const oa::TurnPage turns = *clouds_.agents().ListTurns(session_, newest, {});
  ASSERT_EQ(turns.data.size(), 1u);
  EXPECT_EQ(turns.data[0].status, oa::TurnStatus::kCancelled);
}

TEST_F(AgentTaskReconcilerTest, TimeoutFromSubmissionCancelsTheTurnAndEndsTimedOut) {
  CreateTask("t1");
  Reconcile("t1");
  Reconcile("t1");
  clock_.Advance(std::chrono::seconds(61));
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kTimedOut);
  EXPECT_EQ(t.agent_task_status().cancel_reason, "TimedOut");
}

TEST_F(AgentTaskReconcilerTest, ACancelRequestCancelsTheTurn) {
  CreateTask("t1");
  Reconcile("t1");
  Reconcile("t1");
  Object o = *store_->Get({Kind::kAgentTask, "default", "t1"});
  o.metadata.annotations[std::string(api::kCancelRequestedAnnotation)] = "now";
  ASSERT_TRUE(store_->Apply({o}, {}).ok());
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kCancelled);
}

TEST_F(AgentTaskReconcilerTest, AFailedTurnFailsTheTaskWithTheServicesCode) {
  CreateTask("t1");
  Reconcile("t1");
  Reconcile("t1");
  clouds_.agents().FailTurn(session_, "connection_failed", "executor did not connect");
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kFailed);
  EXPECT_EQ(t.agent_task_status().result.error.code, "connection_failed");
}

TEST_F(AgentTaskReconcilerTest, WorkerSelectorPicksAReadyWorkerWithTheLabels) {
  Object o = api::MakeObject(Kind::kAgentTask, "sel");
  o.agent_task_spec().worker_selector = api::WorkerSelector{{{"team", "agents"}}};
  o.agent_task_spec().input = "hi";
  ASSERT_TRUE(store_->Apply({o}, {}).ok());
  Object t = Reconcile("sel");
  EXPECT_EQ(t.agent_task_status().worker, "w");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);

  Object none = api::MakeObject(Kind::kAgentTask, "none");
  none.agent_task_spec().worker_selector = api::WorkerSelector{{{"team", "other"}}};
  none.agent_task_spec().input = "hi";
  ASSERT_TRUE(store_->Apply({none}, {}).ok());
  t = Reconcile("none");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(
      api::FindCondition(t.agent_task_status().conditions, api::condition::kSubmitted)->reason,
      api::reason::kNoMatchingWorker);
}

// #28: a task's compute is its sandbox's RUNNING time from the moment the attempt reached its
// worker to its end (Sandbox.status.usage: the counted part plus the open interval).
TEST_F(AgentTaskReconcilerTest, ComputeIsTheSandboxsRunningTimeWhileTheAttemptNeededIt) {
  Object box = *store_->Get({Kind::kSandbox, "default", "box"});
  box.sandbox_status().usage.running_millis = 5'000;  // before the task: not its
  box.sandbox_status().usage.running_since = api::FormatRfc3339Millis(clock_.Now());
  ASSERT_TRUE(store_->UpdateStatus(box).ok());
  clock_.Advance(std::chrono::milliseconds(700));  // open, before the task too
  CreateTask("t1", "hi");
  Object t = Reconcile("t1");
  ASSERT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(t.agent_task_status().usage.attempt_start_running_millis, 5'700);
  clock_.Advance(std::chrono::milliseconds(300));
  t = Reconcile("t1");
  ASSERT_EQ(t.agent_task_status().phase, TaskPhase::kRunning);
  clock_.Advance(std::chrono::milliseconds(1'234));
  clouds_.agents().CompleteTurn(session_, oa::Usage{10, 5, 15, {}});
  t = Reconcile("t1");
  ASSERT_EQ(t.agent_task_status().phase, TaskPhase::kSucceeded);
  EXPECT_EQ(t.agent_task_status().usage.compute_millis, 1'534);  // 0.3 s + 1.234 s
  EXPECT_FALSE(t.agent_task_status().usage.attempt_start_running_millis);
}

// #28: limits.maxConcurrentTasks: a slot per Submitted or Running task, taken before the
// submission; a task finds the workspace full and waits, and takes the slot of a holder that
// finished without giving it back (a crash between its end and the give-back).
TEST_F(AgentTaskReconcilerTest, AWorkspaceAtItsConcurrencyLimitHoldsNewTasks) {
  Object ws = api::MakeObject(Kind::kWorkspace, "default");
  ws.workspace_spec().limits.max_concurrent_tasks = 1;
  ASSERT_TRUE(store_->Apply({ws}, {}).ok());
  // "other" runs on another worker and holds the one slot.
  Object other = api::MakeObject(Kind::kAgentTask, "other");
  other.agent_task_spec().worker_ref = "elsewhere";
  other.agent_task_spec().input = "hi";
  const std::string other_uid = (*store_->Apply({other}, {}))[0].object.metadata.uid;
  ASSERT_TRUE(
      store_
          ->AcquireTaskSlot("default/default", {Kind::kAgentTask, "default", "other"}, other_uid, 1)
          ->granted);
  other = *store_->Get({Kind::kAgentTask, "default", "other"});
  other.agent_task_status().phase = TaskPhase::kRunning;
  ASSERT_TRUE(store_->UpdateStatus(other).ok());

  CreateTask("t1", "hi");
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued);
  const api::Condition* submitted =
      api::FindCondition(t.agent_task_status().conditions, api::condition::kSubmitted);
  ASSERT_NE(submitted, nullptr);
  EXPECT_EQ(submitted->reason, api::reason::kConcurrencyLimited);
  EXPECT_EQ(submitted->message,
            "1 of 1 tasks of Workspace default are Submitted or Running "
            "(spec.limits.maxConcurrentTasks)");
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 0);

  // "other" ends, its slot left behind: t1 gives it back and goes.
  other = *store_->Get({Kind::kAgentTask, "default", "other"});
  other.agent_task_status().phase = TaskPhase::kSucceeded;
  ASSERT_TRUE(store_->UpdateStatus(other).ok());
  t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);
  // t1 holds the slot now: a third task waits, and gets it once t1 has ended.
  CreateTask("t2", "hi");
  EXPECT_EQ(Reconcile("t2").agent_task_status().phase, TaskPhase::kQueued);
  Reconcile("t1");
  clouds_.agents().CompleteTurn(session_, oa::Usage{1, 1, 2, {}});
  ASSERT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSucceeded);
  auto grant = store_->AcquireTaskSlot("default/default", {Kind::kAgentTask, "default", "probe"},
                                       "uid-probe", 1);
  ASSERT_TRUE(grant.ok());
  EXPECT_TRUE(grant->granted) << "t1 gave its slot back when its end was stored";
  ASSERT_TRUE(store_->ReleaseTaskSlot("uid-probe").ok());
  EXPECT_EQ(Reconcile("t2").agent_task_status().phase, TaskPhase::kSubmitted);
}

TEST_F(AgentTaskReconcilerTest, TtlAfterFinishedDeletesTheTask) {
  Object o = api::MakeObject(Kind::kAgentTask, "t1");
  o.agent_task_spec().worker_ref = "w";
  o.agent_task_spec().input = "hi";
  o.agent_task_spec().ttl_after_finished = std::chrono::seconds(30);
  o.metadata.annotations[std::string(api::kCancelRequestedAnnotation)] = "now";
  ASSERT_TRUE(store_->Apply({o}, {}).ok());
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kCancelled);
  clock_.Advance(std::chrono::seconds(31));
  ASSERT_TRUE(reconciler_->Reconcile({Kind::kAgentTask, "default", "t1"}, {}).ok());
  // The finalizer goes on the next pass, then the row.
  (void)reconciler_->Reconcile({Kind::kAgentTask, "default", "t1"}, {});
  EXPECT_EQ(store_->Get({Kind::kAgentTask, "default", "t1"}).status().code(),
            api::StatusCode::kNotFound);
}

// ---- Retries (DESIGN §8.1, #27 item 6) ----------------------------------------------------------

class AgentTaskRetryTest : public AgentTaskReconcilerTest {
 protected:
  std::string CreateRetrying(const std::string& name, int backoff_limit,
                             std::optional<std::vector<api::RetryOn>> retry_on = std::nullopt) {
    Object o = api::MakeObject(Kind::kAgentTask, name);
    o.agent_task_spec().worker_ref = "w";
    o.agent_task_spec().input = "$ make test";
    o.agent_task_spec().timeout = std::chrono::seconds(60);
    o.agent_task_spec().backoff_limit = backoff_limit;
    o.agent_task_spec().retry_on = std::move(retry_on);
    return (*store_->Apply({o}, {}))[0].object.metadata.uid;
  }
  // Submits and starts the turn of the task's current attempt.
  Object Start(const std::string& name) {
    Reconcile(name);
    Object t = Reconcile(name);
    EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kRunning);
    return t;
  }
  static std::string SubmittedReason(const Object& t) {
    const api::Condition* c =
        api::FindCondition(t.agent_task_status().conditions, api::condition::kSubmitted);
    return c == nullptr ? "" : c->reason;
  }
};

TEST_F(AgentTaskRetryTest, AnInfrastructureFailureIsRetriedAfterTheDelayWithANewKeyAndANewTurn) {
  const std::string uid = CreateRetrying("t1", 1);
  const std::string first_turn = Start("t1").agent_task_status().turn_id;
  clouds_.agents().FailTurn(session_, "server_overloaded", "try again later",
                            oa::Usage{100,
                                      20,
                                      120,
                                      {{"input_tokens_details.cached_tokens", 30},
                                       {"output_tokens_details.reasoning_tokens", 8}}});
  Object t = Reconcile("t1");
  const api::AgentTaskStatus* st = &t.agent_task_status();
  EXPECT_EQ(st->phase, TaskPhase::kQueued);
  // Usage counts the failed attempt's turn too (DESIGN §8.2).
  EXPECT_EQ(st->usage, (api::TaskUsageTotals{.input_tokens = 100,
                                             .cached_input_tokens = 30,
                                             .output_tokens = 20,
                                             .reasoning_tokens = 8}));
  EXPECT_EQ(SubmittedReason(t), "Retrying");
  EXPECT_EQ(st->next_attempt_at, api::FormatRfc3339(clock_.Now() + std::chrono::seconds(10)));
  EXPECT_TRUE(st->turn_id.empty());
  EXPECT_TRUE(st->idempotency_key.empty());
  ASSERT_EQ(st->attempts.size(), 1u);
  EXPECT_EQ(st->attempts[0].attempt, 1);
  EXPECT_EQ(st->attempts[0].worker, "w");
  EXPECT_EQ(st->attempts[0].turn_id, first_turn);
  EXPECT_EQ(st->attempts[0].phase, TaskPhase::kFailed);
  EXPECT_EQ(st->attempts[0].error.code, "server_overloaded");
  EXPECT_FALSE(st->attempts[0].started_at.empty());
  EXPECT_FALSE(st->attempts[0].completed_at.empty());

  clock_.Advance(std::chrono::seconds(9));  // not yet: no POST
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(clouds_.agents().IdempotencyKeys().size(), 1u);

  clock_.Advance(std::chrono::seconds(1));
  t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(t.agent_task_status().idempotency_key, uid + "-2");
  EXPECT_TRUE(t.agent_task_status().next_attempt_at.empty());
  EXPECT_EQ(clouds_.agents().IdempotencyKeys(), (std::vector<std::string>{uid, uid + "-2"}));
  t = Reconcile("t1");
  EXPECT_NE(t.agent_task_status().turn_id, first_turn);  // a new turn
  clouds_.agents().CompleteTurn(session_,
                                oa::Usage{50, 10, 60, {{"input_tokens_details.cached_tokens", 5}}});
  t = Reconcile("t1");
  st = &t.agent_task_status();
  EXPECT_EQ(st->phase, TaskPhase::kSucceeded);
  // Both attempts' root turns, summed; result.usage is the last turn's alone.
  const api::TaskUsageTotals both{
      .input_tokens = 150, .cached_input_tokens = 35, .output_tokens = 30, .reasoning_tokens = 8};
  EXPECT_EQ(st->usage, both);
  EXPECT_EQ(st->result.usage.total_tokens, 60);
  EXPECT_EQ(Reconcile("t1").agent_task_status().usage, both) << "a finished task adds nothing";
  ASSERT_EQ(st->attempts.size(), 2u);
  EXPECT_EQ(st->attempts[1].attempt, 2);
  EXPECT_EQ(st->attempts[1].phase, TaskPhase::kSucceeded);
  EXPECT_EQ(st->attempts[1].turn_id, st->turn_id);
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 2);
}

TEST_F(AgentTaskRetryTest, WhenNoRetryIsLeftTheFinalPhaseIsTheLastAttemptsAndDelaysDouble) {
  CreateRetrying("t1", 2);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Start("t1");
    clouds_.agents().FailTurn(session_, "connection_failed", "executor did not connect");
    Object t = Reconcile("t1");
    if (attempt < 3) {
      EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued) << attempt;
      const auto delay = std::chrono::seconds(10 << (attempt - 1));  // 10 s, then 20 s
      EXPECT_EQ(t.agent_task_status().next_attempt_at, api::FormatRfc3339(clock_.Now() + delay));
      clock_.Advance(delay);
    } else {
      EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kFailed);
      EXPECT_EQ(t.agent_task_status().result.error.code, "connection_failed");
      EXPECT_EQ(t.agent_task_status().attempts.size(), 3u);
    }
  }
}

TEST_F(AgentTaskRetryTest, TheAgentsOwnFailureIsNotRetriedUnlessRetryOnNamesFailed) {
  CreateRetrying("plain", 3);
  Start("plain");
  clouds_.agents().FailTurn(session_, "some_new_code", "the agent gave up");  // unknown: Failed
  Object t = Reconcile("plain");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kFailed);
  ASSERT_EQ(t.agent_task_status().attempts.size(), 1u);

  CreateRetrying("failed", 3, std::vector<api::RetryOn>{api::RetryOn::kFailed});
  Start("failed");
  clouds_.agents().FailTurn(session_, "some_new_code", "the agent gave up");
  EXPECT_EQ(Reconcile("failed").agent_task_status().phase, TaskPhase::kQueued);

  // retryOn: [Failed] alone does not retry an infrastructure failure.
  clock_.Advance(std::chrono::seconds(10));
  Start("failed");
  clouds_.agents().FailTurn(session_, "sandbox_error", "gone");
  EXPECT_EQ(Reconcile("failed").agent_task_status().phase, TaskPhase::kFailed);
}

TEST_F(AgentTaskRetryTest, ATimedOutAttemptIsRetriedOnlyWithRetryOnTimedOut) {
  CreateRetrying("t1", 1, std::vector<api::RetryOn>{api::RetryOn::kTimedOut});
  Start("t1");
  clock_.Advance(std::chrono::seconds(61));
  Object t = Reconcile("t1");  // cancel sent; the fake cancels at once
  if (t.agent_task_status().phase == TaskPhase::kRunning) {
    t = Reconcile("t1");
  }
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued);
  ASSERT_EQ(t.agent_task_status().attempts.size(), 1u);
  EXPECT_EQ(t.agent_task_status().attempts[0].phase, TaskPhase::kTimedOut);
  clock_.Advance(std::chrono::seconds(10));
  Start("t1");  // the second attempt's timeout counts from its own submission
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kRunning);
}

TEST_F(AgentTaskRetryTest, AnInputPostThatKeptFailingUntilTheTimeoutIsAnInfrastructureFailure) {
  const std::string uid = CreateRetrying("t1", 1);
  clouds_.agents().FailNext("send", api::UnavailableError("connection reset"));
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kSubmitted);
  clouds_.agents().HoldSends();  // the re-POSTs are held by the service: no turn in time
  clock_.Advance(std::chrono::seconds(61));
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued);
  ASSERT_EQ(t.agent_task_status().attempts.size(), 1u);
  EXPECT_EQ(t.agent_task_status().attempts[0].phase, TaskPhase::kTimedOut);
  EXPECT_EQ(t.agent_task_status().attempts[0].error.code, "InputPostFailed");
  clouds_.agents().ReleaseSends();
}

TEST_F(AgentTaskRetryTest, ACancelBetweenAttemptsEndsTheTaskCancelled) {
  CreateRetrying("t1", 1);
  Start("t1");
  clouds_.agents().FailTurn(session_, "server_error", "boom");
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, TaskPhase::kQueued);
  Object o = *store_->Get({Kind::kAgentTask, "default", "t1"});
  o.metadata.annotations[std::string(api::kCancelRequestedAnnotation)] = "now";
  ASSERT_TRUE(store_->Apply({o}, {}).ok());
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kCancelled);
  EXPECT_EQ(t.agent_task_status().attempts.size(), 1u);
  EXPECT_EQ(clouds_.agents().IdempotencyKeys().size(), 1u);
}

TEST_F(AgentTaskRetryTest, AWorkerDeletedMidTurnIsAnInfrastructureFailureNotAStuckTask) {
  CreateRetrying("t1", 0);
  Start("t1");
  ASSERT_TRUE(store_->Delete({Kind::kAgentWorker, "default", "w"}).ok());  // no finalizer here
  ASSERT_EQ(store_->Get({Kind::kAgentWorker, "default", "w"}).status().code(),
            api::StatusCode::kNotFound);
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kFailed);
  EXPECT_EQ(t.agent_task_status().result.error.code, "WorkerLost");
}

TEST_F(AgentTaskRetryTest, ATaskWaitingOutItsDelayIsNotAheadOfTheWorkersNextTask) {
  CreateRetrying("first", 1);
  Start("first");
  clouds_.agents().FailTurn(session_, "server_error", "boom");
  EXPECT_EQ(Reconcile("first").agent_task_status().phase, TaskPhase::kQueued);
  CreateRetrying("second", 0);
  EXPECT_EQ(Reconcile("second").agent_task_status().phase, TaskPhase::kSubmitted);
}

}  // namespace
}  // namespace sbx::controller
