#include "controller/cloud/http_cloud_clients.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "controller/base/classify_error.h"
#include "controller/cloud/fenced_transport.h"
#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

// Records every request and answers 404: building clients is offline, so a test that expects no
// request checks that none was recorded, and one that makes a call sees where it went and with
// which Authorization header.
class RecordingTransport final : public http::HttpTransport {
 public:
  http::HttpResult Send(const http::HttpRequest& request, std::stop_token) override {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    http::HttpResult r;
    r.response.status = 404;
    r.response.body = R"({"error_code":"NOT_FOUND","message":"no such sandbox"})";
    return r;
  }
  std::vector<http::HttpRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // Every "url Authorization" pair sent so far.
  std::vector<std::string> Sent() {
    std::vector<std::string> out;
    for (const http::HttpRequest& r : requests()) {
      std::string auth;
      for (const auto& [name, value] : r.headers) {
        if (name == "Authorization") {
          auth = value;
        }
      }
      out.push_back(r.url.substr(0, r.url.find("/api/")) + " " + auth);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<http::HttpRequest> requests_;  // Guarded by mu_.
};

class NoStreaming final : public http::StreamingTransport {
 public:
  http::HttpResult Stream(const http::HttpRequest& request, const http::StreamHandlers&,
                          std::stop_token) override {
    ADD_FAILURE() << "unexpected stream from " << request.url;
    http::HttpResult r;
    r.status = api::UnavailableError("no network in this test");
    return r;
  }
};

class HttpCloudClientsTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{}); }
  void TearDown() override {
    if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
  }
  HttpCloudClients Make(WorkspaceFence* fence = nullptr) {
    HttpCloudClientsOptions options;
    options.secrets.secrets_dir = secrets_dir_;
    // These tests are about hosts and credentials, not namespaces (secret_resolver_test.cc).
    options.secrets.scope = SecretScope::kGlobal;
    options.fence = fence;
    return HttpCloudClients(
        *store_, clock_, transport_, streaming_,
        [this](std::string_view n) -> std::optional<std::string> {
          auto it = env_.find(std::string(n));
          return it == env_.end() ? std::nullopt : std::optional<std::string>(it->second);
        },
        options);
  }
  // Stores the Workspace as it is, without sbxctl's validation: what an older client, or a
  // hand-edited database, may hold.
  void StoreWorkspace(const api::Object& ws) { ASSERT_TRUE(store_->Apply({ws}, {}).ok()); }
  void ApplyWorkspace(const std::string& name, const std::string& host,
                      const std::string& token_env) {
    api::Object ws = api::MakeObject(api::Kind::kWorkspace, name);
    ws.workspace_spec().databricks.host = host;
    ws.workspace_spec().databricks.token_from.env = token_env;
    StoreWorkspace(ws);
  }
  // A temporary directory with a secrets/ directory inside, used as --secrets-dir.
  std::filesystem::path MakeSecretsDir() {
    dir_ = std::filesystem::temp_directory_path() /
           ("sbx-clients-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "secrets");
    secrets_dir_ = (dir_ / "secrets").string();
    return dir_;
  }
  static std::string Reason(const api::Status& status) { return ClassifyError(status).reason; }

  testing::FakeClock clock_;
  RecordingTransport transport_;
  NoStreaming streaming_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<SqliteStore> store_;
  std::filesystem::path dir_;
  std::string secrets_dir_;
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

// A fence over a lease this replica holds (`held`, token 7) whose row may have moved behind
// its back (`row_moved`: the local view is still fresh, the store says otherwise).
class ScriptedFence final : public WorkspaceFence {
 public:
  api::Status CheckMutation(const std::string& workspace_id) override {
    checked.push_back(workspace_id);
    const bool ok = held && !row_moved;
    if (lapse_during_check) {
      held = false;  // the store read took longer than what was left of the lease
    }
    return ok ? api::OkStatus() : api::AbortedError("lost the lease of workspace " + workspace_id);
  }
  std::optional<FenceToken> Token(const std::string&) const override {
    if (!held) {
      return std::nullopt;
    }
    return FenceToken{.token = 7,
                      .checked_at = Clock::WallTime(std::chrono::milliseconds(1'700'000'000'123))};
  }
  const std::string& identity() const override { return identity_; }
  bool held = true;
  bool row_moved = false;
  bool lapse_during_check = false;
  std::vector<std::string> checked;

 private:
  std::string identity_ = "replica-a";
};

std::string HeaderOf(const http::HttpRequest& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) {
      return v;
    }
  }
  return "<none>";
}

// Replicas splitting workspaces: nothing is sent without the workspace's lease, a mutation only
// after the lease row was checked, and every request says which replica sent it under which
// token (what sbx-emulator records).
TEST_F(HttpCloudClientsTest, AFencedWorkspaceSendsOnlyUnderItsLease) {
  env_ = {{"DATABRICKS_HOST", "http://127.0.0.1:1"},
          {"DATABRICKS_TOKEN", "dapi-env"},
          {"HOME", "/nonexistent"}};
  ScriptedFence fence;
  auto clients = Make(&fence);
  auto api = clients.Sandboxes("team", "default");
  ASSERT_TRUE(api.ok()) << api.status();

  (void)(*api)->Get("sb-1");  // a read: the local view suffices
  EXPECT_TRUE(fence.checked.empty());
  ASSERT_EQ(transport_.requests().size(), 1u);
  EXPECT_EQ(HeaderOf(transport_.requests()[0], "X-Sbx-Replica"), "replica-a");
  EXPECT_EQ(HeaderOf(transport_.requests()[0], "X-Sbx-Workspace"), "team/default");
  EXPECT_EQ(HeaderOf(transport_.requests()[0], "X-Sbx-Fence"), "7");
  EXPECT_EQ(HeaderOf(transport_.requests()[0], "X-Sbx-Checked-At"), "1700000000123");

  (void)(*api)->Delete("sb-1");  // a mutation: the row is checked, then it is sent
  EXPECT_EQ(fence.checked, std::vector<std::string>{"team/default"});
  ASSERT_EQ(transport_.requests().size(), 2u);
  EXPECT_EQ(transport_.requests()[1].method, "DELETE");

  fence.row_moved = true;  // another replica took the lease; this one has not noticed yet
  api::Status refused = (*api)->Delete("sb-1");
  EXPECT_EQ(refused.code(), api::StatusCode::kAborted) << refused;
  EXPECT_EQ(Reason(refused), "Conflict");  // transient: the key is retried, not parked
  EXPECT_EQ(transport_.requests().size(), 2u) << "nothing may be sent without the lease";
  EXPECT_EQ(fence.checked.size(), 2u) << "refused once, not retried inside the call";

  // The row still matched, but the lease lapsed by this replica's own clock while it was read:
  // the last look, right before the write, refuses.
  fence.row_moved = false;
  fence.lapse_during_check = true;
  refused = (*api)->Delete("sb-1");
  EXPECT_EQ(refused.code(), api::StatusCode::kAborted) << refused;
  EXPECT_EQ(fence.checked.size(), 3u);
  EXPECT_EQ(transport_.requests().size(), 2u) << "nothing may be sent after the lease lapsed";

  // it noticed: not even a read goes out
  EXPECT_EQ((*api)->Get("sb-1").status().code(), api::StatusCode::kAborted);
  EXPECT_EQ(transport_.requests().size(), 2u);
}

// An event stream is a read: it opens only under the lease, and one already open stops at its
// next chunk once the lease is gone (the new holder logs those events, not this replica).
TEST(FencedStreamingTransportTest, OpensUnderTheLeaseAndStopsWhenItMoves) {
  class ThreeChunks final : public http::StreamingTransport {
   public:
    http::HttpResult Stream(const http::HttpRequest& request, const http::StreamHandlers& handlers,
                            std::stop_token) override {
      sent.push_back(request);
      for (int i = 0; i < 3; ++i) {
        if (!handlers.on_data("chunk")) {
          break;
        }
        ++delivered;
      }
      return {};
    }
    std::vector<http::HttpRequest> sent;
    int delivered = 0;
  } inner;
  ScriptedFence fence;
  FencedStreamingTransport stream(inner, fence, "team/w1");
  int seen = 0;
  http::StreamHandlers handlers;
  handlers.on_data = [&](std::string_view) {
    if (++seen == 1) {
      fence.held = false;  // the lease moves while the stream is open
    }
    return true;
  };
  ASSERT_TRUE(stream.Stream({.method = "GET", .url = "http://x/events"}, handlers, {}).status.ok());
  ASSERT_EQ(inner.sent.size(), 1u);
  EXPECT_EQ(HeaderOf(inner.sent[0], "X-Sbx-Fence"), "7");
  EXPECT_EQ(seen, 1) << "nothing after the lease moved";
  EXPECT_EQ(inner.delivered, 1);
  // Not held: not even opened.
  http::HttpResult refused =
      stream.Stream({.method = "GET", .url = "http://x/events"}, handlers, {});
  EXPECT_EQ(refused.status.code(), api::StatusCode::kAborted);
  EXPECT_FALSE(refused.maybe_sent);
  EXPECT_EQ(inner.sent.size(), 1u);
}

TEST_F(HttpCloudClientsTest, UnknownWorkspaceIsNotFound) {
  auto clients = Make();
  auto r = clients.Sandboxes("default", "prod");
  EXPECT_EQ(r.status().code(), api::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("default/prod"), std::string::npos);
}

TEST_F(HttpCloudClientsTest, MissingSecretNamesTheReferenceNotTheValue) {
  env_ = {{"HOME", "/nonexistent"}, {"UNRELATED", "dapi-do-not-print"}};
  ApplyWorkspace("prod", "https://dbc-1.cloud.databricks.com", "SBX_SECRET_PROD_TOKEN");
  auto clients = Make();
  auto r = clients.Sandboxes("default", "prod");
  EXPECT_EQ(r.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("SBX_SECRET_PROD_TOKEN"), std::string::npos);
  EXPECT_EQ(r.status().message().find("dapi-do-not-print"), std::string::npos);
}

TEST_F(HttpCloudClientsTest, RebuildsTheClientWhenTheWorkspaceChanges) {
  env_ = {{"HOME", "/nonexistent"}, {"SBX_SECRET_PROD_TOKEN", "dapi-1"}};
  ApplyWorkspace("prod", "https://dbc-1.cloud.databricks.com", "SBX_SECRET_PROD_TOKEN");
  auto clients = Make();
  auto first = clients.Sandboxes("default", "prod");
  ASSERT_TRUE(first.ok()) << first.status();
  ApplyWorkspace("prod", "https://dbc-2.cloud.databricks.com", "SBX_SECRET_PROD_TOKEN");
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
  env_ = {{"HOME", "/nonexistent"},
          {"DATABRICKS_HOST", "https://dbc-1.cloud.databricks.com"},
          {"DATABRICKS_TOKEN", "dapi-env"},
          {"OPENAI_API_KEY", "sk-app"},
          {"OPENAI_EXECUTOR_API_KEY", "sk-exec"},
          {"SBX_SECRET_MINE", "sk-mine"}};
  auto clients = Make();
  const std::string field = "spec.executor.apiKeyFrom";
  EXPECT_EQ(*clients.ExecutorKey("default", "default", {}, field), "sk-exec");
  EXPECT_EQ(*clients.ExecutorKey("default", "default", {.env = "SBX_SECRET_MINE"}, field),
            "sk-mine");
  auto missing = clients.ExecutorKey("default", "default", {.env = "SBX_SECRET_NOPE"}, field);
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.status().message().find("sk-"), std::string::npos);
}

// ---- A manifest must never be able to take the controller's credentials (SECURITY.md) -------

constexpr char kControllerHost[] = "https://dbc-ours.cloud.databricks.com";
constexpr char kAttackerHost[] = "https://attacker.example.com";

TEST_F(HttpCloudClientsTest, AWorkspaceNamingAnotherHostGetsNoControllerCredentials) {
  env_ = {{"HOME", "/nonexistent"},
          {"DATABRICKS_HOST", kControllerHost},
          {"DATABRICKS_TOKEN", "dapi-controller"}};
  api::Object ws = api::MakeObject(api::Kind::kWorkspace, "evil");
  ws.workspace_spec().databricks.host = kAttackerHost;
  StoreWorkspace(ws);
  auto clients = Make();
  auto r = clients.Sandboxes("default", "evil");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Reason(r.status()), "CredentialsMissing") << r.status();
  EXPECT_TRUE(IsTerminalReason("CredentialsMissing"));
  EXPECT_NE(r.status().message().find("tokenFrom"), std::string::npos) << r.status();
  EXPECT_EQ(r.status().message().find("dapi-controller"), std::string::npos);
  EXPECT_TRUE(transport_.requests().empty());
}

TEST_F(HttpCloudClientsTest, AWorkspaceWithItsOwnTokenSendsOnlyThatTokenToItsHost) {
  env_ = {{"HOME", "/nonexistent"},
          {"DATABRICKS_HOST", kControllerHost},
          {"DATABRICKS_TOKEN", "dapi-controller"},
          {"SBX_SECRET_THEIRS", "dapi-theirs"}};
  ApplyWorkspace("theirs", kAttackerHost, "SBX_SECRET_THEIRS");
  auto clients = Make();
  auto theirs = clients.Sandboxes("default", "theirs");
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  (void)(*theirs)->Get("x");
  auto ours = clients.Sandboxes("default", "default");
  ASSERT_TRUE(ours.ok()) << ours.status();
  (void)(*ours)->Get("x");
  EXPECT_EQ(transport_.Sent(),
            (std::vector<std::string>{std::string(kAttackerHost) + " Bearer dapi-theirs",
                                      std::string(kControllerHost) + " Bearer dapi-controller"}));
}

TEST_F(HttpCloudClientsTest, AWorkspaceOnTheControllersOwnHostUsesTheControllersCredentials) {
  env_ = {{"HOME", "/nonexistent"},
          {"DATABRICKS_HOST", kControllerHost},
          {"DATABRICKS_TOKEN", "dapi-controller"}};
  api::Object ws = api::MakeObject(api::Kind::kWorkspace, "same");
  ws.workspace_spec().databricks.host = std::string(kControllerHost) + "/";
  ws.workspace_spec().limits.requests_per_second = 5;
  StoreWorkspace(ws);
  auto clients = Make();
  auto r = clients.Sandboxes("default", "same");
  ASSERT_TRUE(r.ok()) << r.status();
  (void)(*r)->Get("x");
  EXPECT_EQ(transport_.Sent(),
            (std::vector<std::string>{std::string(kControllerHost) + " Bearer dapi-controller"}));
}

TEST_F(HttpCloudClientsTest, ANamedProfileLendsItsTokenOnlyToItsOwnHost) {
  const std::filesystem::path home = MakeSecretsDir();
  std::ofstream(home / ".databrickscfg") << "[team]\nhost = https://dbc-team.cloud.databricks.com\n"
                                            "token = dapi-team\n";
  env_ = {{"HOME", home.string()}, {"DATABRICKS_HOST", kControllerHost}};
  api::Object ws = api::MakeObject(api::Kind::kWorkspace, "team");
  ws.workspace_spec().databricks.profile = "team";
  StoreWorkspace(ws);
  ws.metadata.name = "stolen";
  ws.workspace_spec().databricks.host = kAttackerHost;
  StoreWorkspace(ws);
  auto clients = Make();
  auto team = clients.Sandboxes("default", "team");
  ASSERT_TRUE(team.ok()) << team.status();
  (void)(*team)->Get("x");
  // The profile's token goes with the profile's host, not with DATABRICKS_HOST …
  EXPECT_EQ(transport_.Sent(),
            (std::vector<std::string>{"https://dbc-team.cloud.databricks.com Bearer dapi-team"}));
  // … and never to a host the manifest chose.
  auto stolen = clients.Sandboxes("default", "stolen");
  EXPECT_EQ(Reason(stolen.status()), "CredentialsMissing") << stolen.status();
  EXPECT_EQ(transport_.requests().size(), 1u);
}

TEST_F(HttpCloudClientsTest, AWorkspaceNamingAnotherOpenAiUrlGetsNoControllerKey) {
  env_ = {{"HOME", "/nonexistent"},
          {"OPENAI_API_KEY", "sk-controller"},
          {"SBX_SECRET_THEIR_KEY", "sk-theirs"}};
  api::Object ws = api::MakeObject(api::Kind::kWorkspace, "evil");
  ws.workspace_spec().openai.base_url = "https://attacker.example.com/v1";
  StoreWorkspace(ws);
  auto clients = Make();
  auto r = clients.Agents("default", "evil");
  EXPECT_EQ(Reason(r.status()), "CredentialsMissing") << r.status();
  EXPECT_EQ(r.status().message().find("sk-controller"), std::string::npos);

  // The public API, named explicitly, is where the controller's key belongs.
  ws.workspace_spec().openai.base_url = "https://api.openai.com/v1/";
  ws.metadata.name = "public";
  StoreWorkspace(ws);
  EXPECT_TRUE(clients.Agents("default", "public").ok());

  // With a key of its own, the other URL is fine.
  ws.metadata.name = "own";
  ws.workspace_spec().openai.base_url = "https://attacker.example.com/v1";
  ws.workspace_spec().openai.api_key_from.env = "SBX_SECRET_THEIR_KEY";
  StoreWorkspace(ws);
  EXPECT_TRUE(clients.Agents("default", "own").ok());
}

TEST_F(HttpCloudClientsTest, TheControllersExecutorKeyGoesOnlyIntoItsOwnWorkspacesSandboxes) {
  env_ = {{"HOME", "/nonexistent"},
          {"DATABRICKS_HOST", kControllerHost},
          {"DATABRICKS_TOKEN", "dapi-controller"},
          {"OPENAI_API_KEY", "sk-controller"},
          {"OPENAI_EXECUTOR_API_KEY", "sk-exec"},
          {"SBX_SECRET_THEIRS", "dapi-theirs"}};
  ApplyWorkspace("theirs", kAttackerHost, "SBX_SECRET_THEIRS");
  auto clients = Make();
  const std::string field = "AgentWorker w spec.executor.apiKeyFrom";
  EXPECT_EQ(*clients.ExecutorKey("default", "default", {}, field), "sk-exec");
  auto theirs = clients.ExecutorKey("default", "theirs", {}, field);
  EXPECT_EQ(Reason(theirs.status()), "CredentialsMissing") << theirs.status();
  EXPECT_EQ(theirs.status().message().find("sk-exec"), std::string::npos);
  // A worker cannot hand the Databricks token to its sandbox either.
  auto databricks_token =
      clients.ExecutorKey("default", "default", {.env = "DATABRICKS_TOKEN"}, field);
  EXPECT_EQ(Reason(databricks_token.status()), "SecretNotAllowed") << databricks_token.status();
  EXPECT_EQ(databricks_token.status().message().find("dapi-controller"), std::string::npos);
}

TEST_F(HttpCloudClientsTest, ReferencesOutsideTheAllowedSourcesAreRefusedEvenFromTheDatabase) {
  MakeSecretsDir();
  env_ = {{"HOME", "/nonexistent"}, {"DATABRICKS_TOKEN", "dapi-controller"}};
  const std::vector<api::SecretRef> refused = {
      {.env = "DATABRICKS_TOKEN"},
      {.file = "/proc/self/environ"},
      {.file = "/etc/hostname"},
      {.file = "../secrets/x"},
      {.file = ".."},
  };
  auto clients = Make();
  int i = 0;
  for (const api::SecretRef& ref : refused) {
    api::Object ws = api::MakeObject(api::Kind::kWorkspace, "w" + std::to_string(i++));
    ws.workspace_spec().databricks.host = kAttackerHost;
    ws.workspace_spec().databricks.token_from = ref;
    StoreWorkspace(ws);
    auto r = clients.Sandboxes("default", ws.metadata.name);
    EXPECT_EQ(Reason(r.status()), "SecretNotAllowed") << ref.env << ref.file << " " << r.status();
  }
  EXPECT_TRUE(transport_.requests().empty());
}

TEST_F(HttpCloudClientsTest, PlainHttpIsRefusedForAHostThatIsNotLoopback) {
  env_ = {{"HOME", "/nonexistent"}, {"SBX_SECRET_T", "dapi-t"}};
  ApplyWorkspace("plain", "http://dbc-1.cloud.databricks.com", "SBX_SECRET_T");
  ApplyWorkspace("local", "http://127.0.0.1:8080", "SBX_SECRET_T");
  auto clients = Make();
  EXPECT_EQ(clients.Sandboxes("default", "plain").status().code(),
            api::StatusCode::kInvalidArgument);
  EXPECT_TRUE(clients.Sandboxes("default", "local").ok());
}

}  // namespace
}  // namespace sbx::controller
