// HttpAgentsApi with the real cpprest transports against a canned HTTP server on 127.0.0.1
// (emulator/internal/http_server.h): request/response calls, a 429 retried after its
// retry-after-ms, a 401 that is not retried and does not leak the key, an SSE stream delivered
// event by event as it is written, and cancellation of a stream that hangs.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/openai/http_agents_api.h"
#include "emulator/internal/http_server.h"

namespace sbx::controller::openai {
namespace {

using namespace std::chrono_literals;
using api::StatusCode;
using emulator::internal::HttpExchange;
using emulator::internal::HttpResponse;
using emulator::internal::HttpServer;

constexpr char kKey[] = "sk-test-APPLICATION-KEY-do-not-leak";
constexpr auto kDeadline = 10s;

constexpr char kSession[] =
    R"({"id":"sess_1","object":"agent.session","status":"idle","required_actions":[],
        "environment":{"type":"self_hosted","id":"ccarenv_1",
        "remote_url":"http://127.0.0.1:9/v1/agents/api/connect/rt_1",
        "workspace_directory":"/home/sandbox-agent/workspace","capability_directories":[]},
        "agent":{"id":"ag","model":"gpt-5","instructions":"x"},"created_at":1,"last_active_at":2,
        "error":null,"metadata":{"sbx.dev/uid":"u1"},"usage":null,"vault_ids":[]})";

// One `data:` line: the JSON's own line breaks would end the field.
std::string SseEvent(std::string json) {
  std::replace(json.begin(), json.end(), '\n', ' ');
  return "data: " + json + "\n\n";
}

HttpResponse Resp(int status, std::string body,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  if (r.body.empty()) {
    r.content_type.clear();
  }
  return r;
}

HttpResponse StreamHead() {
  HttpResponse r;
  r.content_type = "text/event-stream";
  return r;
}

class OpenAiIntegrationTest : public ::testing::Test {
 protected:
  using Handler = std::function<void(HttpExchange&)>;

  void SetUp() override {
    server_ = std::make_unique<HttpServer>([this](HttpExchange& ex) { Dispatch(ex); });
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    transport_ = http::MakeCppRestTransport();
    streaming_ = http::MakeCppRestStreamingTransport();
    api_ = std::make_unique<HttpAgentsApi>(
        HttpAgentsApiOptions{.base_url = "http://127.0.0.1:" + std::to_string(*port) + "/v1",
                             .request_timeout = 5s,
                             .stream_idle_timeout = 30s},
        kKey, bucket_, clock_, *transport_, *streaming_);
  }

  void TearDown() override {
    {
      std::lock_guard lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    server_->Stop();
  }

  // Routes "METHOD /path" to a handler; counts calls; records headers.
  void Dispatch(HttpExchange& ex) {
    const std::string key = ex.request().method + " " + ex.request().path;
    Handler handler;
    {
      std::lock_guard lock(mu_);
      ++calls_[key];
      last_headers_ = ex.request().headers;
      auto it = routes_.find(key);
      if (it != routes_.end()) {
        handler = it->second;
      }
    }
    if (!handler) {
      ex.Respond(Resp(404, R"({"error":{"message":"no route","type":"not_found_error",
                                "param":null,"code":"not_found_error"}})"));
      return;
    }
    handler(ex);
  }

  void Route(const std::string& key, Handler handler) {
    std::lock_guard lock(mu_);
    routes_[key] = std::move(handler);
  }
  int Calls(const std::string& key) {
    std::lock_guard lock(mu_);
    return calls_[key];
  }
  std::string LastHeader(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = last_headers_.find(name);
    return it == last_headers_.end() ? "" : it->second;
  }

  SystemClock clock_;
  EndpointPacing bucket_{clock_, 0, 1};
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<http::HttpTransport> transport_;
  std::unique_ptr<http::StreamingTransport> streaming_;
  std::unique_ptr<HttpAgentsApi> api_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_ = false;                            // Guarded by mu_.
  std::map<std::string, Handler> routes_;            // Guarded by mu_.
  std::map<std::string, int> calls_;                 // Guarded by mu_.
  std::map<std::string, std::string> last_headers_;  // Guarded by mu_.
};

TEST_F(OpenAiIntegrationTest, SessionLifecycleOverLoopback) {
  Route("POST /v1/agents/sessions", [](HttpExchange& ex) { ex.Respond(Resp(201, kSession)); });
  Route("GET /v1/agents/environments/ccarenv_1", [](HttpExchange& ex) {
    ex.Respond(Resp(200, R"({"id":"ccarenv_1","object":"agent.environment",
        "type":"self_hosted","status":"connected","files":[],"plugins":[],"skills":[]})"));
  });
  std::string posted;
  Route("POST /v1/agents/sessions/sess_1/events", [&](HttpExchange& ex) {
    {
      std::lock_guard lock(mu_);
      posted = ex.request().body;
    }
    ex.Respond(Resp(202, ""));
  });
  Route("DELETE /v1/agents/sessions/sess_1", [](HttpExchange& ex) {
    ex.Respond(Resp(200, R"({"id":"sess_1","object":"agent.session.deleted",
        "deleted":true})"));
  });

  auto session = api_->CreateSession({.model = "gpt-5",
                                      .instructions = "x",
                                      .workspace_directory = "/home/sandbox-agent/workspace",
                                      .capability_directories = {},
                                      .metadata = {{"sbx.dev/uid", "u1"}}});
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->environment.remote_url, "http://127.0.0.1:9/v1/agents/api/connect/rt_1");
  EXPECT_EQ(LastHeader("openai-beta"), "agents=v1");
  EXPECT_EQ(LastHeader("authorization"), std::string("Bearer ") + kKey);

  auto env = api_->GetEnvironment(session->environment.id);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->status, EnvironmentStatus::kConnected);

  ASSERT_TRUE(api_->SendEvents("sess_1", {InputEvent::UserMessage("hello")}).ok());
  {
    std::lock_guard lock(mu_);
    EXPECT_NE(posted.find("agent.session.input.message"), std::string::npos) << posted;
  }
  EXPECT_TRUE(api_->DeleteSession("sess_1").ok());
  EXPECT_EQ(api_->GetSession("sess_gone").status().code(), StatusCode::kNotFound);
}

// POST /agents/sessions/{id} with the agent's model settings (reference §1.6).
TEST_F(OpenAiIntegrationTest, UpdatesTheSessionsAgentSettings) {
  std::string body;
  Route("POST /v1/agents/sessions/sess_1", [&](HttpExchange& ex) {
    {
      std::lock_guard lock(mu_);
      body = ex.request().body;
    }
    ex.Respond(Resp(200, kSession));
  });
  auto updated = api_->UpdateSessionAgent("sess_1", "gpt-5-codex", "Be brief.");
  ASSERT_TRUE(updated.ok()) << updated.status();
  std::lock_guard lock(mu_);
  EXPECT_EQ(
      nlohmann::json::parse(body),
      nlohmann::json::parse(R"({"agent":{"model":"gpt-5-codex","instructions":"Be brief."}})"));
}

TEST_F(OpenAiIntegrationTest, RetriesA429OnceAfterItsRetryAfterMs) {
  Route("GET /v1/agents/sessions/sess_1", [this](HttpExchange& ex) {
    if (Calls("GET /v1/agents/sessions/sess_1") == 1) {
      ex.Respond(Resp(429, R"({"error":{"message":"Rate limit reached","type":"requests",
                      "param":null,"code":"rate_limit_exceeded"}})",
                      {{"retry-after-ms", "50"}, {"x-request-id", "req_429"}}));
    } else {
      ex.Respond(Resp(200, kSession));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  auto s = api_->GetSession("sess_1");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Calls("GET /v1/agents/sessions/sess_1"), 2);
  EXPECT_GE(took, 50ms);
}

TEST_F(OpenAiIntegrationTest, DoesNotRetryA401AndNeverRevealsTheKey) {
  Route("GET /v1/agents/sessions/sess_1", [](HttpExchange& ex) {
    // A server that echoes the credential it got, as some do in "incorrect key" messages.
    const std::string echoed = ex.request().Header("authorization");
    ex.Respond(
        Resp(401,
             R"({"error":{"message":"Incorrect API key provided: )" + echoed +
                 R"(","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})",
             {{"x-request-id", "req_401"}}));
  });
  auto s = api_->GetSession("sess_1");
  EXPECT_EQ(s.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Calls("GET /v1/agents/sessions/sess_1"), 1);
  EXPECT_EQ(s.status().message().find(kKey), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("req_401"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("Incorrect API key provided"), std::string::npos);
}

TEST_F(OpenAiIntegrationTest, DeliversEachStreamEventBeforeTheNextIsWritten) {
  bool first_seen = false;      // Guarded by mu_.
  bool second_written = false;  // Guarded by mu_.
  Route("GET /v1/agents/sessions/sess_1/events", [&](HttpExchange& ex) {
    ex.StartStream(StreamHead());
    ex.WriteChunk(": connected\n\n");
    ex.WriteChunk(SseEvent(
        R"({"event_id":"e1","type":"agent.session.turn.created","session_id":"sess_1",
            "turn_id":"turn_1","turn":{"id":"turn_1","status":"queued","subagent_id":null}})"));
    {
      // The second event is written only after the client has handled the first.
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, kDeadline, [&] { return first_seen || shutdown_; }) || shutdown_) {
        return;
      }
      second_written = true;
    }
    // Split mid-line across two chunks, CRLF endings.
    ex.WriteChunk("data: {\"event_id\":\"e2\",\"type\":\"agent.session.turn.completed\",");
    ex.WriteChunk(
        "\"session_id\":\"sess_1\",\"turn\":{\"id\":\"turn_1\",\"status\":\"completed\","
        "\"subagent_id\":null}}\r\n\r\n");
    ex.WriteChunk(SseEvent(R"({"event_id":"e3","type":"agent.session.idle",
        "session":{"id":"sess_1","status":"idle"}})"));
    ex.FinishStream();
  });

  std::vector<std::string> ids;
  bool opened = false;
  const Status s =
      api_->StreamEvents("sess_1", StreamCallbacks{.on_open = [&] { opened = true; },
                                                   .on_event =
                                                       [&](const SessionEvent& e) {
                                                         ids.push_back(e.event_id);
                                                         if (e.event_id == "e1") {
                                                           std::lock_guard lock(mu_);
                                                           EXPECT_FALSE(second_written);
                                                           first_seen = true;
                                                           cv_.notify_all();
                                                         }
                                                         if (e.event_id == "e2") {
                                                           EXPECT_TRUE(IsRootTurnTerminal(e));
                                                         }
                                                         return true;
                                                       }});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(opened);
  EXPECT_EQ(ids, (std::vector<std::string>{"e1", "e2", "e3"}));
  EXPECT_EQ(LastHeader("accept"), "text/event-stream");
  EXPECT_EQ(LastHeader("openai-beta"), "agents=v1");
}

TEST_F(OpenAiIntegrationTest, CallbackCanEndTheStreamEarly) {
  Route("GET /v1/agents/sessions/sess_1/events", [&](HttpExchange& ex) {
    ex.StartStream(StreamHead());
    ex.WriteChunk(SseEvent(R"({"event_id":"e1","type":"agent.session.in_progress"})"));
    // Then nothing: without the early stop the client would wait for more.
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kDeadline, [&] { return shutdown_; });
  });
  int seen = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(api_->StreamEvents("sess_1", [&](const SessionEvent&) { return ++seen < 1; }).ok());
  EXPECT_EQ(seen, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(OpenAiIntegrationTest, CancelsAHangingStreamWithinABoundedTime) {
  Route("GET /v1/agents/sessions/sess_1/events", [&](HttpExchange& ex) {
    ex.StartStream(StreamHead());
    ex.WriteChunk(": hello\n\n");
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 30s, [&] { return shutdown_; });  // hang
  });
  std::stop_source stop;
  std::promise<void> opened;
  auto result = std::async(std::launch::async, [&] {
    return api_->StreamEvents("sess_1",
                              StreamCallbacks{.on_open = [&] { opened.set_value(); },
                                              .on_event = [](const SessionEvent&) { return true; }},
                              stop.get_token());
  });
  ASSERT_EQ(opened.get_future().wait_for(kDeadline), std::future_status::ready);
  const auto start = std::chrono::steady_clock::now();
  stop.request_stop();
  ASSERT_EQ(result.wait_for(kDeadline), std::future_status::ready) << "stream did not stop";
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.get().code(), StatusCode::kCancelled);
  EXPECT_LT(took, 2s);
  std::printf(
      "stream cancellation took %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

TEST_F(OpenAiIntegrationTest, SilentStreamEndsAfterTheIdleTimeout) {
  Route("GET /v1/agents/sessions/sess_1/events", [&](HttpExchange& ex) {
    ex.StartStream(StreamHead());
    ex.WriteChunk(SseEvent(R"({"event_id":"e1","type":"agent.session.idle"})"));
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 30s, [&] { return shutdown_; });
  });
  HttpAgentsApi api(HttpAgentsApiOptions{.base_url = "http://127.0.0.1:" +
                                                     std::to_string(server_->port()) + "/v1",
                                         .stream_idle_timeout = 1s},
                    kKey, bucket_, clock_, *transport_, *streaming_);
  int seen = 0;
  const auto start = std::chrono::steady_clock::now();
  const Status s = api.StreamEvents("sess_1", [&](const SessionEvent&) { return ++seen > 0; });
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(seen, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(OpenAiIntegrationTest, StreamOpenErrorsAreMappedAndNotStreamed) {
  Route("GET /v1/agents/sessions/sess_1/events", [](HttpExchange& ex) {
    ex.Respond(Resp(400, R"({"error":{"message":"missing beta header",
                                        "type":"invalid_request_error","param":null,
                                        "code":"invalid_beta"}})"));
  });
  const Status s = api_->StreamEvents("sess_1", [](const SessionEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("invalid_beta"), std::string::npos) << s;
}

TEST_F(OpenAiIntegrationTest, ConnectionRefusedIsUnavailable) {
  const int port = server_->port();
  server_->Stop();
  HttpAgentsApi api(
      HttpAgentsApiOptions{
          .base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1",
          .retry = http::RetryPolicy{.max_attempts = 2, .backoff = {10ms, 10ms, 0.0}}},
      kKey, bucket_, clock_, *transport_, *streaming_);
  EXPECT_EQ(api.GetSession("sess_1").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.StreamEvents("sess_1", [](const SessionEvent&) { return true; }).code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sbx::controller::openai
