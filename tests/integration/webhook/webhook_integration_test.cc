// sbxd's webhook listener (WebhookServer) over loopback, and the OpenAI emulator's webhook
// deliveries received by it and checked by the controller's own WebhookVerifier: the emulator
// signs the way sbxd verifies (two implementations, one wire contract), its required_actions
// rise when input arrives with no executor connected, and deliveries without a 2xx are retried
// with backoff under the same webhook-id.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "controller/base/clock.h"
#include "controller/webhook/webhook_server.h"
#include "controller/webhook/webhook_verifier.h"
#include "emulator/openai/openai_emulator.h"
#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/raw_connection.h"

namespace sbx::controller {
namespace {

using json = nlohmann::json;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using namespace std::chrono_literals;

constexpr char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kAppKey[] = "sk-test-app";

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 15s) {
  return sbx::testing::PollUntil(pred, sbx::testing::In(timeout), 10ms);
}

// A WebhookServer whose handler records every request and answers from a script (then 200).
class RecordingEndpoint {
 public:
  explicit RecordingEndpoint(WebhookServerOptions options = {})
      : server_([this](const WebhookRequest& r) { return Record(r); }, options) {}
  ~RecordingEndpoint() { server_.Stop(); }

  int Start() {
    api::StatusOr<int> port = server_.Start("127.0.0.1:0");
    EXPECT_TRUE(port.ok()) << port.status();
    return port.ok() ? *port : 0;
  }
  void AnswerNext(std::vector<int> statuses) {
    std::lock_guard lock(mu_);
    script_.assign(statuses.begin(), statuses.end());
  }
  std::vector<WebhookRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  void Stop() { server_.Stop(); }

 private:
  WebhookResponse Record(const WebhookRequest& r) {
    std::lock_guard lock(mu_);
    requests_.push_back(r);
    if (script_.empty()) {
      return {200, "ok\n"};
    }
    const int status = script_.front();
    script_.pop_front();
    return {status, "scripted\n"};
  }

  mutable std::mutex mu_;
  std::vector<WebhookRequest> requests_;  // Guarded by mu_.
  std::deque<int> script_;                // Guarded by mu_.
  WebhookServer server_;
};

WebhookHeaders HeadersOf(const WebhookRequest& r) {
  auto get = [&](const char* name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? std::string() : it->second;
  };
  return {get("webhook-id"), get("webhook-timestamp"), get("webhook-signature")};
}

TEST(WebhookServerTest, HandsOverLowerCasedHeadersAndTheBodyAndAnswers) {
  RecordingEndpoint endpoint;
  const int port = endpoint.Start();
  ASSERT_GT(port, 0);
  endpoint.AnswerNext({418});
  HttpTestClient client("http://127.0.0.1:" + std::to_string(port));
  HttpResult r = client.Call("POST", "/hook?x=1", R"({"a":1})", {{"Webhook-Id", "msg_1"}});
  EXPECT_EQ(r.status, 418);
  EXPECT_EQ(r.body, "scripted\n");
  ASSERT_EQ(endpoint.requests().size(), 1u);
  const WebhookRequest got = endpoint.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.path, "/hook");
  EXPECT_EQ(got.body, R"({"a":1})");
  EXPECT_EQ(got.headers.at("webhook-id"), "msg_1");
  EXPECT_FALSE(got.body_too_large);
  // Keep-alive: a second request on the same client works too.
  EXPECT_EQ(client.Call("POST", "/hook", "{}").status, 200);
}

// #24: a whole request must arrive within read_timeout however it trickles (a per-read timeout
// let a byte every few seconds hold a connection for ever), and peers that hold every connection
// cannot keep a delivery out: the newest connection closes the one that has waited longest.
TEST(WebhookServerTest, TricklingPeersNeitherOutliveTheDeadlineNorKeepADeliveryOut) {
  WebhookServerOptions options;
  options.read_timeout = 1s;
  options.max_connections = 4;
  RecordingEndpoint endpoint(options);
  const int port = endpoint.Start();
  std::vector<std::unique_ptr<sbx::testing::RawConnection>> trickle;
  for (int i = 0; i < 4; ++i) {
    trickle.push_back(std::make_unique<sbx::testing::RawConnection>(port));
    ASSERT_TRUE(
        trickle.back()->Send("POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
  }
  ASSERT_TRUE(Eventually([&] {
    HttpTestClient client("http://127.0.0.1:" + std::to_string(port));
    return client.Call("POST", "/hook", "{}").status == 200;
  }));
  // A byte every 100 ms from each (the attacker's pace, not a wait for state): all are closed
  // well within 4 s, never handed over.
  const auto start = std::chrono::steady_clock::now();
  size_t open = trickle.size();
  while (open > 0 && std::chrono::steady_clock::now() - start < 4s) {
    open = 0;
    for (auto& c : trickle) {
      open += c->Send("x") ? 1 : 0;
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(open, 0u) << "trickling peers outlived a 1 s request deadline by 3 s";
  ASSERT_EQ(endpoint.requests().size(), 1u);
  EXPECT_EQ(endpoint.requests()[0].body, "{}");
}

// The body over the limit is never handed over, and the answer reaches the sender every time:
// the server drains what is still coming before it closes (else the close resets the
// connection and the answer is lost: "Failed to write request body" on the sender's side).
TEST(WebhookServerTest, DoesNotReadABodyOverTheLimitAndItsAnswerArrives) {
  RecordingEndpoint endpoint;
  const int port = endpoint.Start();
  const std::string big(size_t{4} << 20, 'x');
  for (int round = 0; round < 3; ++round) {
    endpoint.AnswerNext({413});
    HttpTestClient client("http://127.0.0.1:" + std::to_string(port));
    HttpResult r = client.Call("POST", "/hook", big);
    EXPECT_EQ(r.status, 413) << "round " << round;
  }
  ASSERT_EQ(endpoint.requests().size(), 3u);
  for (const WebhookRequest& got : endpoint.requests()) {
    EXPECT_TRUE(got.body_too_large);  // it was told, and got no body
    EXPECT_TRUE(got.body.empty());
  }
}

TEST(WebhookServerTest, RefusesAMalformedAddress) {
  WebhookServer server([](const WebhookRequest&) { return WebhookResponse{}; });
  EXPECT_EQ(server.Start("127.0.0.1").status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Start("127.0.0.1:99999").status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Start("::1:80").status().code(), api::StatusCode::kInvalidArgument);
}

class EmulatorWebhooksTest : public ::testing::Test {
 protected:
  void Boot(int max_attempts = 4, const std::string& secret = kSecret) {
    port_ = endpoint_.Start();
    ASSERT_GT(port_, 0);
    emulator::OpenAiEmulator::Options o;
    o.api_keys = {kAppKey};
    o.connection_wait = 3s;
    o.webhook_url = "http://127.0.0.1:" + std::to_string(port_) + "/hook";
    o.webhook_secret = secret;
    o.webhook_max_attempts = max_attempts;
    o.webhook_retry_base = 50ms;
    o.webhook_retry_cap = 200ms;
    emulator_ = std::make_unique<emulator::OpenAiEmulator>(o);
    auto started = emulator_->Start();
    ASSERT_TRUE(started.ok()) << started.status();
    api_ = std::make_unique<HttpTestClient>(emulator_->base_url());
    api_->SetHeader("Authorization", std::string("Bearer ") + kAppKey);
    api_->SetHeader("OpenAI-Beta", "agents=v1");
  }
  void TearDown() override {
    if (emulator_) {
      emulator_->Stop();
    }
    endpoint_.Stop();
  }
  std::string CreateSession() {
    json body = {{"agent", {{"model", "gpt-test"}}},
                 {"environment", {{"type", "self_hosted"}, {"workspace_directory", "/w"}}}};
    HttpResult r = api_->Post("/agents/sessions", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body).value("id", "");
  }
  // The input a self-hosted session cannot run without an executor (held for connection_wait).
  HttpResult SendInput(const std::string& session) {
    json input = {
        {"events",
         {{{"type", "agent.session.input.message"},
           {"input",
            {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}}}}}};
    return api_->Post("/agents/sessions/" + session + "/events", input.dump());
  }
  std::vector<WebhookRequest> Of(const std::string& type) const {
    std::vector<WebhookRequest> out;
    for (const WebhookRequest& r : endpoint_.requests()) {
      if (json::parse(r.body, nullptr, false).value("type", "") == type) {
        out.push_back(r);
      }
    }
    return out;
  }
  json Stats() const { return json::parse(emulator_->WebhookStats()); }

  SystemClock clock_;
  RecordingEndpoint endpoint_;
  int port_ = 0;
  std::unique_ptr<emulator::OpenAiEmulator> emulator_;
  std::unique_ptr<HttpTestClient> api_;
};

TEST_F(EmulatorWebhooksTest, InputWithoutAnExecutorSendsASignedActionRequired) {
  ASSERT_NO_FATAL_FAILURE(Boot());
  const std::string session = CreateSession();
  HttpResult held;
  std::thread app([&] { held = SendInput(session); });  // held for the connection wait
  // While the input waits, the session requires the connection (reference §2.1, §3.5).
  json seen;
  EXPECT_TRUE(Eventually([&] {
    seen = json::parse(api_->Get("/agents/sessions/" + session).body, nullptr, false);
    return seen.value("status", "") == "requires_action" && seen["required_actions"].size() == 1 &&
           seen["required_actions"][0].value("type", "") == "environment_connection";
  })) << seen.dump();
  const bool hooked = Eventually([&] { return !Of("agent.session.action_required").empty(); });
  app.join();
  EXPECT_EQ(held.status, 202) << held.body;
  ASSERT_TRUE(hooked);

  const WebhookRequest hook = Of("agent.session.action_required").at(0);
  EXPECT_EQ(hook.method, "POST");
  EXPECT_EQ(hook.path, "/hook");
  WebhookVerifier verifier(*WebhookSecret::Parse(kSecret), clock_);
  EXPECT_EQ(verifier.Verify(HeadersOf(hook), hook.body), std::nullopt);
  EXPECT_EQ(HeadersOf(hook).id.rfind("msg_", 0), 0u);
  const json envelope = json::parse(hook.body);
  EXPECT_EQ(envelope.value("object", ""), "event");
  EXPECT_EQ(envelope.value("id", "").rfind("evt_", 0), 0u);
  EXPECT_TRUE(envelope["created_at"].is_number_integer());
  EXPECT_EQ(envelope["data"],
            json({{"id", session}, {"required_action", {{"type", "environment_connection"}}}}));
  // The session's other lifecycle webhooks are sent too.
  EXPECT_EQ(Of("agent.session.created").size(), 1u);
  const json created = json::parse(Of("agent.session.created").at(0).body);
  EXPECT_EQ(created["data"].value("environment_type", ""), "self_hosted");
  EXPECT_FALSE(created["data"]["connect"].value("remote_url", "").empty());
}

TEST_F(EmulatorWebhooksTest, RetriesWithBackoffUnderTheSameIdUntilA2xx) {
  ASSERT_NO_FATAL_FAILURE(Boot());
  endpoint_.AnswerNext({503, 500});  // the created webhook: two failures, then 200
  const std::string session = CreateSession();
  ASSERT_TRUE(Eventually([&] { return Stats().value("delivered", 0) == 1; })) << Stats().dump();
  const std::vector<WebhookRequest> attempts = Of("agent.session.created");
  ASSERT_EQ(attempts.size(), 3u);
  WebhookVerifier verifier(*WebhookSecret::Parse(kSecret), clock_);
  for (const WebhookRequest& a : attempts) {
    EXPECT_EQ(HeadersOf(a).id, HeadersOf(attempts[0]).id);  // one delivery, three attempts
    EXPECT_EQ(a.body, attempts[0].body);
    EXPECT_EQ(verifier.Verify(HeadersOf(a), a.body), std::nullopt);  // each attempt signed
  }
  const json d = Stats()["deliveries"].at(0);
  EXPECT_EQ(d.value("attempts", 0), 3);
  EXPECT_EQ(d["statuses"], json({503, 500, 200}));
  EXPECT_EQ(d.value("session_id", ""), session);
  EXPECT_FALSE(Stats().dump().find(kSecret) != std::string::npos);  // the secret is never shown
}

TEST_F(EmulatorWebhooksTest, GivesUpAfterMaxAttemptsAndAWrongSecretIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Boot(/*max_attempts=*/3, "whsec_c29tZW9uZSBlbHNl"));
  endpoint_.AnswerNext({401, 401, 401, 401});
  CreateSession();
  ASSERT_TRUE(Eventually([&] { return Stats().value("gave_up", 0) == 1; }));
  const std::vector<WebhookRequest> attempts = Of("agent.session.created");
  ASSERT_EQ(attempts.size(), 3u);
  WebhookVerifier verifier(*WebhookSecret::Parse(kSecret), clock_);
  EXPECT_EQ(verifier.Verify(HeadersOf(attempts[0]), attempts[0].body),
            WebhookRejection::kBadSignature);
}

TEST_F(EmulatorWebhooksTest, TheAdminApiConfiguresAndTurnsWebhooksOff) {
  ASSERT_NO_FATAL_FAILURE(Boot());
  HttpTestClient admin(emulator_->server_url());
  EXPECT_EQ(admin.Post("/_emulator/openai/webhooks", R"({"url":"http://127.0.0.1:1/x"})").status,
            400);  // no secret
  EXPECT_EQ(admin.Delete("/_emulator/openai/webhooks").status, 200);
  CreateSession();
  EXPECT_EQ(Stats()["deliveries"].size(), 0u);  // off: nothing queued
  json config = {{"url", "http://127.0.0.1:" + std::to_string(port_) + "/hook"},
                 {"secret", kSecret},
                 {"max_attempts", 2}};
  HttpResult r = admin.Post("/_emulator/openai/webhooks", config.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find(kSecret), std::string::npos);
  CreateSession();
  EXPECT_TRUE(Eventually([&] { return Of("agent.session.created").size() == 1; }));
}

}  // namespace
}  // namespace sbx::controller
