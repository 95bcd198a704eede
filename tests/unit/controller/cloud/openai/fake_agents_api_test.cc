// FakeAgentsApi's turn model behaves like the service (reference §2): input starts a root turn
// whose events reach an open stream, a repeated Idempotency-Key is deduped, cancel ends the turn,
// and the saved turns and items page like the real lists. Tests of reconcilers rely on it.
#include "tests/fakes/fake_agents_api.h"

#include <gtest/gtest.h>

#include <thread>

namespace sbx::testing {
namespace {

using api::StatusCode;
using oa::EventKind;
using oa::InputEvent;
using oa::SessionEvent;

class FakeAgentsApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = fake_.CreateSession({.model = "m", .workspace_directory = "/workspace"}, {});
    ASSERT_TRUE(s.ok());
    id_ = s->id;
  }

  // Streams the session on a thread until the root turn's terminal event.
  void Subscribe() {
    reader_ = std::jthread([this](std::stop_token stop) {
      end_ = fake_.StreamEvents(
          id_,
          [this](const SessionEvent& e) {
            events_.push_back(e);
            return !oa::IsRootTurnTerminal(e);
          },
          stop);
    });
    ASSERT_TRUE(fake_.WaitForSubscribers(id_, 1));
  }

  std::vector<std::string> Types() const {
    std::vector<std::string> types;
    for (const SessionEvent& e : events_) {
      types.push_back(e.type);
    }
    return types;
  }

  FakeAgentsApi fake_;
  std::string id_;
  std::jthread reader_;
  std::vector<SessionEvent> events_;  // written by reader_ until it is joined
  api::Status end_;
};

TEST_F(FakeAgentsApiTest, InputStartsATurnWhoseEventsReachTheStreamInOrder) {
  Subscribe();
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("$ ls")}, "uid-1", {}).ok());
  fake_.EmitSubagentTurn(id_, "subagent_1");
  const std::string cmd = fake_.AddCommand(id_, "ls", "a\n", 0);
  fake_.AddAssistantMessage(id_, "Ran ls.");
  fake_.CompleteTurn(id_, oa::Usage{.input_tokens = 1, .output_tokens = 2, .total_tokens = 3});
  reader_.join();
  ASSERT_TRUE(end_.ok()) << end_;
  EXPECT_EQ(Types(), (std::vector<std::string>{
                         "agent.session.turn.created",
                         "agent.session.turn.item.added",
                         "agent.session.in_progress",
                         "agent.session.turn.in_progress",
                         "agent.session.turn.created",
                         "agent.session.turn.completed",
                         "agent.session.turn.item.added",
                         "agent.output.command_execution_output.delta",
                         "agent.session.turn.item.done",
                         "agent.session.turn.item.added",
                         "agent.session.turn.output_text.delta",
                         "agent.session.turn.output_text.done",
                         "agent.session.turn.item.done",
                         "agent.session.turn.completed",
                     }));
  // The subagent's terminal event did not end the reader; the root's did, with its usage.
  EXPECT_FALSE(events_[5].turn->is_root());
  EXPECT_EQ(events_.back().usage->total_tokens, 3);
  EXPECT_EQ(events_[8].item->id, cmd);
  EXPECT_EQ(events_[8].item->exit_code, 0);
  EXPECT_EQ(events_[7].kind, EventKind::kCommandOutputDelta);
  EXPECT_EQ(events_[7].text, "a\n");
  EXPECT_EQ(events_[11].text, "Ran ls.");
  EXPECT_EQ(fake_.GetSession(id_, {})->status, oa::SessionStatus::kIdle);
}

TEST_F(FakeAgentsApiTest, ARepeatedIdempotencyKeyIsAcceptedButStartsNoSecondTurn) {
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("go")}, "uid-1", {}).ok());
  fake_.CompleteTurn(id_);
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("go")}, "uid-1", {}).ok());
  EXPECT_EQ(fake_.Turns(id_).size(), 1u);
  EXPECT_EQ(fake_.AcceptedInputs(id_), 1);
  EXPECT_EQ(fake_.Deduped(id_), 1);
  EXPECT_EQ(fake_.IdempotencyKeys(), (std::vector<std::string>{"uid-1", "uid-1"}));
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("again")}, "uid-2", {}).ok());
  EXPECT_EQ(fake_.Turns(id_).size(), 2u);
  EXPECT_EQ(fake_.Calls("send"), 3);
}

TEST_F(FakeAgentsApiTest, InputDuringATurnSteersItAndCancelEndsIt) {
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("first")}, "", {}).ok());
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::UserMessage("steer")}, "", {}).ok());
  EXPECT_EQ(fake_.Turns(id_).size(), 1u);
  EXPECT_EQ(fake_.AcceptedInputs(id_), 2);
  ASSERT_TRUE(fake_.SendEvents(id_, {InputEvent::Cancel()}, "", {}).ok());
  EXPECT_EQ(fake_.Calls("cancel"), 1);
  auto turn = fake_.GetTurn(id_, fake_.Turns(id_)[0].id, {});
  ASSERT_TRUE(turn.ok());
  EXPECT_EQ(turn->status, oa::TurnStatus::kCancelled);
  EXPECT_EQ(fake_.GetSession(id_, {})->status, oa::SessionStatus::kIdle);
}

TEST_F(FakeAgentsApiTest, FailedTurnCarriesItsErrorCode) {
  fake_.StartTurn(id_, "go");
  fake_.FailTurn(id_, "connection_failed", "no executor");
  auto turns = fake_.ListTurns(id_, {}, {});
  ASSERT_TRUE(turns.ok());
  ASSERT_EQ(turns->data.size(), 1u);
  EXPECT_EQ(turns->data[0].status, oa::TurnStatus::kFailed);
  EXPECT_EQ(turns->data[0].error->code, "connection_failed");
}

TEST_F(FakeAgentsApiTest, TurnsAndItemsPageLikeTheService) {
  std::vector<std::string> turn_ids;
  for (int i = 0; i < 3; ++i) {
    turn_ids.push_back(fake_.StartTurn(id_, "t" + std::to_string(i)));
    fake_.AddCommand(id_, "echo " + std::to_string(i), std::to_string(i) + "\n", i);
    fake_.CompleteTurn(id_);
  }
  // Root turns, newest first by default; `after` continues past the given id.
  auto page = fake_.ListTurns(id_, {.limit = 2}, {});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->data.size(), 2u);
  EXPECT_EQ(page->data[0].id, turn_ids[2]);
  EXPECT_TRUE(page->has_more);
  auto rest = fake_.ListTurns(id_, {.limit = 2, .after = page->last_id}, {});
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->data.size(), 1u);
  EXPECT_EQ(rest->data[0].id, turn_ids[0]);
  EXPECT_FALSE(rest->has_more);
  // One turn's items, oldest first: the user input, then the command with its result.
  auto items = fake_.ListAllTurnItems(id_, turn_ids[1]);
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].text, "t1");
  EXPECT_EQ((*items)[1].exit_code, 1);
  EXPECT_EQ((*items)[1].status, oa::ItemStatus::kFailed);
  auto all = fake_.ListItems(id_, {.limit = 100, .order = oa::ListOrder::kAsc}, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->data.size(), 6u);
  // An empty page has empty cursors; bad params and unknown turns are errors.
  auto other = fake_.CreateSession({.model = "m", .workspace_directory = "/w"}, {});
  auto empty = fake_.ListTurns(other->id, {}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->data.empty());
  EXPECT_EQ(empty->first_id, "");
  EXPECT_EQ(fake_.ListTurns(id_, {.limit = 101}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_.GetTurn(id_, "turn_nope", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fake_.ListTurnItems("sess_nope", "t", {}, {}).status().code(), StatusCode::kNotFound);
}

TEST_F(FakeAgentsApiTest, StreamsEndOnStopOnCloseAndOnDelete) {
  std::jthread stopped([this](std::stop_token stop) {
    EXPECT_EQ(fake_
                  .StreamEvents(
                      id_, [](const SessionEvent&) { return true; }, stop)
                  .code(),
              StatusCode::kCancelled);
  });
  ASSERT_TRUE(fake_.WaitForSubscribers(id_, 1));
  stopped.request_stop();
  stopped.join();

  std::jthread dropped([this] {
    EXPECT_EQ(fake_.StreamEvents(id_, [](const SessionEvent&) { return true; }).code(),
              StatusCode::kUnavailable);
  });
  ASSERT_TRUE(fake_.WaitForSubscribers(id_, 1));
  fake_.CloseStreams(id_, api::UnavailableError("dropped"));
  dropped.join();

  fake_.SetStrictDelete(false);
  std::jthread deleted([this] {
    EXPECT_TRUE(fake_.StreamEvents(id_, [](const SessionEvent&) { return true; }).ok());
  });
  ASSERT_TRUE(fake_.WaitForSubscribers(id_, 1));
  ASSERT_TRUE(fake_.DeleteSession(id_, {}).ok());
  deleted.join();

  fake_.FailNext("stream", api::UnavailableError("refused"));
  EXPECT_EQ(fake_.StreamEvents("sess_x", [](const SessionEvent&) { return true; }).code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sbx::testing
