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

// Reference §2.3 `Turn`, with the TokenUsage of §1.4 and an unknown counter.
constexpr char kTurnJson[] = R"({
  "id": "turn_1", "object": "agent.session.turn", "session_id": "sess_1", "agent_id": "agent_7",
  "subagent_id": null, "status": "failed", "created_at": 1760000000, "started_at": 1760000001,
  "completed_at": null, "error": {"code": "connection_failed", "message": "no executor"},
  "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 7},
            "total_tokens": 150, "brand_new_tokens": 3, "note": "not an integer"}
})";

TEST(OpenAiWireFormatTest, DecodesTurnWithUsageAndError) {
  auto t = DecodeTurn(kTurnJson);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->id, "turn_1");
  EXPECT_EQ(t->session_id, "sess_1");
  EXPECT_EQ(t->agent_id, "agent_7");
  EXPECT_TRUE(t->is_root());
  EXPECT_EQ(t->status, TurnStatus::kFailed);
  EXPECT_EQ(t->created_at, 1760000000);
  EXPECT_EQ(t->started_at, 1760000001);
  EXPECT_FALSE(t->completed_at.has_value());
  ASSERT_TRUE(t->error.has_value());
  EXPECT_EQ(t->error->code, "connection_failed");
  EXPECT_EQ(t->error->message, "no executor");
  ASSERT_TRUE(t->usage.has_value());
  EXPECT_EQ(t->usage->input_tokens, 120);
  EXPECT_EQ(t->usage->output_tokens, 30);
  EXPECT_EQ(t->usage->total_tokens, 150);
  EXPECT_EQ(t->usage->details,
            (std::map<std::string, int64_t>{{"brand_new_tokens", 3},
                                            {"input_tokens_details.cached_tokens", 20},
                                            {"output_tokens_details.reasoning_tokens", 7}}));
}

TEST(OpenAiWireFormatTest, TurnWithoutSubagentIdOrUsageIsARootTurn) {
  auto t = DecodeTurn(R"({"id":"turn_2","session_id":"sess_1","status":"in_progress",
                          "created_at":5,"usage":null,"error":null})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->is_root());
  EXPECT_FALSE(t->agent_id.has_value());
  EXPECT_FALSE(t->usage.has_value());
  EXPECT_FALSE(t->error.has_value());
  auto sub = DecodeTurn(R"({"id":"turn_3","subagent_id":"subagent_1","status":"queued"})");
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_FALSE(sub->is_root());
  EXPECT_EQ(sub->subagent_id, "subagent_1");
  EXPECT_EQ(sub->status, TurnStatus::kQueued);
  EXPECT_EQ(DecodeTurn(R"({"status":"queued"})").status().code(), StatusCode::kInternal);
}

TEST(OpenAiWireFormatTest, DecodesTurnPageAndEmptyPageWithNullCursors) {
  auto page = DecodeTurnPage(R"({"object":"list","data":[
      {"id":"turn_2","session_id":"sess_1","subagent_id":null,"status":"completed","created_at":2},
      {"id":"turn_1","session_id":"sess_1","subagent_id":null,"status":"cancelled","created_at":1}],
      "has_more":true,"first_id":"turn_2","last_id":"turn_1"})");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->data.size(), 2u);
  EXPECT_EQ(page->data[1].status, TurnStatus::kCancelled);
  EXPECT_TRUE(page->has_more);
  EXPECT_EQ(page->first_id, "turn_2");
  EXPECT_EQ(page->last_id, "turn_1");
  auto empty = DecodeTurnPage(
      R"({"object":"list","data":[],"has_more":false,"first_id":null,"last_id":null})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->data.empty());
  EXPECT_FALSE(empty->has_more);
  EXPECT_EQ(empty->first_id, "");
  EXPECT_EQ(empty->last_id, "");
}

TEST(OpenAiWireFormatTest, DecodesMessageItemsConcatenatingTextParts) {
  auto user = DecodeItem(R"({"id":"msg_1","type":"message","role":"user","turn_id":"turn_1",
      "content":[{"type":"input_text","text":"Fix "},{"type":"input_image","image_url":"x"},
                 {"type":"input_text","text":"it"}],"phase":null,"status":"completed"})");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->type, ItemType::kMessage);
  EXPECT_EQ(user->role, "user");
  EXPECT_EQ(user->text, "Fix it");
  EXPECT_FALSE(user->phase.has_value());
  EXPECT_EQ(user->turn_id, "turn_1");
  EXPECT_EQ(user->status, ItemStatus::kCompleted);
  auto answer = DecodeItem(R"({"id":"msg_789","type":"message","role":"assistant",
      "content":[{"type":"output_text","text":"Acme competes on price","annotations":[]},
                 {"type":"refusal","refusal":"no"},{"type":"output_text","text":" and distribution."}],
      "phase":"final_answer","status":"completed","turn_id":"turn_1"})");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->role, "assistant");
  EXPECT_EQ(answer->text, "Acme competes on price and distribution.");
  EXPECT_EQ(answer->phase, "final_answer");
}

TEST(OpenAiWireFormatTest, DecodesCommandExecutionItems) {
  auto done = DecodeItem(R"({"id":"cmd_1","type":"command_execution","command":"pytest -q",
      "cwd":"/workspace","exit_code":3,"duration_ms":1520,"output":"1 failed\n",
      "status":"failed","turn_id":"turn_1"})");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->type, ItemType::kCommandExecution);
  EXPECT_EQ(done->command, "pytest -q");
  EXPECT_EQ(done->cwd, "/workspace");
  EXPECT_EQ(done->exit_code, 3);
  EXPECT_EQ(done->duration_ms, 1520);
  EXPECT_EQ(done->output, "1 failed\n");
  EXPECT_EQ(done->status, ItemStatus::kFailed);
  // Running, or killed by a cancel: no exit code, duration or output yet.
  auto running = DecodeItem(R"({"id":"cmd_2","type":"command_execution","command":"sleep 120",
      "cwd":null,"exit_code":null,"duration_ms":null,"output":null,"status":"incomplete"})");
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_FALSE(running->exit_code.has_value());
  EXPECT_FALSE(running->cwd.has_value());
  EXPECT_EQ(running->output, "");
  EXPECT_EQ(running->status, ItemStatus::kIncomplete);
  EXPECT_EQ(
      DecodeItem(R"({"id":"cmd_3","type":"command_execution","exit_code":"x"})").status().code(),
      StatusCode::kInternal);
}

TEST(OpenAiWireFormatTest, UnknownItemTypesDecodeAsOtherAndNeverFail) {
  auto page = DecodeItemPage(R"({"object":"list","has_more":false,"first_id":"fc_1","last_id":"r_1",
      "data":[
        {"id":"fc_1","type":"function_call","name":"f","arguments":"{}","status":{"weird":1}},
        {"id":"x_1","type":"hologram","role":42,"content":"not modelled","turn_id":7},
        {"id":"r_1","type":"reasoning","summary":[]}]})");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->data.size(), 3u);
  for (const Item& it : page->data) {
    EXPECT_EQ(it.type, ItemType::kOther) << it.id;
  }
  EXPECT_EQ(page->data[0].type_raw, "function_call");
  EXPECT_EQ(page->data[0].status, ItemStatus::kUnknown);
  EXPECT_EQ(page->data[1].type_raw, "hologram");
  EXPECT_FALSE(page->data[1].turn_id.has_value());
  EXPECT_EQ(DecodeItem(R"({"type":"message"})").status().code(), StatusCode::kInternal);
}

TEST(OpenAiWireFormatTest, TurnAndItemPagesRoundTrip) {
  Turn t;
  t.id = "turn_1";
  t.session_id = "sess_1";
  t.subagent_id = "sub_1";
  t.status = TurnStatus::kCompleted;
  t.created_at = 3;
  t.completed_at = 9;
  t.usage = Usage{.input_tokens = 1,
                  .output_tokens = 2,
                  .total_tokens = 3,
                  .details = {{"input_tokens_details.cached_tokens", 1}}};
  auto turns = DecodeTurnPage(EncodeTurnPage(TurnPage{.data = {t}}));
  ASSERT_TRUE(turns.ok()) << turns.status();
  ASSERT_EQ(turns->data.size(), 1u);
  EXPECT_EQ(turns->data[0].subagent_id, "sub_1");
  EXPECT_EQ(turns->data[0].completed_at, 9);
  EXPECT_EQ(turns->data[0].usage->details, t.usage->details);
  EXPECT_EQ(turns->first_id, "");

  Item cmd;
  cmd.id = "cmd_1";
  cmd.type = ItemType::kCommandExecution;
  cmd.turn_id = "turn_1";
  cmd.command = "ls";
  cmd.exit_code = 0;
  cmd.output = "a\n";
  cmd.status = ItemStatus::kCompleted;
  Item msg;
  msg.id = "msg_1";
  msg.type = ItemType::kMessage;
  msg.role = "assistant";
  msg.text = "done";
  msg.phase = "final_answer";
  auto items = DecodeItemPage(
      EncodeItemPage(ItemPage{.data = {cmd, msg}, .first_id = "cmd_1", .last_id = "msg_1"}));
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->data.size(), 2u);
  EXPECT_EQ(items->data[0].command, "ls");
  EXPECT_EQ(items->data[0].exit_code, 0);
  EXPECT_EQ(items->data[0].output, "a\n");
  EXPECT_EQ(items->data[1].text, "done");
  EXPECT_EQ(items->data[1].phase, "final_answer");
  EXPECT_EQ(items->last_id, "msg_1");
}

TEST(OpenAiWireFormatTest, EncodesTurnAndItemListQuery) {
  EXPECT_EQ(EncodeListQuery({}), "");
  EXPECT_EQ(EncodeListQuery({.limit = 100, .after = "turn 1", .order = ListOrder::kAsc}),
            "?limit=100&after=turn%201&order=asc");
  EXPECT_EQ(EncodeListQuery({.order = ListOrder::kDesc}), "?order=desc");
}

TEST(OpenAiWireFormatTest, TerminalTurnEventsCarryUsageFromTheEventOrTheTurn) {
  auto completed = DecodeSessionEvent(R"({"event_id":"e1","type":"agent.session.turn.completed",
      "session_id":"sess_1","turn_id":"turn_1",
      "turn":{"id":"turn_1","session_id":"sess_1","subagent_id":null,"status":"completed",
              "usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}},
      "usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}})");
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_TRUE(IsRootTurnTerminal(*completed));
  ASSERT_TRUE(completed->usage.has_value());
  EXPECT_EQ(completed->usage->total_tokens, 15);
  auto from_turn = DecodeSessionEvent(R"({"type":"agent.session.turn.failed","usage":null,
      "turn":{"id":"turn_1","status":"failed","error":{"code":"sandbox_error","message":"m"},
              "usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}})");
  ASSERT_TRUE(from_turn.ok()) << from_turn.status();
  EXPECT_EQ(from_turn->usage->total_tokens, 2);
  EXPECT_EQ(from_turn->turn->error->code, "sandbox_error");
  // Observed on the real service: usage null everywhere.
  auto none = DecodeSessionEvent(R"({"type":"agent.session.turn.cancelled","usage":null,
      "turn":{"id":"turn_1","status":"cancelled","usage":null,"error":null}})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->usage.has_value());
  EXPECT_TRUE(IsRootTurnTerminal(*none));
}

TEST(OpenAiWireFormatTest, SubagentTurnTerminalEventIsNotTheOutcome) {
  auto e = DecodeSessionEvent(R"({"event_id":"e2","type":"agent.session.turn.completed",
      "session_id":"sess_1","turn_id":"turn_9",
      "turn":{"id":"turn_9","session_id":"sess_1","subagent_id":"subagent_1","status":"completed"}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, EventKind::kTurnCompleted);
  EXPECT_FALSE(e->turn->is_root());
  EXPECT_FALSE(IsRootTurnTerminal(*e));
}

TEST(OpenAiWireFormatTest, ItemEventsCarryTheDecodedItem) {
  auto added = DecodeSessionEvent(R"({"event_id":"e3","type":"agent.session.turn.item.added",
      "session_id":"sess_1","turn_id":"turn_1","output_index":null,
      "item":{"id":"msg_1","type":"message","role":"user","status":"completed","turn_id":"turn_1",
              "content":[{"type":"input_text","text":"$ ls"}]}})");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->kind, EventKind::kItemAdded);
  ASSERT_TRUE(added->item.has_value());
  EXPECT_EQ(added->item->text, "$ ls");
  EXPECT_EQ(added->item_id, "msg_1");
  EXPECT_EQ(added->item_type, "message");
  EXPECT_FALSE(added->output_index.has_value());
  auto done = DecodeSessionEvent(R"({"event_id":"e4","type":"agent.session.turn.item.done",
      "session_id":"sess_1","turn_id":"turn_1","output_index":0,
      "item":{"id":"cmd_1","type":"command_execution","command":"ls","exit_code":0,
              "output":"a\n","status":"completed"}})");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->item->type, ItemType::kCommandExecution);
  EXPECT_EQ(done->item->exit_code, 0);
  EXPECT_EQ(done->output_index, 0);
  // An unknown item type in an event is kOther, and the event is still delivered.
  auto other = DecodeSessionEvent(R"({"type":"agent.session.turn.item.done",
      "item":{"id":"ws_1","type":"web_search_call","status":"completed"}})");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->item->type, ItemType::kOther);
  EXPECT_EQ(other->item_type, "web_search_call");
  // A null event turn_id falls back to the item's own.
  auto named = DecodeSessionEvent(R"({"type":"agent.session.turn.item.added","turn_id":null,
      "item":{"id":"msg_2","type":"message","role":"user","turn_id":"turn_4"}})");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->turn_id, "turn_4");
}

TEST(OpenAiWireFormatTest, TextAndCommandOutputDeltasCarryTheirItemAndIndexes) {
  auto delta = DecodeSessionEvent(
      R"({"type":"agent.session.turn.output_text.delta","item_id":"msg_789","output_index":0,"content_index":0,"delta":"Acme competes"})");
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_EQ(delta->item_id, "msg_789");
  EXPECT_EQ(delta->text, "Acme competes");
  EXPECT_EQ(delta->content_index, 0);
  auto done = DecodeSessionEvent(
      R"({"type":"agent.session.turn.output_text.done","item_id":"msg_789","output_index":0,"content_index":0,"text":"Acme competes on price and distribution."})");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->kind, EventKind::kOutputTextDone);
  EXPECT_EQ(done->text, "Acme competes on price and distribution.");
  auto out = DecodeSessionEvent(
      R"({"type":"agent.output.command_execution_output.delta","item_id":"cmd_1","output_index":2,"delta":"line\n","session_id":"sess_1","turn_id":null})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kind, EventKind::kCommandOutputDelta);
  EXPECT_EQ(out->item_id, "cmd_1");
  EXPECT_EQ(out->output_index, 2);
  EXPECT_EQ(out->text, "line\n");
  EXPECT_FALSE(out->turn_id.has_value());
}

TEST(OpenAiWireFormatTest, RequiresActionAndErrorEvents) {
  auto action = DecodeSessionEvent(R"({"event_id":"e5","type":"agent.session.requires_action",
      "session":{"id":"sess_1","status":"requires_action",
                 "required_actions":[{"type":"environment_connection","environment_id":"ccarenv_1"}]}})");
  ASSERT_TRUE(action.ok()) << action.status();
  EXPECT_EQ(action->kind, EventKind::kSessionRequiresAction);
  EXPECT_EQ(action->session_id, "sess_1");
  ASSERT_EQ(action->session->required_actions.size(), 1u);
  EXPECT_EQ(action->session->required_actions[0].environment_id, "ccarenv_1");
  auto error = DecodeSessionEvent(R"({"event_id":"e6","type":"error","session_id":"sess_1",
      "error":{"type":"server_error","message":"boom","code":"server_error","param":null}})");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_EQ(error->kind, EventKind::kError);
  EXPECT_EQ(error->error->code, "server_error");
  EXPECT_EQ(error->error->message, "boom");
}

TEST(OpenAiWireFormatTest, ItemAndUsageEventsRoundTrip) {
  SessionEvent e;
  e.event_id = "e7";
  e.type = "agent.session.turn.item.done";
  e.kind = EventKind::kItemDone;
  e.session_id = "sess_1";
  e.turn_id = "turn_1";
  Item item;
  item.id = "cmd_1";
  item.type = ItemType::kCommandExecution;
  item.command = "ls";
  item.exit_code = 1;
  e.item = item;
  e.output_index = 4;
  auto back = DecodeSessionEvent(EncodeSessionEvent(e));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->item->command, "ls");
  EXPECT_EQ(back->item->exit_code, 1);
  EXPECT_EQ(back->item_id, "cmd_1");
  EXPECT_EQ(back->output_index, 4);

  SessionEvent t;
  t.type = "agent.session.turn.completed";
  t.turn = Turn{.id = "turn_1", .status = TurnStatus::kCompleted};
  t.usage = Usage{.input_tokens = 4, .output_tokens = 5, .total_tokens = 9};
  auto tb = DecodeSessionEvent(EncodeSessionEvent(t));
  ASSERT_TRUE(tb.ok()) << tb.status();
  EXPECT_EQ(tb->usage->total_tokens, 9);
  EXPECT_TRUE(IsRootTurnTerminal(*tb));
}

TEST(OpenAiWireFormatTest, ItemEnumNames) {
  EXPECT_EQ(ParseItemType("command_execution"), ItemType::kCommandExecution);
  EXPECT_EQ(ParseItemType("mcp_call"), ItemType::kOther);
  EXPECT_EQ(ItemTypeName(ItemType::kMessage), "message");
  EXPECT_EQ(ItemTypeName(ItemType::kOther), "other");
  EXPECT_EQ(ParseItemStatus("incomplete"), ItemStatus::kIncomplete);
  EXPECT_EQ(ItemStatusName(ItemStatus::kUnknown), "unknown");
}

}  // namespace
}  // namespace sbx::controller::openai
