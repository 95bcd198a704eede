// HealthServer over real loopback HTTP (cpprest client), on a port the server picks.
#include "controller/server/health_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>

#include "tests/support/http_test_client.h"
#include "tests/support/raw_connection.h"

namespace sbx::controller {
namespace {

class HealthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.counter("sbx_reconciles_total", "Reconciles.", {{"kind", "Sandbox"}}).Inc(2);
    metrics_.AddCollector([this](Metrics& m) { m.gauge("sbx_leader", "Leader.").Set(leader_); });
    server_ = std::make_unique<HealthServer>(metrics_, [this]() -> std::pair<bool, std::string> {
      std::lock_guard lock(mu_);
      return {ready_, reason_};
    });
    auto port = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    ASSERT_GT(*port, 0);
    port_ = *port;
    client_ =
        std::make_unique<testing::HttpTestClient>("http://127.0.0.1:" + std::to_string(port_));
  }

  void SetReady(bool ready, std::string reason) {
    std::lock_guard lock(mu_);
    ready_ = ready;
    reason_ = std::move(reason);
  }

  Metrics metrics_;
  std::atomic<int> leader_{0};
  std::mutex mu_;
  bool ready_ = false;                                            // Guarded by mu_.
  std::string reason_ = "standby: waiting for the leader lease";  // Guarded by mu_.
  std::unique_ptr<HealthServer> server_;
  int port_ = 0;
  std::unique_ptr<testing::HttpTestClient> client_;
};

TEST_F(HealthServerTest, HealthzAnswersOk) {
  const auto r = client_->Call("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
}

TEST_F(HealthServerTest, ReadyzFollowsTheReadinessCallback) {
  auto r = client_->Call("GET", "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "standby: waiting for the leader lease\n");
  SetReady(true, "");
  r = client_->Call("GET", "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
}

TEST_F(HealthServerTest, MetricsRendersTheRegistryAfterRunningCollectors) {
  leader_ = 1;
  const auto r = client_->Call("GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u)
      << r.Header("Content-Type");
  EXPECT_NE(r.body.find("sbx_reconciles_total{kind=\"Sandbox\"} 2\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("sbx_leader 1\n"), std::string::npos) << r.body;
}

TEST_F(HealthServerTest, UnknownPathsAre404AndOtherMethods405) {
  EXPECT_EQ(client_->Call("GET", "/nope").status, 404);
  EXPECT_EQ(client_->Call("POST", "/metrics", "{}").status, 405);
}

// A probe may use HEAD: the answer has no body, so the next answer on the connection is intact.
TEST_F(HealthServerTest, HeadIsAnsweredWithoutABody) {
  sbx::testing::RawConnection c(port_);
  ASSERT_TRUE(
      c.Send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string both = c.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(both.starts_with("HTTP/1.1 200")) << both;
  EXPECT_NE(both.find("\r\n\r\nHTTP/1.1 200"), std::string::npos) << both;
  EXPECT_TRUE(both.ends_with("\r\n\r\nok\n")) << both;
}

TEST_F(HealthServerTest, StopsListeningAndCanBeStartedAgain) {
  server_->Stop();
  server_->Stop();  // idempotent
  auto again = server_->Start("127.0.0.1:0");
  ASSERT_TRUE(again.ok()) << again.status();
  testing::HttpTestClient client("http://127.0.0.1:" + std::to_string(*again));
  EXPECT_EQ(client.Call("GET", "/healthz").status, 200);
  EXPECT_EQ(server_->Start("127.0.0.1:0").status().code(), api::StatusCode::kFailedPrecondition);
}

TEST_F(HealthServerTest, RejectsMalformedAddresses) {
  HealthServer other(metrics_, [] { return std::pair<bool, std::string>{true, ""}; });
  EXPECT_EQ(other.Start("127.0.0.1").status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.Start("127.0.0.1:http").status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.Start("127.0.0.1:70000").status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.Start("::1:80").status().code(), api::StatusCode::kInvalidArgument);
}

TEST_F(HealthServerTest, AnExplicitPortInUseIsUnavailable) {
  HealthServer other(metrics_, [] { return std::pair<bool, std::string>{true, ""}; });
  EXPECT_EQ(other.Start("127.0.0.1:" + std::to_string(port_)).status().code(),
            api::StatusCode::kUnavailable);
  EXPECT_EQ(client_->Call("GET", "/healthz").status, 200);
}

}  // namespace
}  // namespace sbx::controller
