// HttpAgentsApi over scripted fake transports: headers, paths, bodies, retries and redaction.
#include "controller/cloud/openai/http_agents_api.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tests/unit/controller/cloud/http/fake_transport.h"

namespace sbx::controller::openai {
namespace {

using api::StatusCode;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpResult;
using http::StreamHandlers;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kKey[] = "sk-proj-SECRET-application-key-123";

// A Clock whose sleeps return at once and move time forward; records every sleep.
class InstantClock final : public Clock {
 public:
  WallTime Now() const override {
    return WallTime(std::chrono::seconds(1788264000)) + (steady_ - SteadyTime{});
  }
  SteadyTime Steady() const override { return steady_; }
  bool SleepUntil(SteadyTime deadline, std::stop_token stop) override {
    if (stop.stop_requested()) {
      return false;
    }
    sleeps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_));
    steady_ = std::max(steady_, deadline);
    return true;
  }
  std::vector<std::chrono::milliseconds> sleeps;

 private:
  SteadyTime steady_{};
};

HttpResult Reply(int status, std::string body = "",
                 std::map<std::string, std::string> headers = {}) {
  HttpResult r;
  r.response.status = status;
  r.response.body = std::move(body);
  r.response.headers = std::move(headers);
  return r;
}

HttpResult TransportError(StatusCode code, bool maybe_sent) {
  HttpResult r;
  r.status = api::Status(code, "GET http://x: connection refused");
  r.maybe_sent = maybe_sent;
  return r;
}

class ScriptedTransport final : public http::HttpTransport {
 public:
  HttpResult Send(const HttpRequest& request, std::stop_token) override {
    std::lock_guard lock(mu);
    requests.push_back(request);
    if (replies.empty()) {
      return Reply(500, "no scripted reply");
    }
    HttpResult r = replies.front();
    replies.pop_front();
    return r;
  }
  std::mutex mu;
  std::deque<HttpResult> replies;
  std::vector<HttpRequest> requests;
};

// Streams scripted chunks through the handlers, or answers with a scripted error reply.
class ScriptedStreaming final : public http::StreamingTransport {
 public:
  HttpResult Stream(const HttpRequest& request, const StreamHandlers& handlers,
                    std::stop_token) override {
    requests.push_back(request);
    if (!errors.empty()) {
      HttpResult r = errors.front();
      errors.pop_front();
      return r;
    }
    HttpResult r = Reply(200, "", {{"content-type", "text/event-stream"}});
    handlers.on_open(r.response);
    for (const std::string& chunk : chunks) {
      ++chunks_sent;
      if (!handlers.on_data(chunk)) {
        return r;
      }
    }
    return end_status.ok() ? r : HttpResult{end_status, true, r.response};
  }
  std::vector<HttpRequest> requests;
  std::deque<HttpResult> errors;
  std::vector<std::string> chunks;
  api::Status end_status;
  int chunks_sent = 0;
};

std::string Header(const HttpRequest& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) {
      return v;
    }
  }
  return "<absent>";
}

constexpr char kSession[] =
    R"({"id":"sess_1","object":"agent.session","status":"idle","environment":{"type":"self_hosted",
        "id":"ccarenv_1","remote_url":"https://api.openai.com/v1/agents/api/connect/rt_1",
        "workspace_directory":"/w"},"agent":{"model":"gpt-5"},"metadata":{}})";

class HttpAgentsApiTest : public ::testing::Test {
 protected:
  HttpAgentsApiTest()
      : bucket_(clock_, 0, 1),
        api_(HttpAgentsApiOptions{.base_url = "http://127.0.0.1:1/v1/",
                                  .jitter = [] { return 0.5; }},
             kKey, bucket_, clock_, transport_, streaming_) {}

  InstantClock clock_;
  EndpointPacing bucket_;
  ScriptedTransport transport_;
  ScriptedStreaming streaming_;
  HttpAgentsApi api_;
};

TEST_F(HttpAgentsApiTest, CreateSessionSendsSelfHostedBodyAndRequiredHeaders) {
  transport_.replies.push_back(Reply(201, kSession));
  CreateSessionRequest req{.model = "gpt-5",
                           .instructions = "do it",
                           .workspace_directory = "/w",
                           .metadata = {{"sbx.dev/uid", "u"}}};
  auto s = api_.CreateSession(req);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->environment.id, "ccarenv_1");
  ASSERT_EQ(transport_.requests.size(), 1u);
  const HttpRequest& r = transport_.requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "http://127.0.0.1:1/v1/agents/sessions");
  EXPECT_EQ(Header(r, "Authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(Header(r, "OpenAI-Beta"), "agents=v1");
  EXPECT_EQ(Header(r, "Content-Type"), "application/json");
  const json body = json::parse(*r.body);
  EXPECT_EQ(body["environment"]["type"], "self_hosted");
  EXPECT_EQ(body["agent"]["instructions"], "do it");
}

TEST_F(HttpAgentsApiTest, CreateSessionValidatesBeforeSending) {
  EXPECT_EQ(api_.CreateSession({.model = "", .workspace_directory = "/w"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.CreateSession({.model = "m", .workspace_directory = "rel"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport_.requests.empty());
}

TEST_F(HttpAgentsApiTest, CreateSessionIsNotRetriedOnceSent) {
  transport_.replies.push_back(Reply(503, R"({"error":{"message":"overloaded"}})"));
  transport_.replies.push_back(Reply(201, kSession));
  EXPECT_EQ(api_.CreateSession({.model = "m", .workspace_directory = "/w"}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(transport_.requests.size(), 1u);
  transport_.replies.clear();
  transport_.replies.push_back(TransportError(StatusCode::kDeadlineExceeded, true));
  EXPECT_EQ(api_.CreateSession({.model = "m", .workspace_directory = "/w"}).status().code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_EQ(transport_.requests.size(), 2u);
}

TEST_F(HttpAgentsApiTest, CreateSessionIsRetriedAfterConnectPhaseFailure) {
  transport_.replies.push_back(TransportError(StatusCode::kUnavailable, false));
  transport_.replies.push_back(Reply(201, kSession));
  auto s = api_.CreateSession({.model = "m", .workspace_directory = "/w"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(transport_.requests.size(), 2u);
  EXPECT_EQ(clock_.sleeps, std::vector<std::chrono::milliseconds>{500ms});
}

TEST_F(HttpAgentsApiTest, GetIsRetriedHonouringRetryAfterMs) {
  transport_.replies.push_back(Reply(429,
                                     R"({"error":{"message":"slow down","type":"rate_limit"}})",
                                     {{"retry-after-ms", "1234"}, {"retry-after", "9"}}));
  transport_.replies.push_back(Reply(200, kSession));
  auto s = api_.GetSession("sess_1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(clock_.sleeps, std::vector<std::chrono::milliseconds>{1234ms});
  EXPECT_EQ(transport_.requests[0].url, "http://127.0.0.1:1/v1/agents/sessions/sess_1");
  EXPECT_EQ(transport_.requests[0].method, "GET");
}

TEST_F(HttpAgentsApiTest, LongRetryAfterEndsTheCallWithTheHint) {
  transport_.replies.push_back(Reply(429, "", {{"retry-after", "600"}}));
  auto s = api_.GetSession("sess_1");
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.status().retry_after(), std::chrono::milliseconds(600s));
  EXPECT_EQ(transport_.requests.size(), 1u);
}

TEST_F(HttpAgentsApiTest, GivesUpAfterMaxAttempts) {
  for (int i = 0; i < 5; ++i) {
    transport_.replies.push_back(Reply(502, "bad gateway", {{"x-request-id", "req_9"}}));
  }
  auto s = api_.GetEnvironment("ccarenv_1");
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("req_9"), std::string::npos) << s.status();
  EXPECT_EQ(transport_.requests.size(), 3u);
  EXPECT_EQ(clock_.sleeps, (std::vector<std::chrono::milliseconds>{500ms, 1000ms}));
}

TEST_F(HttpAgentsApiTest, UnauthenticatedIsNotRetriedAndNeverShowsTheKey) {
  transport_.replies.push_back(Reply(
      401, std::string(R"({"error":{"message":"Incorrect API key provided: )") + kKey +
               R"(.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})"));
  auto s = api_.GetSession("sess_1");
  EXPECT_EQ(s.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.status().message().find(kKey), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("Incorrect API key provided: ***"), std::string::npos);
  EXPECT_EQ(transport_.requests.size(), 1u);
}

TEST_F(HttpAgentsApiTest, DeleteTreats404AsNotFoundAndAcceptsDeletedBody) {
  transport_.replies.push_back(
      Reply(200, R"({"id":"sess_1","object":"agent.session.deleted","deleted":true})"));
  EXPECT_TRUE(api_.DeleteSession("sess_1").ok());
  EXPECT_EQ(transport_.requests[0].method, "DELETE");
  transport_.replies.push_back(
      Reply(404, R"({"error":{"type":"not_found_error","message":"gone"}})"));
  EXPECT_EQ(api_.DeleteSession("sess_1").code(), StatusCode::kNotFound);
  transport_.replies.push_back(
      Reply(409, R"({"error":{"type":"conflict_error","message":"busy"}})"));
  EXPECT_EQ(api_.DeleteSession("sess_1").code(), StatusCode::kAborted);
  EXPECT_EQ(transport_.requests.size(), 3u);
}

TEST_F(HttpAgentsApiTest, SendEventsPostsWithLongTimeoutAndIdempotencyKey) {
  transport_.replies.push_back(Reply(202));
  ASSERT_TRUE(api_.SendEvents("sess_1", {InputEvent::UserMessage("go")}, "idem-1").ok());
  const HttpRequest& r = transport_.requests[0];
  EXPECT_EQ(r.url, "http://127.0.0.1:1/v1/agents/sessions/sess_1/events");
  EXPECT_EQ(Header(r, "Idempotency-Key"), "idem-1");
  EXPECT_GE(r.timeout, std::chrono::milliseconds(5min));
  EXPECT_EQ(json::parse(*r.body)["events"][0]["type"], "agent.session.input.message");
  transport_.replies.push_back(Reply(202));
  ASSERT_TRUE(api_.SendEvents("sess_1", {InputEvent::Cancel()}).ok());
  EXPECT_EQ(Header(transport_.requests[1], "Idempotency-Key"), "<absent>");
  EXPECT_EQ(api_.SendEvents("sess_1", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.SendEvents("sess_1", {InputEvent::UserMessage("")}).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(HttpAgentsApiTest, SendEventsIsNotRetriedOn429ButKeepsTheHint) {
  transport_.replies.push_back(Reply(429, "", {{"retry-after-ms", "100"}}));
  const auto s = api_.SendEvents("sess_1", {InputEvent::UserMessage("go")});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.retry_after(), 100ms);
  EXPECT_EQ(transport_.requests.size(), 1u);
}

TEST_F(HttpAgentsApiTest, ListAllSessionsFollowsCursor) {
  transport_.replies.push_back(Reply(
      200,
      R"({"object":"list","data":[{"id":"a"},{"id":"b"}],"has_more":true,"first_id":"a","last_id":"b"})"));
  transport_.replies.push_back(Reply(
      200,
      R"({"object":"list","data":[{"id":"c"}],"has_more":false,"first_id":"c","last_id":"c"})"));
  auto all = api_.ListAllSessions({.limit = 2});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].id, "c");
  EXPECT_EQ(transport_.requests[0].url, "http://127.0.0.1:1/v1/agents/sessions?limit=2");
  EXPECT_EQ(transport_.requests[1].url, "http://127.0.0.1:1/v1/agents/sessions?limit=2&after=b");
}

TEST_F(HttpAgentsApiTest, ListAllSessionsDetectsACursorLoop) {
  const char* page = R"({"data":[{"id":"a"}],"has_more":true,"last_id":"a"})";
  for (int i = 0; i < 3; ++i) {
    transport_.replies.push_back(Reply(200, page));
  }
  EXPECT_EQ(api_.ListAllSessions({}).status().code(), StatusCode::kInternal);
}

TEST_F(HttpAgentsApiTest, EmptyIdsAreRejected) {
  EXPECT_EQ(api_.GetSession("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.GetEnvironment("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.DeleteSession("").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport_.requests.empty());
}

TEST_F(HttpAgentsApiTest, IdsAreEscapedInPaths) {
  transport_.replies.push_back(Reply(404));
  (void)api_.GetSession("x/../y");
  EXPECT_EQ(transport_.requests[0].url, "http://127.0.0.1:1/v1/agents/sessions/x%2F..%2Fy");
}

TEST_F(HttpAgentsApiTest, StreamDeliversEventsAcrossChunkBoundaries) {
  streaming_.chunks = {
      ": keepalive\n\ndata: {\"type\":\"agent.session.turn.created\",\"event_id\":\"e1\",",
      "\"session_id\":\"sess_1\",\"turn\":{\"id\":\"turn_1\",\"status\":\"queued\"}}\n",
      "\ndata: not json\n\nevent: x\ndata: {\"type\":\"agent.session.idle\",\"session\":{\"id\":"
      "\"sess_1\",\"status\":\"idle\"}}\r\n\r\n"};
  std::vector<SessionEvent> got;
  bool opened = false;
  const auto s = api_.StreamEvents("sess_1", StreamCallbacks{[&] { opened = true; },
                                                             [&](const SessionEvent& e) {
                                                               EXPECT_TRUE(opened);
                                                               got.push_back(e);
                                                               return true;
                                                             }});
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].kind, EventKind::kTurnCreated);
  EXPECT_EQ(got[0].turn_id, "turn_1");
  EXPECT_EQ(got[1].kind, EventKind::kSessionIdle);
  const HttpRequest& r = streaming_.requests[0];
  EXPECT_EQ(r.url, "http://127.0.0.1:1/v1/agents/sessions/sess_1/events");
  EXPECT_EQ(Header(r, "Accept"), "text/event-stream");
  EXPECT_EQ(Header(r, "OpenAI-Beta"), "agents=v1");
}

TEST_F(HttpAgentsApiTest, StreamStopsWhenCallbackReturnsFalse) {
  streaming_.chunks = {"data: {\"type\":\"a\"}\n\n", "data: {\"type\":\"b\"}\n\n",
                       "data: {\"type\":\"c\"}\n\n"};
  int seen = 0;
  EXPECT_TRUE(api_.StreamEvents("sess_1", [&](const SessionEvent&) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(streaming_.chunks_sent, 2);
}

TEST_F(HttpAgentsApiTest, StreamEndsAtDoneSentinel) {
  streaming_.chunks = {"data: {\"type\":\"a\"}\n\ndata: [DONE]\n\ndata: {\"type\":\"b\"}\n\n"};
  int seen = 0;
  EXPECT_TRUE(api_.StreamEvents("sess_1", [&](const SessionEvent&) { return ++seen > 0; }).ok());
  EXPECT_EQ(seen, 1);
}

TEST_F(HttpAgentsApiTest, StreamOpenIsRetriedButABrokenStreamIsNot) {
  streaming_.errors.push_back(Reply(503, "", {{"retry-after-ms", "10"}}));
  streaming_.chunks = {"data: {\"type\":\"a\"}\n\n"};
  streaming_.end_status = api::UnavailableError("stream broken");
  int seen = 0;
  const auto s = api_.StreamEvents("sess_1", [&](const SessionEvent&) { return ++seen > 0; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(streaming_.requests.size(), 2u);
  EXPECT_EQ(clock_.sleeps, std::vector<std::chrono::milliseconds>{10ms});
}

TEST_F(HttpAgentsApiTest, StreamOpenErrorIsMapped) {
  streaming_.errors.push_back(
      Reply(404, R"({"error":{"type":"not_found_error","message":"no such session"}})"));
  const auto s = api_.StreamEvents("sess_x", [](const SessionEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(streaming_.requests.size(), 1u);
}

TEST_F(HttpAgentsApiTest, StreamFailsOnOversizedEvent) {
  HttpAgentsApi small(HttpAgentsApiOptions{.base_url = "http://h/v1", .max_event_bytes = 32}, kKey,
                      bucket_, clock_, transport_, streaming_);
  streaming_.chunks = {"data: " + std::string(100, 'x') + "\n\n"};
  const auto s = small.StreamEvents("sess_1", [](const SessionEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

TEST_F(HttpAgentsApiTest, CancelledBeforeStartSendsNothing) {
  std::stop_source stop;
  stop.request_stop();
  EXPECT_EQ(api_.GetSession("sess_1", stop.get_token()).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(api_.StreamEvents(
                    "sess_1", [](const SessionEvent&) { return true; }, stop.get_token())
                .code(),
            StatusCode::kCancelled);
  EXPECT_TRUE(transport_.requests.empty());
  EXPECT_TRUE(streaming_.requests.empty());
}

TEST_F(HttpAgentsApiTest, SendEventsTakes202WithEmptyBodyAsAcceptedAndKeepsTheKeyOnARetry) {
  // A recording transport: the first attempt never left (connect refused), the second is
  // accepted with 202 and no body. Both carry the same Idempotency-Key, so a service that saw
  // the first would dedupe the second.
  int attempt = 0;
  http::testing::FakeTransport recording([&](const HttpRequest&, std::stop_token) {
    return ++attempt == 1 ? TransportError(StatusCode::kUnavailable, /*maybe_sent=*/false)
                          : http::testing::Reply(202, "");
  });
  HttpAgentsApi api(
      HttpAgentsApiOptions{.base_url = "http://127.0.0.1:1/v1", .jitter = [] { return 0.5; }}, kKey,
      bucket_, clock_, recording, streaming_);
  ASSERT_TRUE(api.SendEvents("sess_1", {InputEvent::UserMessage("$ ls")}, "task-uid-1").ok());
  const std::vector<HttpRequest> sent = recording.requests();
  ASSERT_EQ(sent.size(), 2u);
  for (const HttpRequest& r : sent) {
    EXPECT_EQ(http::testing::HeaderOf(r, "Idempotency-Key"), "task-uid-1");
    EXPECT_EQ(http::testing::HeaderOf(r, "OpenAI-Beta"), "agents=v1");
    EXPECT_EQ(r.method, "POST");
  }
  // Existing callers pass no key: no header at all (not an empty one).
  ASSERT_TRUE(api.SendEvents("sess_1", {InputEvent::Cancel()}).ok());
  EXPECT_EQ(http::testing::HeaderOf(recording.requests().back(), "Idempotency-Key"), "<absent>");
}

TEST_F(HttpAgentsApiTest, SendEventsIsNotRetriedOnceSentEvenWithAKey) {
  transport_.replies.push_back(TransportError(StatusCode::kUnavailable, /*maybe_sent=*/true));
  EXPECT_EQ(api_.SendEvents("sess_1", {InputEvent::UserMessage("go")}, "k").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(transport_.requests.size(), 1u);
}

constexpr char kTurnPage[] = R"({"object":"list","data":[
    {"id":"turn_2","object":"agent.session.turn","session_id":"sess_1","agent_id":null,
     "subagent_id":null,"status":"completed","created_at":2,"started_at":2,"completed_at":3,
     "error":null,"usage":null}],
    "has_more":false,"first_id":"turn_2","last_id":"turn_2"})";

TEST_F(HttpAgentsApiTest, ListTurnsSendsCursorParamsAndDecodesThePage) {
  transport_.replies.push_back(Reply(200, kTurnPage));
  auto page = api_.ListTurns("sess_1", {.limit = 1, .after = "turn_3", .order = ListOrder::kDesc});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->data.size(), 1u);
  EXPECT_EQ(page->data[0].id, "turn_2");
  EXPECT_EQ(page->data[0].status, TurnStatus::kCompleted);
  const HttpRequest& r = transport_.requests[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.url,
            "http://127.0.0.1:1/v1/agents/sessions/sess_1/turns?limit=1&after=turn_3&order=desc");
  EXPECT_EQ(Header(r, "OpenAI-Beta"), "agents=v1");
}

TEST_F(HttpAgentsApiTest, ListLimitsOutsideOneToHundredAreRejectedBeforeSending) {
  EXPECT_EQ(api_.ListTurns("sess_1", {.limit = 101}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.ListItems("sess_1", {.limit = -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.ListTurnItems("sess_1", "turn_1", {.limit = 1000}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.GetTurn("sess_1", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.ListTurns("", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport_.requests.empty());
}

TEST_F(HttpAgentsApiTest, GetTurnEscapesIdsAndMaps404) {
  transport_.replies.push_back(Reply(404, R"({"error":{"message":"Turn not found",
      "type":"not_found_error","param":null,"code":"not_found_error"}})"));
  const auto turn = api_.GetTurn("sess_1", "turn/1");
  EXPECT_EQ(turn.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(transport_.requests[0].url,
            "http://127.0.0.1:1/v1/agents/sessions/sess_1/turns/turn%2F1");
  transport_.replies.push_back(Reply(200, R"({"id":"turn_1","session_id":"sess_1",
      "subagent_id":null,"status":"in_progress","created_at":1})"));
  const auto ok = api_.GetTurn("sess_1", "turn_1");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->status, TurnStatus::kInProgress);
}

TEST_F(HttpAgentsApiTest, ListsTurnItemsAndSessionItems) {
  transport_.replies.push_back(Reply(200, R"({"object":"list","data":[
      {"id":"cmd_1","type":"command_execution","command":"ls","exit_code":0,"output":"a\n",
       "status":"completed","turn_id":"turn_1"},
      {"id":"fc_1","type":"function_call","status":"completed"}],
      "has_more":false,"first_id":"cmd_1","last_id":"fc_1"})"));
  auto items = api_.ListTurnItems("sess_1", "turn_1", {.order = ListOrder::kAsc});
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->data.size(), 2u);
  EXPECT_EQ(items->data[0].output, "a\n");
  EXPECT_EQ(items->data[1].type, ItemType::kOther);
  EXPECT_EQ(transport_.requests[0].url,
            "http://127.0.0.1:1/v1/agents/sessions/sess_1/turns/turn_1/items?order=asc");
  transport_.replies.push_back(
      Reply(200, R"({"object":"list","data":[],"has_more":false,"first_id":null,"last_id":null})"));
  auto all = api_.ListItems("sess_1", {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->data.empty());
  EXPECT_EQ(all->first_id, "");
  EXPECT_EQ(transport_.requests[1].url, "http://127.0.0.1:1/v1/agents/sessions/sess_1/items");
}

TEST_F(HttpAgentsApiTest, ListAllTurnItemsFollowsTheCursorInAscendingOrder) {
  transport_.replies.push_back(Reply(200, R"({"object":"list","data":[
      {"id":"msg_1","type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}],
      "has_more":true,"first_id":"msg_1","last_id":"msg_1"})"));
  transport_.replies.push_back(Reply(200, R"({"object":"list","data":[
      {"id":"msg_2","type":"message","role":"assistant",
       "content":[{"type":"output_text","text":"done"}]}],
      "has_more":false,"first_id":"msg_2","last_id":"msg_2"})"));
  auto all = api_.ListAllTurnItems("sess_1", "turn_1");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].text, "done");
  EXPECT_EQ(transport_.requests[0].url,
            "http://127.0.0.1:1/v1/agents/sessions/sess_1/turns/turn_1/items?order=asc");
  EXPECT_EQ(
      transport_.requests[1].url,
      "http://127.0.0.1:1/v1/agents/sessions/sess_1/turns/turn_1/items?after=msg_1&order=asc");
}

TEST_F(HttpAgentsApiTest, StreamDeliversTurnItemAndUsagePayloads) {
  streaming_.chunks = {
      "data: {\"type\":\"agent.session.turn.item.done\",\"turn_id\":\"turn_1\",\"output_index\":0,"
      "\"item\":{\"id\":\"cmd_1\",\"type\":\"command_execution\",\"command\":\"ls\","
      "\"exit_code\":0,\"output\":\"a\\n\",\"status\":\"completed\"}}\n\n",
      "data: {\"type\":\"agent.session.turn.completed\",\"turn_id\":\"turn_1\","
      "\"turn\":{\"id\":\"turn_1\",\"subagent_id\":null,\"status\":\"completed\"},"
      "\"usage\":{\"input_tokens\":3,\"output_tokens\":4,\"total_tokens\":7}}\n\n"};
  std::vector<SessionEvent> events;
  ASSERT_TRUE(api_.StreamEvents("sess_1",
                                [&](const SessionEvent& e) {
                                  events.push_back(e);
                                  return true;
                                })
                  .ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].item->command, "ls");
  EXPECT_EQ(events[0].item->exit_code, 0);
  EXPECT_TRUE(IsRootTurnTerminal(events[1]));
  EXPECT_EQ(events[1].usage->total_tokens, 7);
}

}  // namespace
}  // namespace sbx::controller::openai
