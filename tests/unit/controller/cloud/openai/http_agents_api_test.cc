// HttpAgentsApi over scripted fake transports: headers, paths, bodies, retries and redaction.
#include "controller/cloud/openai/http_agents_api.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

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
  TokenBucket bucket_;
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

}  // namespace
}  // namespace sbx::controller::openai
