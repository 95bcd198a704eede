#include "controller/cloud/databricks/http_sandbox_api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "controller/cloud/http/wire_text.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/cloud/http/fake_transport.h"

namespace sbx::controller::databricks {
namespace {

using namespace std::chrono_literals;
using api::StatusCode;
using http::HttpRequest;
using http::HttpResult;
using http::testing::FakeTransport;
using http::testing::HeaderOf;
using http::testing::Reply;

constexpr char kToken[] = "dapi-super-secret-token";
constexpr char kSandboxJson[] =
    R"({"name":"sandboxes/a","status":{"state":"SANDBOX_STATE_RUNNING"}})";

// Runs `fn` on another thread and advances the fake clock whenever someone sleeps on it, so
// backoff happens in fake time. Returns fn's result.
template <typename Fn>
auto RunAdvancing(sbx::testing::FakeClock& clock, Fn fn) {
  auto future = std::async(std::launch::async, fn);
  while (future.wait_for(1ms) != std::future_status::ready) {
    if (clock.sleepers() > 0) {
      clock.Advance(100ms);
    }
  }
  return future.get();
}

class HttpSandboxApiTest : public ::testing::Test {
 protected:
  HttpSandboxApiTest()
      : transport_(
            [this](const HttpRequest& r, std::stop_token stop) { return handler_(r, stop); }),
        creds_(kToken),
        bucket_(clock_, 1000, 1000) {}

  std::unique_ptr<HttpSandboxApi> MakeApi(std::string workspace_id = "") {
    HttpSandboxApiOptions options;
    options.host = "https://ws.example.com";
    options.workspace_id = std::move(workspace_id);
    options.jitter = [] { return 0.0; };
    return std::make_unique<HttpSandboxApi>(options, creds_, bucket_, clock_, transport_);
  }

  std::function<HttpResult(const HttpRequest&, std::stop_token)> handler_ =
      [](const HttpRequest&, std::stop_token) { return Reply(200, kSandboxJson); };
  FakeTransport transport_;
  PatCredentials creds_;
  sbx::testing::FakeClock clock_;
  EndpointPacing bucket_;
};

TEST_F(HttpSandboxApiTest, SendsTheStandardHeaders) {
  auto api = MakeApi();
  ASSERT_TRUE(api->Get("a").ok());
  ASSERT_TRUE(MakeApi("4242")->Stop("a").ok());
  const auto requests = transport_.requests();
  ASSERT_EQ(requests.size(), 2u);
  const HttpRequest& get = requests[0];
  EXPECT_EQ(get.method, "GET");
  EXPECT_EQ(get.url, "https://ws.example.com/api/2.0/sandboxes/a");
  EXPECT_EQ(HeaderOf(get, "Authorization"), std::string("Bearer ") + kToken);
  EXPECT_EQ(HeaderOf(get, "Accept"), "application/json");
  EXPECT_EQ(HeaderOf(get, "User-Agent"), "sbx/" + std::string(http::UserAgent().substr(4)));
  EXPECT_TRUE(http::UserAgent().starts_with("sbx/"));
  EXPECT_EQ(HeaderOf(get, "Content-Type"), "<absent>");
  EXPECT_EQ(HeaderOf(get, "X-Databricks-Workspace-Id"), "<absent>");
  EXPECT_FALSE(get.body.has_value());
  EXPECT_EQ(get.timeout, 60s);
  const HttpRequest& stop = requests[1];
  EXPECT_EQ(stop.url, "https://ws.example.com/api/2.0/sandboxes/a/stop");
  EXPECT_EQ(HeaderOf(stop, "Content-Type"), "application/json");
  EXPECT_EQ(HeaderOf(stop, "X-Databricks-Workspace-Id"), "4242");
  EXPECT_EQ(stop.body.value_or(""), "{}");
}

TEST_F(HttpSandboxApiTest, EscapesTheIdInPathAndQuery) {
  auto api = MakeApi();
  ASSERT_TRUE(api->Get("x/start").ok());
  ASSERT_TRUE(api->Create("a b&c", Sandbox{}).ok());
  const auto requests = transport_.requests();
  EXPECT_EQ(requests[0].url, "https://ws.example.com/api/2.0/sandboxes/x%2Fstart");
  EXPECT_EQ(requests[1].url, "https://ws.example.com/api/2.0/sandboxes?sandbox_id=a%20b%26c");
  EXPECT_EQ(api->Get("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_.count(), 2u);
}

TEST_F(HttpSandboxApiTest, UpdateSendsExactlyTheMask) {
  auto api = MakeApi();
  Sandbox desired;
  desired.display_name = "New name";
  desired.inactivity_timeout = 1800s;
  ASSERT_TRUE(api->Update("a", desired, {std::string(kMaskInactivityTimeout)}).ok());
  const HttpRequest r = transport_.requests().at(0);
  EXPECT_EQ(r.method, "PATCH");
  EXPECT_EQ(
      r.url,
      "https://ws.example.com/api/2.0/sandboxes/a?update_mask=spec.compute.inactivity_timeout");
  EXPECT_EQ(r.body.value_or(""), R"({"spec":{"compute":{"inactivity_timeout":"1800s"}}})");
}

TEST_F(HttpSandboxApiTest, ListAllFollowsPageTokens) {
  handler_ = [](const HttpRequest& r, std::stop_token) {
    if (r.url.find("page_token=p2") != std::string::npos) {
      return Reply(200, R"({"sandboxes":[{"name":"sandboxes/c"}]})");
    }
    return Reply(
        200,
        R"({"sandboxes":[{"name":"sandboxes/a"},{"name":"sandboxes/b"}],"next_page_token":"p2"})");
  };
  auto all = MakeApi()->ListAll(2);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].sandbox_id, "c");
  const auto requests = transport_.requests();
  EXPECT_EQ(requests[0].url, "https://ws.example.com/api/2.0/sandboxes?page_size=2");
  EXPECT_EQ(requests[1].url, "https://ws.example.com/api/2.0/sandboxes?page_size=2&page_token=p2");
}

TEST_F(HttpSandboxApiTest, ListAllFailsWholeIfAPageFails) {
  handler_ = [](const HttpRequest& r, std::stop_token) {
    if (r.url.find("page_token") != std::string::npos) {
      return Reply(500, R"({"error_code":"INTERNAL_ERROR","message":"boom"})");
    }
    return Reply(200, R"({"sandboxes":[{"name":"sandboxes/a"}],"next_page_token":"p2"})");
  };
  EXPECT_EQ(MakeApi()->ListAll(1).status().code(), StatusCode::kInternal);
}

TEST_F(HttpSandboxApiTest, RetriesUnavailableThenSucceeds) {
  std::atomic<int> calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    return ++calls < 3 ? Reply(503, R"({"error_code":"TEMPORARILY_UNAVAILABLE"})")
                       : Reply(200, kSandboxJson);
  };
  auto api = MakeApi();
  const auto start = clock_.Steady();
  auto s = RunAdvancing(clock_, [&] { return api->Get("a"); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(calls.load(), 3);
  // Backoff with zero jitter: 250 ms then 500 ms.
  EXPECT_GE(clock_.Steady() - start, 750ms);
}

TEST_F(HttpSandboxApiTest, RetryAfterIsHonouredAndPenalisesTheBucket) {
  std::vector<Clock::SteadyTime> times;
  std::mutex mu;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    std::lock_guard lock(mu);
    times.push_back(clock_.Steady());
    return times.size() == 1
               ? Reply(429, R"({"error_code":"REQUEST_LIMIT_EXCEEDED"})", {{"retry-after", "3"}})
               : Reply(200, kSandboxJson);
  };
  auto api = MakeApi();
  std::atomic<bool> blocked_seen = false;
  auto s = RunAdvancing(clock_, [&] {
    auto r = api->Get("a");
    return r;
  });
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_GE(times[1] - times[0], 3s);
  (void)blocked_seen;
}

TEST_F(HttpSandboxApiTest, PenaltyBlocksOtherCallersToo) {
  handler_ = [](const HttpRequest&, std::stop_token) {
    return Reply(429, R"({"error_code":"REQUEST_LIMIT_EXCEEDED"})", {{"retry-after", "5"}});
  };
  HttpSandboxApiOptions options;
  options.host = "https://ws.example.com";
  options.retry.max_attempts = 1;
  HttpSandboxApi api(options, creds_, bucket_, clock_, transport_);
  auto s = api.Get("a");
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(s.status().retry_after().has_value());
  EXPECT_EQ(*s.status().retry_after(), 5s);
  EXPECT_FALSE(bucket_.TryAcquire(EndpointClass::kRead));
  EXPECT_TRUE(bucket_.Starving()) << "routine calls give way until the read is answered";
  EXPECT_TRUE(bucket_.Take(EndpointClass::kCommand).has_value()) << "exec-sync is paced apart";
  clock_.Advance(5s + 10ms);  // the penalty, then one token's refill time
  EXPECT_TRUE(bucket_.Take(EndpointClass::kRead).has_value());
}

TEST_F(HttpSandboxApiTest, FinalErrorKeepsRetryAfter) {
  std::atomic<int> calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    ++calls;
    return Reply(503, "", {{"retry-after", "1"}});
  };
  auto api = MakeApi();
  auto s = RunAdvancing(clock_, [&] { return api->Get("a"); });
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.status().retry_after(), std::optional<std::chrono::milliseconds>(1s));
  EXPECT_EQ(calls.load(), DefaultRetryPolicy().max_attempts);
}

TEST_F(HttpSandboxApiTest, ExecSyncIsNotRetriedOnceSent) {
  std::atomic<int> calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    ++calls;
    return Reply(503, R"({"error_code":"TEMPORARILY_UNAVAILABLE","message":"try later"})");
  };
  ExecRequest req;
  req.cmd = "/bin/true";
  auto r = MakeApi()->ExecSync("a", req);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls.load(), 1);

  calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    ++calls;
    HttpResult timeout;
    timeout.status = api::DeadlineExceededError("no response");
    return timeout;
  };
  EXPECT_EQ(MakeApi()->ExecSync("a", req).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(HttpSandboxApiTest, ExecSyncRetriesAConnectPhaseFailure) {
  std::atomic<int> calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    if (++calls == 1) {
      HttpResult refused;
      refused.status = api::UnavailableError("connection refused");
      refused.maybe_sent = false;
      return refused;
    }
    return Reply(200,
                 R"({"status":"EXECUTE_COMMAND_STATUS_COMPLETED","exit_code":0,"stdout":"ok"})");
  };
  ExecRequest req;
  req.cmd = "/bin/echo";
  req.execution_timeout = 120s;
  auto api = MakeApi();
  auto r = RunAdvancing(clock_, [&] { return api->ExecSync("a", req); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "ok");
  EXPECT_EQ(calls.load(), 2);
  const HttpRequest sent = transport_.requests().at(1);
  EXPECT_EQ(sent.url, "https://ws.example.com/api/2.0/sandbox-exec/sandboxes/a/exec-sync");
  EXPECT_EQ(sent.timeout, 150s);  // execution_timeout + 30 s margin
}

TEST_F(HttpSandboxApiTest, ErrorsNeverContainTheToken) {
  handler_ = [](const HttpRequest& r, std::stop_token) {
    // A hostile or buggy server echoes the credential back.
    return Reply(401, R"({"error_code":"UNAUTHENTICATED","message":"bad header )" +
                          HeaderOf(r, "Authorization") + R"("})");
  };
  auto s = MakeApi()->Get("a");
  EXPECT_EQ(s.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.status().ToString().find(kToken), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("***"), std::string::npos);
}

TEST_F(HttpSandboxApiTest, GarbageSuccessBodyIsInternal) {
  handler_ = [](const HttpRequest&, std::stop_token) { return Reply(200, "\x01\x02 not json"); };
  auto s = MakeApi()->Get("a");
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("not json"), std::string::npos);
}

TEST_F(HttpSandboxApiTest, CancelDuringBackoffReturnsCancelled) {
  handler_ = [](const HttpRequest&, std::stop_token) { return Reply(503, ""); };
  auto api = MakeApi();
  std::stop_source source;
  auto future = std::async(std::launch::async, [&] { return api->Get("a", source.get_token()); });
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  source.request_stop();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(transport_.count(), 1u);
}

TEST_F(HttpSandboxApiTest, CreateConflictAfterRetryIsAlreadyExists) {
  std::atomic<int> calls = 0;
  handler_ = [&](const HttpRequest&, std::stop_token) {
    if (++calls == 1) {
      HttpResult reset;
      reset.status = api::UnavailableError("connection reset by peer");
      return reset;  // the create may have landed
    }
    return Reply(409, R"({"error_code":"RESOURCE_ALREADY_EXISTS","message":"exists"})");
  };
  auto api = MakeApi();
  auto s = RunAdvancing(clock_, [&] { return api->Create("a", Sandbox{}); });
  EXPECT_EQ(s.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(calls.load(), 2);
}

}  // namespace
}  // namespace sbx::controller::databricks
