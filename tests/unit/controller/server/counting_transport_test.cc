#include "controller/server/counting_transport.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

namespace sbx::controller {
namespace {

using http::HttpRequest;
using http::HttpResult;

// Answers with a fixed status, or a transport error; records what it was sent.
class ScriptedTransport final : public http::HttpTransport {
 public:
  HttpResult Send(const HttpRequest& request, std::stop_token) override {
    std::lock_guard lock(mu_);
    sent_.push_back(request.url);
    HttpResult r;
    if (fail_) {
      r.status = api::UnavailableError("connection refused");
      r.maybe_sent = false;
    } else {
      r.response.status = status_;
      r.response.body = "{}";
    }
    return r;
  }
  void Answer(int status) { status_ = status, fail_ = false; }
  void Fail() { fail_ = true; }
  std::vector<std::string> sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  mutable std::mutex mu_;
  int status_ = 200;
  bool fail_ = false;
  std::vector<std::string> sent_;
};

TEST(CountingTransportTest, NormalisesIdsInPathTemplates) {
  auto label = [](const char* method, const char* url) {
    return CountingTransport::EndpointLabel(method, url);
  };
  EXPECT_EQ(label("POST", "https://h.example.com/api/2.0/sandboxes?sandbox_id=sbx-a-1f2e"),
            "POST /api/2.0/sandboxes");
  EXPECT_EQ(label("GET", "https://h/api/2.0/sandboxes?page_size=100&page_token=abc"),
            "GET /api/2.0/sandboxes");
  EXPECT_EQ(label("GET", "http://127.0.0.1:4001/api/2.0/sandboxes/sbx-default-a"),
            "GET /api/2.0/sandboxes/{id}");
  EXPECT_EQ(label("POST", "https://h/api/2.0/sandboxes/sbx-default-a/start"),
            "POST /api/2.0/sandboxes/{id}/start");
  EXPECT_EQ(label("POST", "https://h/api/2.0/sandboxes/x/stop"),
            "POST /api/2.0/sandboxes/{id}/stop");
  EXPECT_EQ(label("PATCH", "https://h/api/2.0/sandboxes/x?update_mask=display_name"),
            "PATCH /api/2.0/sandboxes/{id}");
  EXPECT_EQ(label("POST", "https://h/api/2.0/sandbox-exec/sandboxes/sbx-1/exec-sync"),
            "POST /api/2.0/sandbox-exec/sandboxes/{id}/exec-sync");
  EXPECT_EQ(label("GET", "https://h/api/2.0/sandbox-exec/sandboxes/a%2Fb/commands?page_token=t"),
            "GET /api/2.0/sandbox-exec/sandboxes/{id}/commands");
  EXPECT_EQ(label("POST", "https://accounts.example.com/oidc/accounts/1234-5678/v1/token"),
            "POST /oidc/accounts/{id}/v1/token");
  EXPECT_EQ(label("GET", "https://h/oidc/.well-known/oauth-authorization-server"),
            "GET /oidc/.well-known/oauth-authorization-server");
  // The OpenAI Agents API goes through the same transport interface.
  EXPECT_EQ(label("GET", "https://api.openai.com/v1/agents/sessions/sess_abc/events"),
            "GET /v1/agents/sessions/{id}/events");
  EXPECT_EQ(label("GET", "https://api.openai.com/v1/agents/environments/env_1"),
            "GET /v1/agents/environments/{id}");
  EXPECT_EQ(label("POST", "https://api.openai.com/v1/agents/sessions"), "POST /v1/agents/sessions");
  // Unknown endpoints: id-looking segments are still folded.
  EXPECT_EQ(label("GET", "https://h/api/9/things/0f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0/x"),
            "GET /api/9/things/{id}/x");
  EXPECT_EQ(label("GET", "https://h"), "GET /");
}

TEST(CountingTransportTest, CountsByEndpointAndStatusAndForwardsUnchanged) {
  ScriptedTransport inner;
  Metrics metrics;
  // The api label is whatever the injected function says (sbxd: CloudApiOf).
  CountingTransport counting(inner, metrics, [](std::string_view) { return "databricks"; });

  HttpRequest get{.method = "GET", .url = "https://h/api/2.0/sandboxes/a"};
  HttpRequest get_b{.method = "GET", .url = "https://h/api/2.0/sandboxes/b"};
  HttpResult r = counting.Send(get, {});
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.response.status, 200);
  EXPECT_EQ(r.response.body, "{}");
  (void)counting.Send(get_b, {});
  inner.Answer(404);
  EXPECT_EQ(counting.Send(get, {}).response.status, 404);
  inner.Fail();
  r = counting.Send(get, {});
  EXPECT_EQ(r.status.code(), api::StatusCode::kUnavailable);
  EXPECT_FALSE(r.maybe_sent);

  EXPECT_EQ(inner.sent(), (std::vector<std::string>{get.url, get_b.url, get.url, get.url}));
  auto count = [&](const char* code) {
    return metrics
        .counter(
            "sbx_api_calls_total", "",
            {{"api", "databricks"}, {"endpoint", "GET /api/2.0/sandboxes/{id}"}, {"code", code}})
        .Value();
  };
  EXPECT_EQ(count("200"), 2);
  EXPECT_EQ(count("404"), 1);
  EXPECT_EQ(count("error"), 1);
  EXPECT_NE(metrics.Render().find("sbx_api_calls_total{api=\"databricks\",code=\"200\","
                                  "endpoint=\"GET /api/2.0/sandboxes/{id}\"} 2\n"),
            std::string::npos);
  // Every exchange is timed by endpoint, a failed one too.
  EXPECT_NE(metrics.Render().find("sbx_api_call_duration_seconds_count{api=\"databricks\","
                                  "endpoint=\"GET /api/2.0/sandboxes/{id}\"} 4\n"),
            std::string::npos)
      << metrics.Render();
}

}  // namespace
}  // namespace sbx::controller
