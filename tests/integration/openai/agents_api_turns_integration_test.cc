// HttpAgentsApi against the OpenAI emulator over loopback, with the stand-in executor running as
// a real `sbx-emulator executor` process: the surface an AgentTask needs (reference §1.2, §2) —
// subscribe, submit input with an Idempotency-Key, follow the turn to its root terminal event,
// then read it back with ListTurns / GetTurn / ListTurnItems / ListItems; a replayed key starts
// no second turn. Every body is decoded by the client's wire format, so the emulator and the
// client cannot drift apart.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/openai/http_agents_api.h"
#include "emulator/openai/openai_emulator.h"
#include "tests/support/process.h"

namespace sbx::controller::openai {
namespace {

using namespace std::chrono_literals;
using testing::In;
using testing::PollUntil;

constexpr char kAppKey[] = "sk-test-app";
constexpr char kExecKey[] = "sk-test-exec";

class AgentsApiTurnsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbx-turns-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    workspace_ = dir_ / "workspace";
    std::filesystem::create_directories(workspace_);
    emulator::OpenAiEmulator::Options o;
    o.api_keys = {kAppKey};
    o.executor_keys = {kExecKey};
    o.connection_wait = 20s;
    emulator_ = std::make_unique<emulator::OpenAiEmulator>(o);
    ASSERT_TRUE(emulator_->Start().ok());
    transport_ = http::MakeCppRestTransport();
    streaming_ = http::MakeCppRestStreamingTransport();
    api_ = std::make_unique<HttpAgentsApi>(
        HttpAgentsApiOptions{.base_url = emulator_->base_url(), .request_timeout = 30s}, kAppKey,
        bucket_, clock_, *transport_, *streaming_);
  }
  void TearDown() override {
    executor_.reset();
    api_.reset();
    emulator_->Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A session with a connected stand-in executor.
  Session ConnectedSession() {
    auto session =
        api_->CreateSession({.model = "gpt-test", .workspace_directory = workspace_.string()}, {});
    EXPECT_TRUE(session.ok()) << session.status();
    auto executor = testing::Process::Start(
        SBX_EMULATOR_BIN, {.args = {"executor", "--remote", session->environment.remote_url,
                                    "--environment-id", session->environment.id},
                           .env = {{"CODEX_API_KEY", kExecKey}},
                           .stdout_path = dir_ / "executor.out",
                           .stderr_path = dir_ / "executor.err"});
    EXPECT_TRUE(executor.ok()) << executor.status();
    executor_ = std::move(*executor);
    EXPECT_TRUE(PollUntil(
        [&] {
          auto env = api_->GetEnvironment(session->environment.id, {});
          return env.ok() && env->status == EnvironmentStatus::kConnected;
        },
        In(15s)));
    return *session;
  }

  SystemClock clock_;
  EndpointPacing bucket_{clock_, 0, 1};
  std::filesystem::path dir_;
  std::filesystem::path workspace_;
  std::unique_ptr<emulator::OpenAiEmulator> emulator_;
  std::unique_ptr<http::HttpTransport> transport_;
  std::unique_ptr<http::StreamingTransport> streaming_;
  std::unique_ptr<HttpAgentsApi> api_;
  std::unique_ptr<testing::Process> executor_;
};

TEST_F(AgentsApiTurnsIntegrationTest, RunsATurnOnceAndReadsItBackAsTurnsAndItems) {
  const Session session = ConnectedSession();
  const std::string input = "please run\n$ echo hi\n$ echo oops >&2; exit 3";

  // Subscribe first (reference §2.2), submit from on_open, stop at the root turn's outcome.
  std::mutex mu;
  std::vector<SessionEvent> events;  // Guarded by mu.
  Status submitted;
  Status streamed = api_->StreamEvents(
      session.id,
      StreamCallbacks{.on_open =
                          [&] {
                            submitted = api_->SendEvents(
                                session.id, {InputEvent::UserMessage(input)}, "task-uid-1", {});
                          },
                      .on_event =
                          [&](const SessionEvent& e) {
                            std::lock_guard lock(mu);
                            events.push_back(e);
                            return !IsRootTurnTerminal(e);
                          }},
      {});
  ASSERT_TRUE(submitted.ok()) << submitted;
  ASSERT_TRUE(streamed.ok()) << streamed << "\n" << executor_->Stderr();
  ASSERT_FALSE(events.empty());
  const SessionEvent& outcome = events.back();
  ASSERT_EQ(outcome.kind, EventKind::kTurnCompleted);
  ASSERT_TRUE(outcome.turn_id.has_value());
  const std::string turn_id = *outcome.turn_id;
  std::string streamed_output;
  std::vector<Item> done_items;
  for (const SessionEvent& e : events) {
    if (e.kind == EventKind::kCommandOutputDelta) {
      streamed_output += e.text;
    }
    if (e.kind == EventKind::kItemDone) {
      ASSERT_TRUE(e.item.has_value()) << e.raw_json;
      done_items.push_back(*e.item);
    }
  }
  EXPECT_NE(streamed_output.find("hi\n"), std::string::npos) << streamed_output;
  ASSERT_EQ(done_items.size(), 3u);  // two commands, then the final message
  EXPECT_EQ(done_items[1].exit_code, 3);

  // The turn, as listed and as retrieved.
  auto turns = api_->ListTurns(session.id, {.limit = 10}, {});
  ASSERT_TRUE(turns.ok()) << turns.status();
  ASSERT_EQ(turns->data.size(), 1u);
  EXPECT_EQ(turns->data[0].id, turn_id);
  EXPECT_TRUE(turns->data[0].is_root());
  EXPECT_EQ(turns->first_id, turn_id);
  auto turn = api_->GetTurn(session.id, turn_id, {});
  ASSERT_TRUE(turn.ok()) << turn.status();
  EXPECT_EQ(turn->status, TurnStatus::kCompleted);
  EXPECT_EQ(turn->session_id, session.id);
  EXPECT_TRUE(turn->completed_at.has_value());
  EXPECT_EQ(api_->GetTurn(session.id, "turn_nope", {}).status().code(), api::StatusCode::kNotFound);

  // Its items, oldest first: the user input, both commands with their results, the answer.
  auto items = api_->ListAllTurnItems(session.id, turn_id, {.limit = 2, .order = ListOrder::kAsc});
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 4u);
  EXPECT_EQ((*items)[0].type, ItemType::kMessage);
  EXPECT_EQ((*items)[0].role, "user");
  EXPECT_EQ((*items)[0].text, input);
  EXPECT_EQ((*items)[1].type, ItemType::kCommandExecution);
  EXPECT_EQ((*items)[1].command, "echo hi");
  EXPECT_EQ((*items)[1].exit_code, 0);
  EXPECT_EQ((*items)[1].output, "hi\n");
  EXPECT_EQ((*items)[1].cwd, workspace_.string());
  EXPECT_EQ((*items)[1].status, ItemStatus::kCompleted);
  EXPECT_EQ((*items)[2].exit_code, 3);
  EXPECT_NE((*items)[2].output.find("oops"), std::string::npos);
  EXPECT_EQ((*items)[3].role, "assistant");
  EXPECT_EQ((*items)[3].phase, "final_answer");
  EXPECT_EQ((*items)[3].text, done_items[2].text);
  for (const Item& item : *items) {
    EXPECT_EQ(item.turn_id, turn_id) << item.id;
  }
  auto session_items = api_->ListItems(session.id, {}, {});  // default order: newest first
  ASSERT_TRUE(session_items.ok()) << session_items.status();
  ASSERT_EQ(session_items->data.size(), 4u);
  EXPECT_EQ(session_items->data[0].id, (*items)[3].id);

  // The same Idempotency-Key again (a retry after a crash) is accepted and starts no turn: a
  // later input with a new key runs as the second turn, and turns run one at a time in order,
  // so a turn from the replay would have been listed before it.
  Status replayed, next;
  streamed = api_->StreamEvents(
      session.id,
      StreamCallbacks{.on_open =
                          [&] {
                            replayed = api_->SendEvents(
                                session.id, {InputEvent::UserMessage(input)}, "task-uid-1", {});
                            next = api_->SendEvents(session.id,
                                                    {InputEvent::UserMessage("$ echo two")},
                                                    "task-uid-2", {});
                          },
                      .on_event = [&](const SessionEvent& e) { return !IsRootTurnTerminal(e); }},
      {});
  ASSERT_TRUE(replayed.ok()) << replayed;
  ASSERT_TRUE(next.ok()) << next;
  ASSERT_TRUE(streamed.ok()) << streamed;
  auto again = api_->ListTurns(session.id, {.order = ListOrder::kAsc}, {});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->data.size(), 2u);
  EXPECT_EQ(again->data[0].id, turn_id);
  auto second = api_->ListTurnItems(session.id, again->data[1].id, {.order = ListOrder::kAsc}, {});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_FALSE(second->data.empty());
  EXPECT_EQ(second->data[0].text, "$ echo two");
}

TEST_F(AgentsApiTurnsIntegrationTest, EmptyListsHaveEmptyCursorsAndBadLimitsAreRejected) {
  auto session =
      api_->CreateSession({.model = "gpt-test", .workspace_directory = workspace_.string()}, {});
  ASSERT_TRUE(session.ok()) << session.status();
  auto turns = api_->ListTurns(session->id, {}, {});
  ASSERT_TRUE(turns.ok()) << turns.status();
  EXPECT_TRUE(turns->data.empty());
  EXPECT_FALSE(turns->has_more);
  EXPECT_EQ(turns->first_id, "");
  EXPECT_EQ(turns->last_id, "");
  auto items = api_->ListItems(session->id, {.limit = 100}, {});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_TRUE(items->data.empty());
  EXPECT_EQ(api_->ListTurns("sess_missing", {}, {}).status().code(), api::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sbx::controller::openai
