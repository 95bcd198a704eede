// HttpSandboxApi against the real DatabricksEmulator on 127.0.0.1: real HTTP, real JSON, the
// emulator's fault injection and call counters.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>

#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/databricks/http_sandbox_api.h"
#include "controller/cloud/http/http_transport.h"
#include "emulator/databricks/databricks_emulator.h"
#include "emulator/internal/fault_injector.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller::databricks {
namespace {

using namespace std::chrono_literals;
using api::StatusCode;
using emulator::DatabricksEmulator;
using emulator::internal::FaultSpec;

constexpr char kPat[] = "dapi-emulator";

// Runs `fn` on another thread, advancing the fake clock whenever someone sleeps on it.
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

class DatabricksIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-dbx-it-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    DatabricksEmulator::Options options;
    options.root_dir = root_;
    options.pending_delay = 0ms;
    options.stopping_delay = 0ms;
    options.workspace_id = "1234567890";
    emulator_ = std::make_unique<DatabricksEmulator>(options);
    auto port = emulator_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    transport_ = http::MakeCppRestTransport();
    pat_ = std::make_unique<PatCredentials>(kPat);
  }
  void TearDown() override {
    if (emulator_) {
      emulator_->Stop();
    }
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<HttpSandboxApi> MakeApi(Clock& clock, CredentialsProvider* creds = nullptr) {
    HttpSandboxApiOptions options;
    options.host = emulator_->base_url();
    options.workspace_id = "1234567890";
    buckets_.push_back(std::make_unique<EndpointPacing>(clock, 1000, 1000));
    return std::make_unique<HttpSandboxApi>(options, creds ? *creds : *pat_, *buckets_.back(),
                                            clock, *transport_);
  }

  int64_t Count(const std::string& endpoint) {
    auto counters = emulator_->faults().Counters();
    auto it = counters.find(endpoint);
    return it == counters.end() ? 0 : it->second;
  }

  // Polls Get until the sandbox reaches `state` (deadline 10 s); the last answer.
  StatusOr<Sandbox> WaitFor(SandboxApi& api, const std::string& id, SandboxState state) {
    StatusOr<Sandbox> last = api::InternalError("not polled");  // PollUntil asks at least once
    testing::PollUntil(
        [&] {
          last = api.Get(id);
          return !last.ok() || last->state == state;
        },
        testing::In(10s), 20ms);
    return last;
  }

  std::string root_;
  std::unique_ptr<DatabricksEmulator> emulator_;
  std::unique_ptr<http::HttpTransport> transport_;
  std::unique_ptr<PatCredentials> pat_;
  std::vector<std::unique_ptr<EndpointPacing>> buckets_;
  SystemClock system_clock_;
  sbx::testing::FakeClock fake_clock_;
};

TEST_F(DatabricksIntegrationTest, CrudRoundTrip) {
  auto api = MakeApi(system_clock_);
  Sandbox desired;
  desired.display_name = "Integration";
  desired.inactivity_timeout = 900s;
  auto created = api->Create("it-crud", desired);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->sandbox_id, "it-crud");
  EXPECT_EQ(created->name, "sandboxes/it-crud");
  EXPECT_EQ(created->display_name, "Integration");
  EXPECT_EQ(created->inactivity_timeout, 900s);
  EXPECT_FALSE(created->create_time.empty());

  auto running = WaitFor(*api, "it-crud", SandboxState::kRunning);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state, SandboxState::kRunning);

  EXPECT_EQ(api->Create("it-crud", desired).status().code(), StatusCode::kAlreadyExists);

  auto stopped = api->Stop("it-crud");
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  ASSERT_EQ(WaitFor(*api, "it-crud", SandboxState::kStopped)->state, SandboxState::kStopped);
  auto started = api->Start("it-crud");
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(WaitFor(*api, "it-crud", SandboxState::kRunning)->state, SandboxState::kRunning);

  ASSERT_TRUE(api->Delete("it-crud").ok());
  EXPECT_EQ(api->Get("it-crud").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(api->Delete("it-crud").code(), StatusCode::kNotFound);
}

TEST_F(DatabricksIntegrationTest, ListAllWalksEveryPage) {
  auto api = MakeApi(system_clock_);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(api->Create("it-list-" + std::to_string(i), Sandbox{}).ok());
  }
  emulator_->faults().ResetCounters();
  auto all = api->ListAll(2);
  ASSERT_TRUE(all.ok()) << all.status();
  std::set<std::string> ids;
  for (const Sandbox& s : *all) {
    ids.insert(s.sandbox_id);
  }
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(all->size(), 5u);
  EXPECT_EQ(Count("databricks.list"), 3);
  auto first = api->List(2, "");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->sandboxes.size(), 2u);
  EXPECT_FALSE(first->next_page_token.empty());
}

TEST_F(DatabricksIntegrationTest, UpdateChangesOnlyTheMaskedPaths) {
  auto api = MakeApi(system_clock_);
  Sandbox desired;
  desired.display_name = "Before";
  desired.inactivity_timeout = 600s;
  ASSERT_TRUE(api->Create("it-update", desired).ok());
  desired.display_name = "After";
  desired.inactivity_timeout = 1200s;
  auto updated = api->Update("it-update", desired, {std::string(kMaskDisplayName)});
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->display_name, "After");
  EXPECT_EQ(updated->inactivity_timeout, 600s);  // not in the mask: unchanged
  updated = api->Update("it-update", desired, {std::string(kMaskInactivityTimeout)});
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(api->Get("it-update")->inactivity_timeout, 1200s);
  EXPECT_EQ(api->Update("it-missing", desired, {std::string(kMaskDisplayName)}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(DatabricksIntegrationTest, StartWhenNotStoppedIsNotFound) {
  auto api = MakeApi(system_clock_);
  ASSERT_TRUE(api->Create("it-start", Sandbox{}).ok());
  ASSERT_EQ(WaitFor(*api, "it-start", SandboxState::kRunning)->state, SandboxState::kRunning);
  emulator_->faults().ResetCounters();
  auto s = api->Start("it-start");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Count("databricks.start"), 1);  // a 404 is not retried
  EXPECT_EQ(api->Get("it-start")->state, SandboxState::kRunning);
}

TEST_F(DatabricksIntegrationTest, ExecSyncOutputExitCodeAndTimeout) {
  auto api = MakeApi(system_clock_);
  ASSERT_TRUE(api->Create("it-exec", Sandbox{}).ok());
  ASSERT_EQ(WaitFor(*api, "it-exec", SandboxState::kRunning)->state, SandboxState::kRunning);
  ExecRequest req;
  req.cmd = "/bin/bash";
  req.args = {"-c", "echo out-$GREETING; echo err >&2; exit 3"};
  req.envs = {{"GREETING", "hello"}};
  req.execution_timeout = 30s;
  auto r = api->ExecSync("it-exec", req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, ExecStatus::kCompleted);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out-hello\n");
  EXPECT_EQ(r->stderr_text, "err\n");
  EXPECT_FALSE(r->command_id.empty());

  req.args = {"-c", "sleep 30"};
  req.execution_timeout = 1s;
  const auto start = std::chrono::steady_clock::now();
  auto t = api->ExecSync("it-exec", req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->status, ExecStatus::kTimedOut);
  EXPECT_FALSE(t->exit_code.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);

  auto commands = api->ListCommands("it-exec");
  ASSERT_TRUE(commands.ok()) << commands.status();
  EXPECT_EQ(commands->size(), 2u);
}

TEST_F(DatabricksIntegrationTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  auto api = MakeApi(fake_clock_);
  ASSERT_TRUE(api->Create("it-429", Sandbox{}).ok());
  FaultSpec fault;
  fault.status = 429;
  fault.count = 1;
  fault.retry_after = 2s;
  emulator_->faults().SetFault("databricks.get", fault);
  emulator_->faults().ResetCounters();
  const auto start = fake_clock_.Steady();
  auto s = RunAdvancing(fake_clock_, [&] { return api->Get("it-429"); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Count("databricks.get"), 2);
  EXPECT_GE(fake_clock_.Steady() - start, 2s);
}

TEST_F(DatabricksIntegrationTest, UnavailableIsRetriedAndTheFinalErrorKeepsRetryAfter) {
  auto api = MakeApi(fake_clock_);
  ASSERT_TRUE(api->Create("it-503", Sandbox{}).ok());
  FaultSpec fault;
  fault.status = 503;
  fault.count = 2;
  fault.retry_after = 1s;
  emulator_->faults().SetFault("databricks.get", fault);
  emulator_->faults().ResetCounters();
  auto s = RunAdvancing(fake_clock_, [&] { return api->Get("it-503"); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Count("databricks.get"), 3);

  fault.count = 100;
  emulator_->faults().SetFault("databricks.get", fault);
  emulator_->faults().ResetCounters();
  auto failed = RunAdvancing(fake_clock_, [&] { return api->Get("it-503"); });
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().retry_after(), std::optional<std::chrono::milliseconds>(1s));
  EXPECT_EQ(Count("databricks.get"), DefaultRetryPolicy().max_attempts);
}

TEST_F(DatabricksIntegrationTest, ExecSyncIsNotRetriedOn503) {
  auto api = MakeApi(fake_clock_);
  ASSERT_TRUE(api->Create("it-exec-503", Sandbox{}).ok());
  FaultSpec fault;
  fault.status = 503;
  fault.count = 1;
  fault.after = true;  // the command ran, the client sees an error
  emulator_->faults().SetFault("databricks.exec_sync", fault);
  emulator_->faults().ResetCounters();
  ExecRequest req;
  req.cmd = "/bin/true";
  auto r = api->ExecSync("it-exec-503", req);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Count("databricks.exec_sync"), 1);
}

TEST_F(DatabricksIntegrationTest, ExecSyncIsRetriedWhenTheServerWasNeverReached) {
  // Nothing listens on this port: connect fails before anything was sent.
  HttpSandboxApiOptions options;
  options.host = "http://127.0.0.1:1";
  options.retry.max_attempts = 3;
  EndpointPacing bucket(fake_clock_, 1000, 1000);
  HttpSandboxApi api(options, *pat_, bucket, fake_clock_, *transport_);
  ExecRequest req;
  req.cmd = "/bin/true";
  int sleeps = 0;
  auto r = RunAdvancing(fake_clock_, [&] {
    auto result = api.ExecSync("x", req);
    return result;
  });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  (void)sleeps;
  // Three attempts means two backoff sleeps: 250..500 ms and 500..1000 ms of fake time.
  EXPECT_GE(fake_clock_.Steady() - Clock::SteadyTime{}, 750ms);
}

TEST_F(DatabricksIntegrationTest, OAuthM2MTokenIsFetchedOnceAndRefreshed) {
  std::map<std::string, std::string> vars = {
      {"DATABRICKS_HOST", emulator_->base_url() + "/"},
      {"DATABRICKS_CLIENT_ID", "sbx-emulator-client"},
      {"DATABRICKS_CLIENT_SECRET", "sbx-emulator-secret"},
  };
  Env env = [&](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto cfg = ResolveConfig({}, env);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, emulator_->base_url());
  BackfillHostMetadata(*cfg, *transport_);
  EXPECT_EQ(cfg->workspace_id, "1234567890");
  EXPECT_EQ(cfg->discovery_url,
            emulator_->base_url() + "/oidc/.well-known/oauth-authorization-server");
  auto creds = MakeCredentialsProvider(*cfg, *transport_, fake_clock_);
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ((*creds)->name(), "oauth-m2m");
  auto api = MakeApi(fake_clock_, creds->get());

  ASSERT_TRUE(api->Create("it-m2m", Sandbox{}).ok());
  ASSERT_TRUE(api->Get("it-m2m").ok());
  ASSERT_TRUE(api->ListAll(10).ok());
  EXPECT_EQ(Count("databricks.oauth_token"), 1);
  fake_clock_.Advance(41min);  // under 20 min left of the emulator's 1 h token
  ASSERT_TRUE(api->Get("it-m2m").ok());
  EXPECT_EQ(Count("databricks.oauth_token"), 2);
  EXPECT_EQ(Count("databricks.oidc_discovery"), 1);
}

TEST_F(DatabricksIntegrationTest, WrongSecretsNeverShowInErrors) {
  PatCredentials wrong("dapi-wrong-secret-123");
  auto api = MakeApi(system_clock_, &wrong);
  auto s = api->Get("anything");
  EXPECT_EQ(s.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.status().ToString().find("dapi-wrong-secret-123"), std::string::npos);

  DatabricksConfig cfg;
  cfg.host = emulator_->base_url();
  cfg.client_id = "sbx-emulator-client";
  cfg.client_secret = "not-the-right-secret";
  OAuthM2MCredentials m2m(cfg, *transport_, system_clock_);
  auto api2 = MakeApi(system_clock_, &m2m);
  auto s2 = api2->Get("anything");
  EXPECT_EQ(s2.status().code(), StatusCode::kUnauthenticated) << s2.status();
  EXPECT_EQ(s2.status().ToString().find("not-the-right-secret"), std::string::npos);
}

TEST_F(DatabricksIntegrationTest, CancellationEndsAnInFlightCallPromptly) {
  auto api = MakeApi(system_clock_);
  ASSERT_TRUE(api->Create("it-cancel", Sandbox{}).ok());
  emulator_->faults().SetLatency("databricks.get", 2s);
  std::stop_source source;
  auto future =
      std::async(std::launch::async, [&] { return api->Get("it-cancel", source.get_token()); });
  // Wait until the request has reached the server, then cancel.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (Count("databricks.get") == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  const auto cancelled_at = std::chrono::steady_clock::now();
  source.request_stop();
  ASSERT_EQ(future.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, 500ms);
}

TEST_F(DatabricksIntegrationTest, CancellationEndsABackoffPromptly) {
  auto api = MakeApi(system_clock_);
  FaultSpec fault;
  fault.status = 503;
  fault.count = 100;
  fault.retry_after = 20s;
  emulator_->faults().SetFault("databricks.get", fault);
  std::stop_source source;
  auto future =
      std::async(std::launch::async, [&] { return api->Get("it-backoff", source.get_token()); });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (Count("databricks.get") == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  source.request_stop();
  ASSERT_EQ(future.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(Count("databricks.get"), 1);
}

}  // namespace
}  // namespace sbx::controller::databricks
