#include "controller/cloud/http_cloud_clients.h"

#include <gtest/gtest.h>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

// A transport that must never be used: building clients is offline.
class NoNetwork final : public databricks::HttpTransport {
 public:
  databricks::HttpResult Send(const databricks::HttpRequest& request, std::stop_token) override {
    ADD_FAILURE() << "unexpected request to " << request.url;
    databricks::HttpResult r;
    r.status = api::UnavailableError("no network in this test");
    r.maybe_sent = false;
    return r;
  }
};

class NoStreaming final : public openai::StreamingTransport {
 public:
  databricks::HttpResult Stream(const databricks::HttpRequest& request,
                                const openai::StreamHandlers&, std::stop_token) override {
    ADD_FAILURE() << "unexpected stream from " << request.url;
    databricks::HttpResult r;
    r.status = api::UnavailableError("no network in this test");
    return r;
  }
};

class HttpCloudClientsTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{}); }
  HttpCloudClients Make() {
    return HttpCloudClients(*store_, clock_, transport_, streaming_,
                            [this](std::string_view n) -> std::optional<std::string> {
                              auto it = env_.find(std::string(n));
                              return it == env_.end() ? std::nullopt
                                                      : std::optional<std::string>(it->second);
                            });
  }
  void ApplyWorkspace(const std::string& name, const std::string& host,
                      const std::string& token_env) {
    api::Object ws = api::MakeObject(api::Kind::kWorkspace, name);
    ws.workspace_spec().databricks.host = host;
    ws.workspace_spec().databricks.token_from.env = token_env;
    ASSERT_TRUE(store_->Apply({ws}, {}).ok());
  }

  testing::FakeClock clock_;
  NoNetwork transport_;
  NoStreaming streaming_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(HttpCloudClientsTest, DefaultWorkspaceFallsBackToTheControllerEnvironment) {
  env_ = {{"DATABRICKS_HOST", "http://127.0.0.1:1"},
          {"DATABRICKS_TOKEN", "dapi-env"},
          {"HOME", "/nonexistent"}};
  auto clients = Make();
  auto a = clients.Sandboxes("default", "default");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = clients.Sandboxes("default", "default");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);  // one client per workspace
}

TEST_F(HttpCloudClientsTest, UnknownWorkspaceIsNotFound) {
  auto clients = Make();
  auto r = clients.Sandboxes("default", "prod");
  EXPECT_EQ(r.status().code(), api::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("default/prod"), std::string::npos);
}

TEST_F(HttpCloudClientsTest, MissingSecretNamesTheReferenceNotTheValue) {
  env_ = {{"HOME", "/nonexistent"}, {"UNRELATED", "dapi-do-not-print"}};
  ApplyWorkspace("prod", "https://dbc-1.cloud.databricks.com", "PROD_TOKEN");
  auto clients = Make();
  auto r = clients.Sandboxes("default", "prod");
  EXPECT_EQ(r.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("PROD_TOKEN"), std::string::npos);
  EXPECT_EQ(r.status().message().find("dapi-do-not-print"), std::string::npos);
}

TEST_F(HttpCloudClientsTest, RebuildsTheClientWhenTheWorkspaceChanges) {
  env_ = {{"HOME", "/nonexistent"}, {"PROD_TOKEN", "dapi-1"}};
  ApplyWorkspace("prod", "https://dbc-1.cloud.databricks.com", "PROD_TOKEN");
  auto clients = Make();
  auto first = clients.Sandboxes("default", "prod");
  ASSERT_TRUE(first.ok()) << first.status();
  ApplyWorkspace("prod", "https://dbc-2.cloud.databricks.com", "PROD_TOKEN");
  // Within the secret TTL the cached client is kept; after it, the change is picked up.
  EXPECT_EQ(*clients.Sandboxes("default", "prod"), *first);
  clock_.Advance(std::chrono::minutes(1));
  auto second = clients.Sandboxes("default", "prod");
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *first);
}

TEST_F(HttpCloudClientsTest, AgentsFallBackToTheEnvironmentAndNeedAnApplicationKey) {
  env_ = {{"HOME", "/nonexistent"}};
  auto clients = Make();
  auto missing = clients.Agents("default", "default");
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("OPENAI_API_KEY"), std::string::npos);

  env_["OPENAI_API_KEY"] = "sk-app";
  auto clients2 = Make();
  auto a = clients2.Agents("default", "default");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*clients2.Agents("default", "default"), *a);
}

TEST_F(HttpCloudClientsTest, ExecutorKeyComesFromTheReferenceOrTheControllerEnvironment) {
  env_ = {{"HOME", "/nonexistent"}, {"OPENAI_EXECUTOR_API_KEY", "sk-exec"}, {"MINE", "sk-mine"}};
  auto clients = Make();
  EXPECT_EQ(*clients.ExecutorKey({}, "spec.executor.apiKeyFrom"), "sk-exec");
  EXPECT_EQ(*clients.ExecutorKey({.env = "MINE"}, "spec.executor.apiKeyFrom"), "sk-mine");
  auto missing = clients.ExecutorKey({.env = "NOPE"}, "spec.executor.apiKeyFrom");
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.status().message().find("sk-"), std::string::npos);
}

}  // namespace
}  // namespace sbx::controller
