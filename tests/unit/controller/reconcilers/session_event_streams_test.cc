// SessionEventStreams against FakeAgentsApi and a real (in-memory) SQLite store: the bound
// task's live events go to its log, only the root turn's terminal event concludes it, a dropped
// stream reconnects and recovers from the saved items without duplicates, one stream serves a
// worker's tasks one after another, and an idle stream is closed. Also the AgentTask
// reconciler's use of it (no polling while the stream is open) and its resubmit backoff.
#include "controller/reconcilers/session_event_streams.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/reconcilers/agent_task_reconciler.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using sbx::testing::RecordingEnqueuer;

using api::Kind;
using LogKind = Store::TaskLogKind;
using sbx::testing::In;
using sbx::testing::PollUntil;
using std::chrono::milliseconds;
namespace oa = openai;

class SessionEventStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Open(":memory:", {});
    writer_ = std::make_unique<TaskLogWriter>(*store_);
    oa::CreateSessionRequest create;
    create.model = "m";
    create.workspace_directory = "/w";
    session_ = agents_.CreateSession(create, {})->id;
  }

  std::unique_ptr<SessionEventStreams> MakeStreams(SessionEventStreamsOptions options = {},
                                                   milliseconds reconnect = milliseconds(10)) {
    options.reconnect = {reconnect, reconnect * 5, 0};
    return std::make_unique<SessionEventStreams>(*writer_, enqueuer_, clock_, options);
  }
  SessionEventStreams::Binding Task(const std::string& name, const std::string& previous = "") {
    return {{Kind::kAgentTask, "default", name}, "uid-" + name, previous, ""};
  }
  std::vector<Store::TaskLogEntry> LogOf(const std::string& name) {
    return store_->ReadTaskLog("uid-" + name)->entries;
  }
  int CountOf(const std::string& name, LogKind kind, const std::string& item_id = "") {
    const auto log = LogOf(name);
    return static_cast<int>(std::count_if(log.begin(), log.end(), [&](const auto& e) {
      return e.kind == kind && (item_id.empty() || e.item_id == item_id);
    }));
  }
  std::optional<oa::Turn> OutcomeOf(SessionEventStreams& s, const std::string& name) {
    auto view = s.Observe(session_, "uid-" + name);
    return view ? view->outcome : std::nullopt;
  }

  SystemClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<TaskLogWriter> writer_;
  RecordingEnqueuer enqueuer_;
  sbx::testing::FakeAgentsApi agents_;
  std::string session_;
};

TEST_F(SessionEventStreamsTest, LiveEventsOfTheBoundTasksTurnGoToItsLog) {
  auto streams = MakeStreams();
  ASSERT_TRUE(streams->Watch(agents_, session_, Task("a"), {}).open);
  ASSERT_TRUE(agents_.SendEvents(session_, {oa::InputEvent::UserMessage("go")}, "uid-a", {}).ok());
  const std::string cmd = agents_.AddCommand(session_, "echo hi", "hi\n", 0);
  const std::string msg = agents_.AddAssistantMessage(session_, "done");
  ASSERT_TRUE(
      PollUntil([&] { return CountOf("a", LogKind::kAssistant) == 1; }, In(milliseconds(5000))));
  EXPECT_EQ(CountOf("a", LogKind::kCommand, cmd), 1);
  EXPECT_EQ(CountOf("a", LogKind::kOutputDelta, cmd), 1);
  EXPECT_EQ(CountOf("a", LogKind::kCommandResult, cmd), 1);
  EXPECT_EQ(CountOf("a", LogKind::kAssistantDelta, msg), 1);
  // The delta came before the whole message.
  const auto log = LogOf("a");
  auto pos = [&](LogKind k) {
    return std::find_if(log.begin(), log.end(), [&](const auto& e) { return e.kind == k; });
  };
  EXPECT_LT(pos(LogKind::kAssistantDelta), pos(LogKind::kAssistant));
  // turn.created named the turn and woke the task.
  auto view = streams->Observe(session_, "uid-a");
  ASSERT_TRUE(view.has_value());
  EXPECT_FALSE(view->turn_id.empty());
  EXPECT_GE(enqueuer_.Count("a"), 1);
}

TEST_F(SessionEventStreamsTest, OnlyTheRootTurnsTerminalEventConcludesTheTask) {
  auto streams = MakeStreams();
  ASSERT_TRUE(streams->Watch(agents_, session_, Task("a"), {}).open);
  ASSERT_TRUE(agents_.SendEvents(session_, {oa::InputEvent::UserMessage("go")}, "uid-a", {}).ok());
  agents_.EmitSubagentTurn(session_, "subagent_1", oa::TurnStatus::kCompleted);
  agents_.EmitSubagentTurn(session_, "subagent_2", oa::TurnStatus::kFailed);
  // A marker after the subagent turns: once it is logged, they have been handled.
  agents_.AddCommand(session_, "true", "", 0);
  ASSERT_TRUE(PollUntil([&] { return CountOf("a", LogKind::kCommandResult) == 1; },
                        In(milliseconds(5000))));
  EXPECT_FALSE(OutcomeOf(*streams, "a").has_value());
  EXPECT_EQ(CountOf("a", LogKind::kStatus), 0);

  agents_.CompleteTurn(session_, oa::Usage{1, 2, 3, {}});
  ASSERT_TRUE(
      PollUntil([&] { return OutcomeOf(*streams, "a").has_value(); }, In(milliseconds(5000))));
  EXPECT_EQ(OutcomeOf(*streams, "a")->status, oa::TurnStatus::kCompleted);
  ASSERT_TRUE(OutcomeOf(*streams, "a")->usage.has_value());
  EXPECT_EQ(OutcomeOf(*streams, "a")->usage->total_tokens, 3);
  EXPECT_EQ(CountOf("a", LogKind::kStatus), 1);
  EXPECT_GE(enqueuer_.Count("a"), 2);  // created, then ended
}

// Issue #30: the next task's previous_turn_id without a GET: the newest root turn, once the
// stream saw it created and ended and has stayed open; not while it runs, not after a drop.
TEST_F(SessionEventStreamsTest, KnowsTheNewestRootTurnOnlyWhenItSawItCreatedAndEnded) {
  auto streams = MakeStreams({}, milliseconds(300));
  EXPECT_FALSE(streams->NewestRootTurn(session_).has_value()) << "no stream";
  ASSERT_TRUE(streams->Watch(agents_, session_, Task("a"), {}).open);
  EXPECT_FALSE(streams->NewestRootTurn(session_).has_value()) << "nothing seen yet";
  ASSERT_TRUE(agents_.SendEvents(session_, {oa::InputEvent::UserMessage("go")}, "uid-a", {}).ok());
  ASSERT_TRUE(PollUntil([&] { return !streams->Observe(session_, "uid-a")->turn_id.empty(); },
                        In(milliseconds(5000))));
  const std::string turn = streams->Observe(session_, "uid-a")->turn_id;
  EXPECT_FALSE(streams->NewestRootTurn(session_).has_value()) << "still running";
  agents_.EmitSubagentTurn(session_, "subagent_1", oa::TurnStatus::kCompleted);
  agents_.CompleteTurn(session_);
  ASSERT_TRUE(
      PollUntil([&] { return OutcomeOf(*streams, "a").has_value(); }, In(milliseconds(5000))));
  EXPECT_EQ(streams->NewestRootTurn(session_), std::optional<std::string>(turn))
      << "the root turn, not the subagent's";
  streams->Unwatch(session_, "uid-a");
  EXPECT_EQ(streams->NewestRootTurn(session_), std::optional<std::string>(turn)) << "unbound too";
  agents_.CloseStreams(session_, api::UnavailableError("connection reset"));
  ASSERT_TRUE(PollUntil([&] { return streams->open_streams() == 0; }, In(milliseconds(5000))));
  EXPECT_FALSE(streams->NewestRootTurn(session_).has_value()) << "closed";
  ASSERT_TRUE(PollUntil([&] { return streams->open_streams() == 1; }, In(milliseconds(5000))));
  EXPECT_FALSE(streams->NewestRootTurn(session_).has_value())
      << "reopened: what came while it was closed is unknown";
}

TEST_F(SessionEventStreamsTest, ADroppedStreamReconnectsAndFillsTheGapFromTheSavedItems) {
  // Reconnects wait 300 ms: the turn moves on (µs) while nobody listens.
  auto streams = MakeStreams({}, milliseconds(300));
  ASSERT_TRUE(streams->Watch(agents_, session_, Task("a"), {}).open);
  ASSERT_TRUE(agents_.SendEvents(session_, {oa::InputEvent::UserMessage("go")}, "uid-a", {}).ok());
  const std::string first = agents_.AddCommand(session_, "echo 1", "1\n", 0);
  ASSERT_TRUE(PollUntil([&] { return CountOf("a", LogKind::kCommandResult) == 1; },
                        In(milliseconds(5000))));
  agents_.CloseStreams(session_, api::UnavailableError("connection reset"));
  ASSERT_TRUE(PollUntil([&] { return streams->open_streams() == 0; }, In(milliseconds(5000))));
  const std::string missed = agents_.AddCommand(session_, "echo 2", "2\n", 0);
  agents_.CompleteTurn(session_);

  ASSERT_TRUE(
      PollUntil([&] { return OutcomeOf(*streams, "a").has_value(); }, In(milliseconds(5000))));
  EXPECT_EQ(CountOf("a", LogKind::kCommand, missed), 1);
  EXPECT_EQ(CountOf("a", LogKind::kCommandResult, missed), 1);
  EXPECT_EQ(CountOf("a", LogKind::kCommand, first), 1);  // not again
  EXPECT_EQ(CountOf("a", LogKind::kCommandResult, first), 1);
  EXPECT_EQ(CountOf("a", LogKind::kOutputDelta, missed), 0);  // its delta was never seen
  EXPECT_EQ(streams->opened_total(), 2);
}

TEST_F(SessionEventStreamsTest, OneStreamServesTheWorkersTasksInTurnAndClosesWhenIdle) {
  SessionEventStreamsOptions options;
  options.idle_close = milliseconds(200);
  auto streams = MakeStreams(options);
  std::string previous;
  for (const std::string name : {"a", "b", "c"}) {
    const auto w = streams->Watch(agents_, session_, Task(name, previous), {});
    ASSERT_TRUE(w.open);
    EXPECT_TRUE(w.bound);
    ASSERT_TRUE(
        agents_.SendEvents(session_, {oa::InputEvent::UserMessage(name)}, "uid-" + name, {}).ok());
    agents_.CompleteTurn(session_);
    ASSERT_TRUE(
        PollUntil([&] { return OutcomeOf(*streams, name).has_value(); }, In(milliseconds(5000))));
    previous = OutcomeOf(*streams, name)->id;
    streams->Unwatch(session_, "uid-" + name);
  }
  EXPECT_EQ(streams->opened_total(), 1);
  ASSERT_TRUE(PollUntil([&] { return streams->open_streams() == 0; }, In(milliseconds(5000))));
}

// ---- the AgentTask reconciler with streams --------------------------------------------------

class AgentTaskWithStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStore::Options options;
    options.clock = &clock_;
    store_ = *SqliteStore::Open(":memory:", options);
    Object box = api::MakeObject(Kind::kSandbox, "box");
    box.sandbox_spec().sandbox_id = "default-box";
    Object worker = api::MakeObject(Kind::kAgentWorker, "w");
    worker.agent_worker_spec().sandbox_ref = "box";
    ASSERT_TRUE(store_->Apply({box, worker}, {}).ok());
    oa::CreateSessionRequest create;
    create.model = "m";
    create.workspace_directory = "/w";
    session_ = clouds_.agents().CreateSession(create, {})->id;
    Object stored = *store_->Get({Kind::kAgentWorker, "default", "w"});
    stored.agent_worker_status().session_id = session_;
    stored.agent_worker_status().conditions = {
        {"Ready", api::ConditionStatus::kTrue, "Ready", "", "t", 1}};
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
    writer_ = std::make_unique<TaskLogWriter>(*store_);
    SessionEventStreamsOptions stream_options;
    stream_options.reconnect = {milliseconds(10), milliseconds(50), 0};
    streams_ =
        std::make_unique<SessionEventStreams>(*writer_, enqueuer_, real_clock_, stream_options);
    reconciler_ = std::make_unique<AgentTaskReconciler>(
        *store_, clouds_, clock_, nullptr, AgentTaskReconcilerOptions{}, streams_.get());
  }
  void TearDown() override { streams_->Stop(); }

  void CreateTask(const std::string& name) {
    Object o = api::MakeObject(Kind::kAgentTask, name);
    o.agent_task_spec().worker_ref = "w";
    o.agent_task_spec().input = "go";
    o.agent_task_spec().timeout = std::chrono::seconds(60);
    ASSERT_TRUE(store_->Apply({o}, {}).ok());
  }
  Object Reconcile(const std::string& name) {
    auto r = reconciler_->Reconcile({Kind::kAgentTask, "default", name}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return *store_->Get({Kind::kAgentTask, "default", name});
  }

  sbx::testing::FakeClock clock_;
  SystemClock real_clock_;
  std::unique_ptr<SqliteStore> store_;
  sbx::testing::FakeCloudClients clouds_;
  std::unique_ptr<TaskLogWriter> writer_;
  RecordingEnqueuer enqueuer_;
  std::unique_ptr<SessionEventStreams> streams_;
  std::unique_ptr<AgentTaskReconciler> reconciler_;
  std::string session_;
};

TEST_F(AgentTaskWithStreamsTest, WhileTheStreamIsOpenAPassReadsNoTurnAndTheEventEndsTheTask) {
  CreateTask("t1");
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, api::TaskPhase::kSubmitted);
  EXPECT_EQ(clouds_.agents().AcceptedInputs(session_), 1);
  ASSERT_TRUE(PollUntil([&] { return enqueuer_.Count("t1") >= 1; }, In(milliseconds(5000))));
  EXPECT_EQ(Reconcile("t1").agent_task_status().phase, api::TaskPhase::kRunning);
  const int turn_reads = clouds_.agents().Calls("turn") + clouds_.agents().Calls("turns") +
                         clouds_.agents().Calls("items");
  Reconcile("t1");
  Reconcile("t1");
  EXPECT_EQ(clouds_.agents().Calls("turn") + clouds_.agents().Calls("turns") +
                clouds_.agents().Calls("items"),
            turn_reads);
  clouds_.agents().AddCommand(session_, "echo hi", "hi\n", 0);
  clouds_.agents().CompleteTurn(session_, oa::Usage{4, 5, 9, {}});
  ASSERT_TRUE(PollUntil([&] { return enqueuer_.Count("t1") >= 2; }, In(milliseconds(5000))));
  Object t = Reconcile("t1");
  EXPECT_EQ(t.agent_task_status().phase, api::TaskPhase::kSucceeded);
  EXPECT_EQ(t.agent_task_status().commands, 1);
  EXPECT_EQ(t.agent_task_status().result.usage.total_tokens, 9);
  // The command is in the log once although both the stream and the final sync saw it.
  const auto log = store_->ReadTaskLog(t.metadata.uid)->entries;
  EXPECT_EQ(std::count_if(log.begin(), log.end(),
                          [](const auto& e) { return e.kind == LogKind::kCommandResult; }),
            1);
  EXPECT_FALSE(streams_->Observe(session_, t.metadata.uid).has_value());  // unbound
}

TEST_F(AgentTaskWithStreamsTest, ALostPostIsResentAfterTheEnginesBackoffNotAFixedPeriod) {
  clouds_.agents().SetAutoStartTurns(false);
  CreateTask("t1");
  Reconcile("t1");
  ASSERT_EQ(clouds_.agents().IdempotencyKeys().size(), 1u);
  clock_.Advance(std::chrono::seconds(12));  // Delay(1) = 10 s ± 10 %
  Reconcile("t1");
  ASSERT_EQ(clouds_.agents().IdempotencyKeys().size(), 2u);
  clock_.Advance(std::chrono::seconds(12));  // Delay(2) = 20 s ± 10 %: not yet
  Reconcile("t1");
  EXPECT_EQ(clouds_.agents().IdempotencyKeys().size(), 2u);
  clock_.Advance(std::chrono::seconds(11));
  Reconcile("t1");
  EXPECT_EQ(clouds_.agents().IdempotencyKeys().size(), 3u);
}

}  // namespace
}  // namespace sbx::controller
