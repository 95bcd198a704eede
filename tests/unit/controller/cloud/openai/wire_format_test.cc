#include "controller/cloud/openai/wire_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sbx::controller::openai {
namespace {

using api::StatusCode;
using json = nlohmann::json;

constexpr char kSessionJson[] = R"({
  "id": "sess_123", "object": "agent.session", "status": "requires_action",
  "required_actions": [
    {"type": "environment_connection", "environment_id": "ccarenv_9"},
    {"type": "function_call", "turn_id": "turn_1", "call_id": "c1", "name": "f",
     "arguments": "{\"x\":1}"},
    {"type": "computer_use_approval_request", "future": true}
  ],
  "environment": {"type": "self_hosted", "id": "ccarenv_9",
                  "remote_url": "https://api.openai.com/v1/agents/api/connect/rt_1",
                  "workspace_directory": "/workspace", "capability_directories": ["/opt/tools"],
                  "brand_new_field": {"nested": [1, 2]}},
  "agent": {"id": "agent_1", "model": "gpt-5", "instructions": null, "name": "w",
            "reasoning": {"effort": "low"}, "tools": []},
  "created_at": 1760000000, "last_active_at": 1760000100.0,
  "error": null, "metadata": {"sbx.dev/worker": "default/w"}, "usage": null, "vault_ids": [],
  "unknown_top_level": "ignored"
})";

TEST(OpenAiWireFormatTest, DecodesSessionAndIgnoresUnknownFields) {
  auto s = DecodeSession(kSessionJson);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, "sess_123");
  EXPECT_EQ(s->status, SessionStatus::kRequiresAction);
  ASSERT_EQ(s->required_actions.size(), 3u);
  EXPECT_EQ(s->required_actions[0].type_raw, "environment_connection");
  EXPECT_EQ(s->required_actions[0].environment_id, "ccarenv_9");
  EXPECT_EQ(s->required_actions[1].call_id, "c1");
  EXPECT_EQ(s->required_actions[1].arguments, "{\"x\":1}");
  EXPECT_EQ(s->required_actions[2].type_raw, "computer_use_approval_request");
  EXPECT_EQ(s->environment.type, EnvironmentType::kSelfHosted);
  EXPECT_EQ(s->environment.id, "ccarenv_9");
  EXPECT_EQ(s->environment.remote_url, "https://api.openai.com/v1/agents/api/connect/rt_1");
  EXPECT_EQ(s->environment.workspace_directory, "/workspace");
  EXPECT_EQ(s->environment.capability_directories, std::vector<std::string>{"/opt/tools"});
  EXPECT_FALSE(s->environment.status.has_value());
  EXPECT_EQ(s->agent.model, "gpt-5");
  EXPECT_FALSE(s->agent.instructions.has_value());
  EXPECT_EQ(s->agent.name, "w");
  EXPECT_EQ(s->created_at, 1760000000);
  EXPECT_EQ(s->last_active_at, 1760000100);
  EXPECT_FALSE(s->error.has_value());
  EXPECT_EQ(s->metadata.at("sbx.dev/worker"), "default/w");
}

TEST(OpenAiWireFormatTest, ToleratesUnknownEnumValues) {
  auto s = DecodeSession(
      R"({"id":"sess_1","status":"hibernating","environment":{"type":"quantum","id":"e",
          "status":"teleporting"}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->status, SessionStatus::kUnknown);
  EXPECT_EQ(s->status_raw, "hibernating");
  EXPECT_EQ(s->environment.type, EnvironmentType::kUnknown);
  EXPECT_EQ(s->environment.type_raw, "quantum");
  ASSERT_TRUE(s->environment.status.has_value());
  EXPECT_EQ(*s->environment.status, EnvironmentStatus::kUnknown);
  EXPECT_EQ(s->environment.status_raw, "teleporting");
}

TEST(OpenAiWireFormatTest, SessionErrorMayBeStringOrObject) {
  auto a = DecodeSession(R"({"id":"s","status":"failed","error":"executor timed out"})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->error, "executor timed out");
  auto b = DecodeSession(R"({"id":"s","status":"failed","error":{"message":"boom"}})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->error, "boom");
}

TEST(OpenAiWireFormatTest, RejectsBodiesWeCannotRead) {
  EXPECT_EQ(DecodeSession("<html>bad gateway</html>").status().code(), StatusCode::kInternal);
  EXPECT_EQ(DecodeSession("[1,2]").status().code(), StatusCode::kInternal);
  EXPECT_EQ(DecodeSession(R"({"status":"idle"})").status().code(), StatusCode::kInternal);
  const auto wrong = DecodeSession(R"({"id":"s","metadata":{"k":1}})");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal);
  EXPECT_NE(wrong.status().message().find("metadata.k"), std::string::npos)
      << wrong.status().message();
  const auto env = DecodeSession(R"({"id":"s","environment":{"id":7}})");
  EXPECT_NE(env.status().message().find("environment.id"), std::string::npos);
}

TEST(OpenAiWireFormatTest, SessionRoundTrips) {
  auto s = DecodeSession(kSessionJson);
  ASSERT_TRUE(s.ok());
  auto again = DecodeSession(EncodeSession(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, s->id);
  EXPECT_EQ(again->status, s->status);
  EXPECT_EQ(again->environment.remote_url, s->environment.remote_url);
  EXPECT_EQ(again->environment.capability_directories, s->environment.capability_directories);
  EXPECT_EQ(again->required_actions.size(), 3u);
  EXPECT_EQ(again->required_actions[0].environment_id, "ccarenv_9");
  EXPECT_EQ(again->metadata, s->metadata);
  EXPECT_EQ(again->created_at, s->created_at);
}

TEST(OpenAiWireFormatTest, DecodesSessionPageWithNullCursorsOnEmptyPage) {
  auto page = DecodeSessionPage(
      R"({"object":"list","data":[],"has_more":false,"first_id":null,"last_id":null})");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->sessions.empty());
  EXPECT_FALSE(page->has_more);
  EXPECT_EQ(page->last_id, "");
  auto full = DecodeSessionPage(
      R"({"object":"list","data":[{"id":"sess_a"},{"id":"sess_b"}],"has_more":true,
          "first_id":"sess_a","last_id":"sess_b"})");
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->sessions.size(), 2u);
  EXPECT_TRUE(full->has_more);
  EXPECT_EQ(full->last_id, "sess_b");
  EXPECT_NE(
      DecodeSessionPage(R"({"data":[{"id":"a"},{"id":3}]})").status().message().find("data[1].id"),
      std::string::npos);
}

TEST(OpenAiWireFormatTest, DecodesEnvironmentWithEveryStatus) {
  for (const char* status :
       {"pending", "ready", "connected", "disconnected", "suspended", "expired", "failed"}) {
    auto e = DecodeEnvironment(std::string(R"({"id":"ccarenv_1","object":"agent.environment",
        "type":"self_hosted","status":")") +
                               status + R"(","files":[],"plugins":[],"skills":[]})");
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(EnvironmentStatusName(e->status), status);
    EXPECT_EQ(e->type, EnvironmentType::kSelfHosted);
  }
  auto odd = DecodeEnvironment(R"({"id":"e","status":"warming_up","type":"x"})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->status, EnvironmentStatus::kUnknown);
  EXPECT_EQ(odd->status_raw, "warming_up");
  auto again = DecodeEnvironment(EncodeEnvironment(*odd));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status_raw, "warming_up");
}

TEST(OpenAiWireFormatTest, DeletedBody) {
  EXPECT_TRUE(
      DecodeSessionDeleted(R"({"id":"s","object":"agent.session.deleted","deleted":true})").ok());
  EXPECT_EQ(DecodeSessionDeleted(R"({"id":"s","deleted":false})").code(), StatusCode::kInternal);
  EXPECT_TRUE(DecodeSessionDeleted(R"({"id":"s"})").ok());
}

TEST(OpenAiWireFormatTest, EncodesSelfHostedCreateRequest) {
  CreateSessionRequest r;
  r.model = "gpt-5";
  r.instructions = "be brief";
  r.workspace_directory = "/home/sandbox-agent/workspace";
  r.metadata = {{"sbx.dev/uid", "u1"}};
  const json j = json::parse(EncodeCreateSessionRequest(r));
  EXPECT_EQ(j["agent"]["model"], "gpt-5");
  EXPECT_EQ(j["agent"]["instructions"], "be brief");
  EXPECT_EQ(j["environment"]["type"], "self_hosted");
  EXPECT_EQ(j["environment"]["workspace_directory"], "/home/sandbox-agent/workspace");
  EXPECT_FALSE(j["environment"].contains("capability_directories"));
  EXPECT_EQ(j["metadata"]["sbx.dev/uid"], "u1");
  EXPECT_FALSE(j.contains("input"));
  EXPECT_FALSE(j.contains("stream"));
  r.instructions.reset();
  r.metadata.clear();
  const json k = json::parse(EncodeCreateSessionRequest(r));
  EXPECT_FALSE(k["agent"].contains("instructions"));
  EXPECT_FALSE(k.contains("metadata"));
}

TEST(OpenAiWireFormatTest, EncodesMessageAndCancelEvents) {
  const std::string body =
      EncodeInputEvents({InputEvent::UserMessage("hi \"there\""), InputEvent::Cancel()});
  const json j = json::parse(body);
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["events"][0]["type"], "agent.session.input.message");
  EXPECT_EQ(j["events"][0]["input"][0]["role"], "user");
  EXPECT_EQ(j["events"][0]["input"][0]["content"][0]["type"], "input_text");
  EXPECT_EQ(j["events"][0]["input"][0]["content"][0]["text"], "hi \"there\"");
  EXPECT_EQ(j["events"][1], json({{"type", "agent.session.input.cancel"}}));
  auto back = DecodeInputEvents(body);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].text, "hi \"there\"");
  EXPECT_EQ((*back)[1].kind, InputEvent::Kind::kCancel);
  EXPECT_EQ(
      DecodeInputEvents(R"({"events":[{"type":"agent.session.input.dance"}]})").status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeInputEvents(R"({"events":[]})").status().code(), StatusCode::kInvalidArgument);
}

TEST(OpenAiWireFormatTest, EncodesListQuery) {
  EXPECT_EQ(EncodeListSessionsQuery({}), "");
  EXPECT_EQ(EncodeListSessionsQuery(
                {.limit = 50, .after = "sess_a b", .agent_id = "ag", .order = ListOrder::kAsc}),
            "?limit=50&after=sess_a%20b&agent_id=ag&order=asc");
}

TEST(OpenAiWireFormatTest, ClassifiesEventTypes) {
  EXPECT_EQ(ClassifyEventType("agent.session.idle"), EventKind::kSessionIdle);
  EXPECT_EQ(ClassifyEventType("agent.session.turn.completed"), EventKind::kTurnCompleted);
  EXPECT_EQ(ClassifyEventType("agent.session.environment.connected"),
            EventKind::kEnvironmentStatus);
  EXPECT_EQ(ClassifyEventType("agent.session.environment.suspended"),
            EventKind::kEnvironmentStatus);
  EXPECT_EQ(ClassifyEventType("agent.session.environment.reset"), EventKind::kOther);
  EXPECT_EQ(ClassifyEventType("agent.session.subagent.created"), EventKind::kOther);
  EXPECT_EQ(ClassifyEventType("agent.session.something.new"), EventKind::kOther);
  EXPECT_EQ(ClassifyEventType("error"), EventKind::kError);
}

TEST(OpenAiWireFormatTest, DecodesSessionLevelEvent) {
  auto e = DecodeSessionEvent(
      R"({"event_id":"ev1","type":"agent.session.idle","session":{"id":"sess_1","status":"idle"}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, EventKind::kSessionIdle);
  EXPECT_EQ(e->event_id, "ev1");
  EXPECT_EQ(e->session_id, "sess_1");
  ASSERT_TRUE(e->session.has_value());
  EXPECT_EQ(e->session->status, SessionStatus::kIdle);
}

TEST(OpenAiWireFormatTest, DecodesEnvironmentEventStatusFromTypeWhenPayloadLacksIt) {
  auto e = DecodeSessionEvent(
      R"({"event_id":"ev2","type":"agent.session.environment.failed","session_id":"s",
          "turn_id":null,"environment":{"id":"ccarenv_1","type":"self_hosted",
          "error":{"code":"sandbox_error","message":"no space","type":"server_error"}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, EventKind::kEnvironmentStatus);
  EXPECT_FALSE(e->turn_id.has_value());
  ASSERT_TRUE(e->environment.has_value());
  EXPECT_EQ(e->environment->id, "ccarenv_1");
  EXPECT_EQ(e->environment->status, EnvironmentStatus::kFailed);
  ASSERT_TRUE(e->error.has_value());
  EXPECT_EQ(e->error->code, "sandbox_error");
  EXPECT_EQ(e->error->message, "no space");
}

TEST(OpenAiWireFormatTest, DecodesTurnEventsAndRootTerminal) {
  auto root = DecodeSessionEvent(
      R"({"event_id":"e","type":"agent.session.turn.failed","session_id":"s","turn_id":"turn_1",
          "turn":{"id":"turn_1","object":"agent.session.turn","session_id":"s","agent_id":"a",
          "subagent_id":null,"status":"failed","error":{"code":"rate_limit_exceeded",
          "message":"slow down"}},"usage":null})");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->kind, EventKind::kTurnFailed);
  ASSERT_TRUE(root->turn.has_value());
  EXPECT_EQ(root->turn->status, TurnStatus::kFailed);
  ASSERT_TRUE(root->turn->error.has_value());
  EXPECT_EQ(root->turn->error->code, "rate_limit_exceeded");
  EXPECT_TRUE(IsRootTurnTerminal(*root));

  auto sub = DecodeSessionEvent(
      R"({"event_id":"e","type":"agent.session.turn.completed","session_id":"s",
          "turn":{"id":"turn_2","subagent_id":"sub_1","status":"completed"}})");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->turn_id, "turn_2");
  EXPECT_FALSE(IsRootTurnTerminal(*sub));

  auto created = DecodeSessionEvent(
      R"({"event_id":"e","type":"agent.session.turn.created","session_id":"s",
          "turn":{"id":"turn_3","status":"queued"}})");
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(IsRootTurnTerminal(*created));
}

TEST(OpenAiWireFormatTest, DecodesDeltasItemsAndErrors) {
  auto delta = DecodeSessionEvent(
      R"({"type":"agent.session.turn.output_text.delta","item_id":"msg_789","output_index":0,
          "content_index":0,"delta":"Acme competes"})");
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->kind, EventKind::kOutputTextDelta);
  EXPECT_EQ(delta->item_id, "msg_789");
  EXPECT_EQ(delta->text, "Acme competes");
  auto done = DecodeSessionEvent(
      R"({"type":"agent.session.turn.output_text.done","item_id":"msg_789","text":"full"})");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->text, "full");
  auto item = DecodeSessionEvent(
      R"({"type":"agent.session.turn.item.done","session_id":"s","turn_id":"t",
          "item":{"id":"ci_1","type":"command_execution","command":"ls","exit_code":0},
          "output_index":1})");
  ASSERT_TRUE(item.ok());
  EXPECT_EQ(item->item_id, "ci_1");
  EXPECT_EQ(item->item_type, "command_execution");
  auto err = DecodeSessionEvent(
      R"({"type":"error","session_id":"s","error":{"type":"server_error","message":"oops",
          "code":null,"param":null}})");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->kind, EventKind::kError);
  EXPECT_EQ(err->error->message, "oops");
  EXPECT_EQ(err->error->code, "");
}

TEST(OpenAiWireFormatTest, UnknownEventTypeKeepsRawJson) {
  const std::string data =
      R"({"type":"agent.session.subagent.created","event_id":"e9","subagent":{"id":"x"}})";
  auto e = DecodeSessionEvent(data);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, EventKind::kOther);
  EXPECT_EQ(e->type, "agent.session.subagent.created");
  EXPECT_EQ(e->raw_json, data);
}

TEST(OpenAiWireFormatTest, RejectsEventWithoutType) {
  EXPECT_EQ(DecodeSessionEvent(R"({"event_id":"e"})").status().code(), StatusCode::kInternal);
  EXPECT_EQ(DecodeSessionEvent("[DONE]").status().code(), StatusCode::kInternal);
}

TEST(OpenAiWireFormatTest, SessionEventRoundTrips) {
  SessionEvent e;
  e.event_id = "ev";
  e.type = "agent.session.environment.connected";
  e.kind = EventKind::kEnvironmentStatus;
  e.session_id = "sess_1";
  e.environment = Environment{.id = "ccarenv_1",
                              .type = EnvironmentType::kSelfHosted,
                              .status = EnvironmentStatus::kConnected};
  auto back = DecodeSessionEvent(EncodeSessionEvent(e));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->session_id, "sess_1");
  EXPECT_EQ(back->environment->status, EnvironmentStatus::kConnected);

  SessionEvent t;
  t.event_id = "ev2";
  t.type = "agent.session.turn.cancelled";
  t.kind = EventKind::kTurnCancelled;
  t.session_id = "sess_1";
  t.turn_id = "turn_1";
  t.turn = Turn{.id = "turn_1", .session_id = "sess_1", .status = TurnStatus::kCancelled};
  auto tb = DecodeSessionEvent(EncodeSessionEvent(t));
  ASSERT_TRUE(tb.ok());
  EXPECT_TRUE(IsRootTurnTerminal(*tb));
  EXPECT_EQ(tb->turn->status, TurnStatus::kCancelled);
}

TEST(OpenAiWireFormatTest, EnumNamesRoundTrip) {
  for (auto s : {SessionStatus::kIdle, SessionStatus::kInProgress, SessionStatus::kRequiresAction,
                 SessionStatus::kFailed}) {
    EXPECT_EQ(ParseSessionStatus(SessionStatusName(s)), s);
  }
  for (auto s : {TurnStatus::kQueued, TurnStatus::kInProgress, TurnStatus::kWaiting,
                 TurnStatus::kCompleted, TurnStatus::kFailed, TurnStatus::kCancelled}) {
    EXPECT_EQ(ParseTurnStatus(TurnStatusName(s)), s);
  }
  EXPECT_EQ(ParseEnvironmentType("openai_hosted"), EnvironmentType::kOpenAiHosted);
  EXPECT_EQ(ParseSessionStatus(""), SessionStatus::kUnknown);
  EXPECT_EQ(SessionStatusName(SessionStatus::kUnknown), "unknown");
}

}  // namespace
}  // namespace sbx::controller::openai
