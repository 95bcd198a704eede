// Integration tests of the Databricks Sandbox API emulator over loopback HTTP: one test per
// documented rule of reference/databricks-sandbox-api.md, plus the emulator's own promises
// (process cleanup, home persistence, fault injection, counters).
#include "emulator/databricks/databricks_emulator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"

namespace sbx::emulator {
namespace {

using nlohmann::json;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using namespace std::chrono_literals;

constexpr char kToken[] = "dapi-test-token";

// Polls `pred` every 10 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
  return sbx::testing::PollUntil(pred, sbx::testing::In(timeout), 10ms);
}

// Gone = no /proc entry, or a zombie waiting for a parent that does not reap.
bool ProcessGone(pid_t pid) { return !sbx::testing::ProcessAlive(pid); }

json Json(const HttpResult& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

class DatabricksEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbx-emu-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    if (emulator_) emulator_->Stop();
    emulator_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // Starts an emulator with fast test timings; `customize` may change any option.
  void Boot(const std::function<void(DatabricksEmulator::Options&)>& customize = {}) {
    DatabricksEmulator::Options o;
    o.root_dir = root_;
    o.pending_delay = 50ms;
    o.stopping_delay = 50ms;
    o.tokens = {kToken};
    o.oauth_client_id = "client-1";
    o.oauth_client_secret = "secret-1";
    if (customize) customize(o);
    emulator_ = std::make_unique<DatabricksEmulator>(o);
    auto port = emulator_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    client_ = std::make_unique<HttpTestClient>(emulator_->base_url());
    client_->SetHeader("Authorization", std::string("Bearer ") + kToken);
    admin_ = std::make_unique<HttpTestClient>(emulator_->base_url());
  }

  HttpResult Create(const std::string& id, const json& body = json::object()) {
    return client_->Post("/api/2.0/sandboxes?sandbox_id=" + id, body.dump());
  }
  std::string State(const std::string& id) {
    HttpResult r = client_->Get("/api/2.0/sandboxes/" + id);
    if (r.status != 200) return "HTTP " + std::to_string(r.status);
    return Json(r)["status"]["state"].get<std::string>();
  }
  bool WaitForState(const std::string& id, const std::string& state,
                    std::chrono::milliseconds timeout = 5s) {
    return Eventually([&] { return State(id) == "SANDBOX_STATE_" + state; }, timeout);
  }
  void CreateRunning(const std::string& id, const json& body = json::object()) {
    ASSERT_EQ(Create(id, body).status, 200);
    ASSERT_TRUE(WaitForState(id, "RUNNING"));
  }
  json Exec(const std::string& id, const json& request, int expect_status = 200) {
    HttpResult r =
        client_->Post("/api/2.0/sandbox-exec/sandboxes/" + id + "/exec-sync", request.dump());
    EXPECT_EQ(r.status, expect_status) << r.body;
    return Json(r);
  }
  json Bash(const std::string& id, const std::string& script) {
    return Exec(id, {{"cmd", "/bin/bash"}, {"args", {"-c", script}}});
  }
  static void ExpectError(const HttpResult& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = Json(r);
    EXPECT_EQ(j.value("error_code", ""), code) << r.body;
    EXPECT_FALSE(j.value("message", "").empty()) << r.body;
  }

  std::string root_;
  std::unique_ptr<DatabricksEmulator> emulator_;
  std::unique_ptr<HttpTestClient> client_;
  std::unique_ptr<HttpTestClient> admin_;
};

TEST_F(DatabricksEmulatorTest, CreateReturnsPendingSnakeCaseSandboxThenBecomesRunning) {
  // 1 s: the GET after the create must land inside the pending window; with 150 ms it did not
  // on a host whose hypervisor took 70% of the CPU (seen 2026-12-06).
  Boot([](auto& o) { o.pending_delay = 1s; });
  HttpResult r = Create("sb-1", {{"display_name", "My box"},
                                 {"spec", {{"compute", {{"inactivity_timeout", "900s"}}}}},
                                 {"name", "ignored"},
                                 {"status", {{"state", "SANDBOX_STATE_RUNNING"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = Json(r);
  EXPECT_EQ(j["name"], "sandboxes/sb-1");
  EXPECT_EQ(j["display_name"], "My box");
  EXPECT_EQ(j["spec"]["compute"]["inactivity_timeout"], "900s");
  EXPECT_EQ(j["status"]["state"], "SANDBOX_STATE_PENDING");
  std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)");
  EXPECT_TRUE(std::regex_match(j["create_time"].get<std::string>(), rfc3339)) << j;
  EXPECT_TRUE(std::regex_match(j["update_time"].get<std::string>(), rfc3339)) << j;
  EXPECT_EQ(State("sb-1"), "SANDBOX_STATE_PENDING");
  EXPECT_TRUE(WaitForState("sb-1", "RUNNING"));
}

TEST_F(DatabricksEmulatorTest, DefaultInactivityTimeoutIsFilledIn) {
  Boot([](auto& o) { o.default_inactivity_timeout = 10min; });
  json j = Json(Create("sb-1"));
  EXPECT_EQ(j["spec"]["compute"]["inactivity_timeout"], "600s");
}

// GET /_emulator/sandboxes: every sandbox's id and state for a benchmark's sampler, which must
// cost the client under test nothing (no counter, no rate-limit token).
TEST_F(DatabricksEmulatorTest, TheAdminSandboxListIsNotAnApiCall) {
  Boot([](auto& o) { o.pending_delay = 0ms; });
  ASSERT_EQ(Create("a").status, 200);
  ASSERT_EQ(Create("b").status, 200);
  ASSERT_EQ(admin_->Delete("/_emulator/counters").status, 200);
  const json list = Json(admin_->Get("/_emulator/sandboxes"));
  ASSERT_EQ(list["sandboxes"].size(), 2u) << list;
  EXPECT_EQ(list["sandboxes"][0]["sandbox_id"], "a");
  EXPECT_EQ(list["sandboxes"][1]["sandbox_id"], "b");
  EXPECT_EQ(list["sandboxes"][0]["state"], Json(admin_->Get("/_emulator/sandboxes/a"))["state"]);
  EXPECT_EQ(Json(admin_->Get("/_emulator/counters")), json::object()) << "not an API call";
}

// The seed: "To disable sandbox auto-stop, set inactivity_timeout to 0 or leave the field
// unset". By default neither an unset timeout nor "0s" auto-stops; a sandbox with a short timeout
// next to them does, which shows the idle timer runs.
TEST_F(DatabricksEmulatorTest, UnsetOrZeroInactivityTimeoutNeverAutoStops) {
  Boot([](auto& o) {
    o.pending_delay = 0ms;
    o.stopping_delay = 0ms;
  });
  json unset = Json(Create("unset"));
  EXPECT_FALSE(unset.contains("spec") && unset["spec"].contains("compute")) << unset;
  json zero = Json(Create("zero", {{"spec", {{"compute", {{"inactivity_timeout", "0s"}}}}}}));
  EXPECT_EQ(zero["spec"]["compute"]["inactivity_timeout"], "0s") << zero;
  ASSERT_EQ(Create("short", {{"spec", {{"compute", {{"inactivity_timeout", "0.3s"}}}}}}).status,
            200);
  EXPECT_EQ(Json(admin_->Get("/_emulator/sandboxes/unset"))["inactivity_timeout"], "off");
  EXPECT_EQ(Json(admin_->Get("/_emulator/sandboxes/zero"))["inactivity_timeout"], "off");
  ASSERT_TRUE(WaitForState("short", "STOPPED", 5s));
  EXPECT_EQ(State("unset"), "SANDBOX_STATE_RUNNING");
  EXPECT_EQ(State("zero"), "SANDBOX_STATE_RUNNING");
}

// --default-inactivity-timeout: a server-side default applies to sandboxes that set none (and
// is echoed); "0s" still means off.
TEST_F(DatabricksEmulatorTest, ADefaultInactivityTimeoutStopsOnlySandboxesThatSetNone) {
  Boot([](auto& o) {
    o.pending_delay = 0ms;
    o.stopping_delay = 0ms;
    o.default_inactivity_timeout = 300ms;
  });
  EXPECT_EQ(Json(Create("unset"))["spec"]["compute"]["inactivity_timeout"], "0.300s");
  ASSERT_EQ(Create("zero", {{"spec", {{"compute", {{"inactivity_timeout", "0s"}}}}}}).status, 200);
  ASSERT_TRUE(WaitForState("unset", "STOPPED", 5s));
  EXPECT_EQ(State("zero"), "SANDBOX_STATE_RUNNING");
}

TEST_F(DatabricksEmulatorTest, DuplicateCreateIs409ResourceAlreadyExists) {
  Boot();
  ASSERT_EQ(Create("dup").status, 200);
  ExpectError(Create("dup"), 409, "RESOURCE_ALREADY_EXISTS");
}

TEST_F(DatabricksEmulatorTest, CreateRejectsBadInputWith400) {
  Boot();
  ExpectError(client_->Post("/api/2.0/sandboxes", "{}"), 400, "INVALID_PARAMETER_VALUE");
  ExpectError(Create("bad%20id"), 400, "INVALID_PARAMETER_VALUE");
  ExpectError(client_->Post("/api/2.0/sandboxes?sandbox_id=x", "{not json"), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(client_->Post("/api/2.0/sandboxes?sandbox_id=x", "null"), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(Create("x", {{"spec", {{"compute", {{"inactivity_timeout", "15m"}}}}}}), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(Create("x", {{"spec", {{"compute", {{"inactivity_timeout", "-5s"}}}}}}), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(Create("x", {{"display_name", std::string(257, 'a')}}), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(Create("x", {{"display_name", 42}}), 400, "INVALID_PARAMETER_VALUE");
  EXPECT_EQ(client_->Get("/api/2.0/sandboxes/x").status, 404);  // nothing was created
}

TEST_F(DatabricksEmulatorTest, ErrorBodyCarriesRequestInfo) {
  Boot();
  HttpResult r = client_->Get("/api/2.0/sandboxes/missing");
  ExpectError(r, 404, "NOT_FOUND");
  json j = Json(r);
  ASSERT_TRUE(j["details"].is_array());
  ASSERT_EQ(j["details"].size(), 1u);
  EXPECT_EQ(j["details"][0]["@type"], "type.googleapis.com/google.rpc.RequestInfo");
  EXPECT_FALSE(j["details"][0]["request_id"].get<std::string>().empty());
}

TEST_F(DatabricksEmulatorTest, ListPaginatesWithPageToken) {
  Boot();
  std::set<std::string> created;
  for (int i = 0; i < 5; ++i) {
    std::string id = "sb-" + std::to_string(i);
    ASSERT_EQ(Create(id).status, 200);
    created.insert("sandboxes/" + id);
  }
  std::set<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    std::string path = "/api/2.0/sandboxes?page_size=2";
    if (!token.empty()) path += "&page_token=" + token;
    HttpResult r = client_->Get(path);
    ASSERT_EQ(r.status, 200) << r.body;
    json j = Json(r);
    EXPECT_LE(j["sandboxes"].size(), 2u);
    for (const auto& s : j["sandboxes"]) seen.insert(s["name"].get<std::string>());
    token = j.value("next_page_token", "");
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, created);
  EXPECT_EQ(Json(client_->Get("/api/2.0/sandboxes"))["sandboxes"].size(), 5u);
  ExpectError(client_->Get("/api/2.0/sandboxes?page_token=zz"), 400, "INVALID_PARAMETER_VALUE");
  ExpectError(client_->Get("/api/2.0/sandboxes?page_size=-1"), 400, "INVALID_PARAMETER_VALUE");
}

TEST_F(DatabricksEmulatorTest, PatchHonoursOnlyTheAllowListedMaskPaths) {
  Boot();
  ASSERT_EQ(Create("p", {{"display_name", "old"}}).status, 200);
  HttpResult r = client_->Patch(
      "/api/2.0/sandboxes/p?update_mask=display_name,spec.compute.inactivity_timeout",
      json({{"display_name", "new"}, {"spec", {{"compute", {{"inactivity_timeout", "120s"}}}}}})
          .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["display_name"], "new");
  EXPECT_EQ(Json(r)["spec"]["compute"]["inactivity_timeout"], "120s");
  // Only masked paths are read.
  r = client_->Patch(
      "/api/2.0/sandboxes/p?update_mask=display_name",
      json({{"display_name", "newer"}, {"spec", {{"compute", {{"inactivity_timeout", "5s"}}}}}})
          .dump());
  EXPECT_EQ(Json(r)["spec"]["compute"]["inactivity_timeout"], "120s");
  ExpectError(client_->Patch("/api/2.0/sandboxes/p", R"({"display_name":"x"})"), 400,
              "INVALID_PARAMETER_VALUE");
  ExpectError(client_->Patch("/api/2.0/sandboxes/p?update_mask=", R"({})"), 400,
              "INVALID_PARAMETER_VALUE");
  for (const char* bad : {"spec", "metadata.display_name", "status.state", "name"}) {
    ExpectError(client_->Patch(std::string("/api/2.0/sandboxes/p?update_mask=") + bad, "{}"), 400,
                "INVALID_PARAMETER_VALUE");
  }
  ExpectError(client_->Patch("/api/2.0/sandboxes/nope?update_mask=display_name", "{}"), 404,
              "NOT_FOUND");
  EXPECT_EQ(Json(client_->Get("/api/2.0/sandboxes/p"))["display_name"], "newer");
}

TEST_F(DatabricksEmulatorTest, StartIs404UnlessStoppedAndStopIsIdempotent) {
  // Long enough that the start below surely lands while the sandbox is still STOPPING.
  Boot([](auto& o) { o.stopping_delay = 600ms; });
  CreateRunning("s");
  ExpectError(client_->Post("/api/2.0/sandboxes/s/start", "{}"), 404, "NOT_FOUND");
  HttpResult stop = client_->Post("/api/2.0/sandboxes/s/stop");  // empty body
  ASSERT_EQ(stop.status, 200) << stop.body;
  EXPECT_EQ(Json(stop)["status"]["state"], "SANDBOX_STATE_STOPPING");
  ExpectError(client_->Post("/api/2.0/sandboxes/s/start", "{}"), 404, "NOT_FOUND");
  ASSERT_TRUE(WaitForState("s", "STOPPED"));
  HttpResult again = client_->Post("/api/2.0/sandboxes/s/stop", "{}");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(Json(again)["status"]["state"], "SANDBOX_STATE_STOPPED");
  HttpResult start = client_->Post("/api/2.0/sandboxes/s/start");
  ASSERT_EQ(start.status, 200) << start.body;
  EXPECT_EQ(Json(start)["status"]["state"], "SANDBOX_STATE_PENDING");
  EXPECT_TRUE(WaitForState("s", "RUNNING"));
  ExpectError(client_->Post("/api/2.0/sandboxes/absent/start", "{}"), 404, "NOT_FOUND");
  ExpectError(client_->Post("/api/2.0/sandboxes/absent/stop", "{}"), 404, "NOT_FOUND");
}

TEST_F(DatabricksEmulatorTest, DeleteRemovesTheSandboxAnd404sWhenAbsent) {
  Boot();
  CreateRunning("d");
  HttpResult r = client_->Delete("/api/2.0/sandboxes/d");
  EXPECT_EQ(r.status, 200) << r.body;
  ExpectError(client_->Get("/api/2.0/sandboxes/d"), 404, "NOT_FOUND");
  ExpectError(client_->Delete("/api/2.0/sandboxes/d"), 404, "NOT_FOUND");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/sandboxes/d"));
  EXPECT_EQ(Create("d").status, 200);  // the id can be reused
}

TEST_F(DatabricksEmulatorTest, ApiCallsNeedAValidBearerToken) {
  Boot();
  HttpTestClient anon(emulator_->base_url());
  ExpectError(anon.Get("/api/2.0/sandboxes"), 401, "UNAUTHENTICATED");
  anon.SetHeader("Authorization", "Bearer wrong");
  ExpectError(anon.Get("/api/2.0/sandboxes"), 401, "UNAUTHENTICATED");
  anon.SetHeader("Authorization", "Basic abc");
  ExpectError(anon.Get("/api/2.0/sandboxes"), 401, "UNAUTHENTICATED");
  HttpResult ok =
      client_->Call("GET", "/api/2.0/sandboxes", "",
                    {{"X-Databricks-Workspace-Id", "123"},
                     {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                     {"User-Agent", "sbx-test/1.0 anything"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(DatabricksEmulatorTest, OAuthM2MDiscoveryTokenAndExpiry) {
  Boot([](auto& o) { o.oauth_token_ttl = 300ms; });
  HttpTestClient anon(emulator_->base_url());
  json meta = Json(anon.Get("/.well-known/databricks-config"));
  ASSERT_EQ(meta["oidc_endpoint"], emulator_->base_url() + "/oidc");
  json disc = Json(anon.Get("/oidc/.well-known/oauth-authorization-server"));
  ASSERT_EQ(disc["token_endpoint"], emulator_->base_url() + "/oidc/v1/token");

  // base64("client-1:secret-1")
  const std::string basic = "Basic Y2xpZW50LTE6c2VjcmV0LTE=";
  HttpResult tok =
      anon.Call("POST", "/oidc/v1/token", "grant_type=client_credentials&scope=all-apis",
                {{"Authorization", basic}}, "application/x-www-form-urlencoded");
  ASSERT_EQ(tok.status, 200) << tok.body;
  json t = Json(tok);
  EXPECT_EQ(t["token_type"], "Bearer");
  EXPECT_GE(t["expires_in"].get<int>(), 1);
  EXPECT_EQ(t["scope"], "all-apis");
  std::string access = t["access_token"];

  HttpTestClient oauth(emulator_->base_url());
  oauth.SetHeader("Authorization", "Bearer " + access);
  EXPECT_EQ(oauth.Get("/api/2.0/sandboxes").status, 200);
  EXPECT_TRUE(Eventually([&] { return oauth.Get("/api/2.0/sandboxes").status == 401; }, 3s));

  // base64("client-1:wrong")
  HttpResult bad = anon.Call("POST", "/oidc/v1/token", "grant_type=client_credentials",
                             {{"Authorization", "Basic Y2xpZW50LTE6d3Jvbmc="}},
                             "application/x-www-form-urlencoded");
  EXPECT_EQ(bad.status, 401);
  EXPECT_EQ(Json(bad)["error"], "invalid_client");
  HttpResult grant = anon.Call("POST", "/oidc/v1/token", "grant_type=password",
                               {{"Authorization", basic}}, "application/x-www-form-urlencoded");
  EXPECT_EQ(grant.status, 400);
  // A token without the sandbox (or all-apis) scope is refused.
  HttpResult narrow =
      anon.Call("POST", "/oidc/v1/token", "grant_type=client_credentials&scope=clusters",
                {{"Authorization", basic}}, "application/x-www-form-urlencoded");
  HttpTestClient scoped(emulator_->base_url());
  scoped.SetHeader("Authorization", "Bearer " + Json(narrow)["access_token"].get<std::string>());
  ExpectError(scoped.Get("/api/2.0/sandboxes"), 403, "PERMISSION_DENIED");
}

TEST_F(DatabricksEmulatorTest, IdleSandboxAutoStopsAfterInactivityTimeout) {
  Boot([](auto& o) {
    o.pending_delay = 0ms;
    o.stopping_delay = 0ms;
  });
  ASSERT_EQ(Create("idle", {{"spec", {{"compute", {{"inactivity_timeout", "0.3s"}}}}}}).status,
            200);
  ASSERT_TRUE(WaitForState("idle", "RUNNING"));
  auto running_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitForState("idle", "STOPPED", 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - running_at, 250ms);
}

TEST_F(DatabricksEmulatorTest, ExecSyncRunsArgvWithoutAShell) {
  Boot();
  CreateRunning("e");
  json r = Exec("e", {{"cmd", "echo"}, {"args", {"$HOME", "a;b", "*"}}});
  EXPECT_EQ(r["status"], "EXECUTE_COMMAND_STATUS_COMPLETED");
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["stdout"], "$HOME a;b *\n");
  EXPECT_FALSE(r.value("command_id", "").empty());
  json fail = Bash("e", "echo oops >&2; exit 3");
  EXPECT_EQ(fail["status"], "EXECUTE_COMMAND_STATUS_COMPLETED");
  EXPECT_EQ(fail["exit_code"], 3);
  EXPECT_EQ(fail["stderr"], "oops\n");
}

TEST_F(DatabricksEmulatorTest, ExecSyncMergesEnvsOverTheDefaultEnvironment) {
  Boot();
  CreateRunning("e");
  json r = Exec("e", {{"cmd", "/bin/sh"},
                      {"args", {"-c", "echo \"$FOO|$LANG|${HOME-unset}|$PWD\"; command -v ls"}},
                      {"envs", {{"FOO", "bar"}}}});
  EXPECT_EQ(r["exit_code"], 0) << r;
  std::string expected_pwd = emulator_->isolation_mechanism() == "mount-namespace"
                                 ? "/home/sandbox-agent"
                                 : root_ + "/sandboxes/e/home";
  EXPECT_EQ(r["stdout"], "bar|C.UTF-8|unset|" + expected_pwd + "\n/usr/bin/ls\n");
  json over = Exec(
      "e",
      {{"cmd", "/bin/sh"}, {"args", {"-c", "echo $LANG"}}, {"envs", {{"LANG", "en_US.UTF-8"}}}});
  EXPECT_EQ(over["stdout"], "en_US.UTF-8\n");
}

TEST_F(DatabricksEmulatorTest, ExecSyncTimeoutKillsAndOmitsExitCode) {
  Boot();
  CreateRunning("e");
  auto start = std::chrono::steady_clock::now();
  json r = Exec("e", {{"cmd", "/bin/sh"},
                      {"args", {"-c", "echo started; sleep 30"}},
                      {"execution_timeout", "0.3s"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(r["status"], "EXECUTE_COMMAND_STATUS_TIMED_OUT");
  EXPECT_FALSE(r.contains("exit_code")) << r;
  EXPECT_EQ(r["stdout"], "started\n");
}

TEST_F(DatabricksEmulatorTest, ExecSyncTruncatesOutputAboveTheCap) {
  Boot([](auto& o) { o.exec_output_cap_bytes = 1000; });
  CreateRunning("e");
  json r = Bash("e", "head -c 5000 /dev/zero | tr '\\0' x");
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["stdout"].get<std::string>(), std::string(1000, 'x'));
  EXPECT_EQ(r["truncated"], true);
  json small = Bash("e", "echo hi");
  EXPECT_FALSE(small.value("truncated", false));
}

TEST_F(DatabricksEmulatorTest, SpawnFailureIsFailedAndListCommandsRecordsEveryCommand) {
  Boot();
  CreateRunning("e");
  json ok = Exec("e", {{"cmd", "true"}});
  json failed = Exec("e", {{"cmd", "/definitely/not/here"}, {"args", {"x"}}});
  EXPECT_EQ(failed["status"], "EXECUTE_COMMAND_STATUS_FAILED");
  EXPECT_FALSE(failed.contains("exit_code"));
  json missing = Exec("e", {{"cmd", "no-such-program-sbx"}});
  EXPECT_EQ(missing["status"], "EXECUTE_COMMAND_STATUS_FAILED");

  HttpResult r = client_->Get("/api/2.0/sandbox-exec/sandboxes/e/commands");
  ASSERT_EQ(r.status, 200) << r.body;
  json cmds = Json(r)["commands"];
  ASSERT_EQ(cmds.size(), 3u) << cmds;
  EXPECT_EQ(cmds[0]["command_id"], ok["command_id"]);
  EXPECT_EQ(cmds[0]["cmd"], "true");
  EXPECT_TRUE(cmds[0]["pid"].is_string());  // int64 as a proto3 JSON string
  EXPECT_GT(std::stoll(cmds[0]["pid"].get<std::string>()), 0);
  EXPECT_EQ(cmds[0]["finished"], true);
  EXPECT_EQ(cmds[0]["exit_code"], 0);
  EXPECT_EQ(cmds[1]["command_id"], failed["command_id"]);
  EXPECT_EQ(cmds[1]["args"], json({"x"}));
  EXPECT_FALSE(cmds[1].contains("pid"));
  EXPECT_FALSE(cmds[1].contains("exit_code"));

  json page = Json(client_->Get("/api/2.0/sandbox-exec/sandboxes/e/commands?page_size=2"));
  ASSERT_EQ(page["commands"].size(), 2u);
  json rest =
      Json(client_->Get("/api/2.0/sandbox-exec/sandboxes/e/commands?page_size=2&page_token=" +
                        page["next_page_token"].get<std::string>()));
  ASSERT_EQ(rest["commands"].size(), 1u);
  EXPECT_FALSE(rest.contains("next_page_token"));
}

TEST_F(DatabricksEmulatorTest, ExecSyncRejectsBadRequestsAndNonRunningSandboxes) {
  Boot([](auto& o) { o.pending_delay = 1h; });
  ASSERT_EQ(Create("pending").status, 200);
  ExpectError(
      client_->Post("/api/2.0/sandbox-exec/sandboxes/pending/exec-sync", R"({"cmd":"true"})"), 400,
      "INVALID_STATE");
  ExpectError(client_->Post("/api/2.0/sandbox-exec/sandboxes/nope/exec-sync", R"({"cmd":"true"})"),
              404, "NOT_FOUND");
  ExpectError(client_->Get("/api/2.0/sandbox-exec/sandboxes/nope/commands"), 404, "NOT_FOUND");
  const std::string path = "/api/2.0/sandbox-exec/sandboxes/pending/exec-sync";
  for (const char* body :
       {"{bad json", "[]", R"({"args":["x"]})", R"({"cmd":""})", R"({"cmd":"true","args":"x"})",
        R"({"cmd":"true","envs":{"A":1}})", R"({"cmd":"true","execution_timeout":"-1s"})",
        R"({"cmd":"true","execution_timeout":"abc"})",
        R"({"cmd":"true","execution_timeout":30})"}) {
    ExpectError(client_->Post(path, body), 400, "INVALID_PARAMETER_VALUE");
  }
}

TEST_F(DatabricksEmulatorTest, StopKillsDetachedProcessesWipesTmpAndKeepsHome) {
  Boot();
  CreateRunning("life");
  json r = Bash("life",
                "echo kept > /home/sandbox-agent/x && echo scratch > /tmp/y && "
                "(setsid nohup sleep 1000 >/dev/null 2>&1 & echo $!)");
  ASSERT_EQ(r["exit_code"], 0) << r;
  pid_t pid = std::stoi(r["stdout"].get<std::string>());
  ASSERT_FALSE(ProcessGone(pid));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/sandboxes/life/home/x"));

  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/life/stop", "{}").status, 200);
  ASSERT_TRUE(WaitForState("life", "STOPPED"));
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); }, 2s)) << "pid " << pid << " survived";
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/life/start", "{}").status, 200);
  ASSERT_TRUE(WaitForState("life", "RUNNING"));
  EXPECT_EQ(Bash("life", "cat /home/sandbox-agent/x")["stdout"], "kept\n");
  EXPECT_EQ(Bash("life", "test -e /tmp/y")["exit_code"], 1);
}

TEST_F(DatabricksEmulatorTest, PathRewriteFallbackMapsTheHomeToItsRealDirectory) {
  Boot([](auto& o) { o.prefer_mount_namespace = false; });
  ASSERT_EQ(emulator_->isolation_mechanism(), "path-rewrite");
  CreateRunning("rw");
  json r = Bash("rw", "echo kept > /home/sandbox-agent/x && pwd && echo $SBX_SANDBOX_HOME");
  const std::string home = root_ + "/sandboxes/rw/home";
  EXPECT_EQ(r["stdout"], home + "\n" + home + "\n") << r;
  EXPECT_TRUE(std::filesystem::exists(home + "/x"));
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/rw/stop").status, 200);
  ASSERT_TRUE(WaitForState("rw", "STOPPED"));
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/rw/start").status, 200);
  ASSERT_TRUE(WaitForState("rw", "RUNNING"));
  EXPECT_EQ(Bash("rw", "cat /home/sandbox-agent/x")["stdout"], "kept\n");
}

TEST_F(DatabricksEmulatorTest,
       ExecSyncReturnsWhenTheCommandExitsEvenIfABackgroundChildHoldsItsOutput) {
  Boot();
  CreateRunning("bg");
  auto start = std::chrono::steady_clock::now();
  json r = Bash("bg", "sleep 20 & echo hi");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["stdout"], "hi\n");
}

TEST_F(DatabricksEmulatorTest, ExecSyncCallsRunConcurrently) {
  Boot();
  CreateRunning("c");
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<json> results(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      HttpTestClient c(emulator_->base_url());
      c.SetHeader("Authorization", std::string("Bearer ") + kToken);
      results[i] = Json(c.Post("/api/2.0/sandbox-exec/sandboxes/c/exec-sync",
                               R"({"cmd":"sleep","args":["0.4"]})"));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1100ms);
  for (const auto& r : results) EXPECT_EQ(r["exit_code"], 0) << r;
}

TEST_F(DatabricksEmulatorTest, StopDuringExecSyncEndsTheCommand) {
  Boot();
  CreateRunning("s");
  std::thread stopper([&] {
    HttpTestClient c(emulator_->base_url());
    c.SetHeader("Authorization", std::string("Bearer ") + kToken);
    Eventually([&] {
      json info = Json(admin_->Get("/_emulator/sandboxes/s"));
      return info.value("running_execs", 0) == 1;
    });
    c.Post("/api/2.0/sandboxes/s/stop");
  });
  auto start = std::chrono::steady_clock::now();
  json r = Exec("s", {{"cmd", "sleep"}, {"args", {"30"}}});
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(r["status"], "EXECUTE_COMMAND_STATUS_COMPLETED");
  EXPECT_FALSE(r.contains("exit_code")) << r;  // killed by a signal
  EXPECT_TRUE(WaitForState("s", "STOPPED"));
}

TEST_F(DatabricksEmulatorTest, DeleteViaStoppingShowsStoppingBeforeTheSandboxIsGone) {
  Boot([](auto& o) {
    o.delete_via_stopping = true;
    o.stopping_delay = 200ms;
  });
  CreateRunning("d");
  ASSERT_EQ(client_->Delete("/api/2.0/sandboxes/d").status, 200);
  EXPECT_EQ(State("d"), "SANDBOX_STATE_STOPPING");
  EXPECT_TRUE(Eventually([&] { return client_->Get("/api/2.0/sandboxes/d").status == 404; }));
}

TEST_F(DatabricksEmulatorTest, EmulatorStopKillsEverySandboxProcess) {
  Boot();
  CreateRunning("a");
  json r = Bash("a", "(setsid nohup sleep 1000 >/dev/null 2>&1 & echo $!)");
  pid_t pid = std::stoi(r["stdout"].get<std::string>());
  ASSERT_FALSE(ProcessGone(pid));
  emulator_->Stop();
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); }, 2s));
}

TEST_F(DatabricksEmulatorTest, FaultInjectionAnswers429WithRetryAfterAnd503) {
  Boot();
  ASSERT_EQ(Create("f").status, 200);
  ASSERT_EQ(admin_
                ->Post("/_emulator/faults", json({{"endpoint", "databricks.get"},
                                                  {"status", 429},
                                                  {"count", 2},
                                                  {"retry_after_seconds", 3}})
                                                .dump())
                .status,
            200);
  for (int i = 0; i < 2; ++i) {
    HttpResult r = client_->Get("/api/2.0/sandboxes/f");
    ExpectError(r, 429, "REQUEST_LIMIT_EXCEEDED");
    EXPECT_EQ(r.Header("Retry-After"), "3");
    EXPECT_EQ(Json(r)["details"][0]["@type"], "type.googleapis.com/google.rpc.RequestInfo");
  }
  EXPECT_EQ(client_->Get("/api/2.0/sandboxes/f").status, 200);

  ASSERT_EQ(
      admin_
          ->Post("/_emulator/faults",
                 json({{"endpoint", "databricks.list"}, {"status", 503}, {"rate", 1.0}}).dump())
          .status,
      200);
  ExpectError(client_->Get("/api/2.0/sandboxes"), 503, "TEMPORARILY_UNAVAILABLE");
  ASSERT_EQ(admin_->Delete("/_emulator/faults").status, 200);
  EXPECT_EQ(client_->Get("/api/2.0/sandboxes").status, 200);

  json counters = Json(admin_->Get("/_emulator/counters"));
  EXPECT_EQ(counters["databricks.create"], 1);
  EXPECT_EQ(counters["databricks.get"], 3);
  EXPECT_EQ(counters["databricks.list"], 2);
  ASSERT_EQ(admin_->Post("/_emulator/reset", "{}").status, 200);
  EXPECT_EQ(Json(admin_->Get("/_emulator/counters")), json::object());
}

TEST_F(DatabricksEmulatorTest, AfterPhaseFaultLetsTheCallTakeEffect) {
  Boot();
  CreateRunning("a");
  ASSERT_EQ(admin_
                ->Post("/_emulator/faults", json({{"endpoint", "databricks.exec_sync"},
                                                  {"status", 500},
                                                  {"count", 1},
                                                  {"phase", "after"}})
                                                .dump())
                .status,
            200);
  ExpectError(
      client_->Post("/api/2.0/sandbox-exec/sandboxes/a/exec-sync",
                    R"({"cmd":"/bin/sh","args":["-c","echo ran > /home/sandbox-agent/ran"]})"),
      500, "INTERNAL_ERROR");
  EXPECT_TRUE(std::filesystem::exists(root_ + "/sandboxes/a/home/ran"));
}

TEST_F(DatabricksEmulatorTest, LatencyInjectionSlowsAnEndpoint) {
  Boot();
  ASSERT_EQ(admin_
                ->Post("/_emulator/latency",
                       json({{"endpoint", "databricks.list"}, {"latency", "200ms"}}).dump())
                .status,
            200);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client_->Get("/api/2.0/sandboxes").status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 190ms);
}

TEST_F(DatabricksEmulatorTest, WorkspaceRateLimitAnswers429WithRetryAfter) {
  Boot([](auto& o) { o.requests_per_second = 2; });
  int throttled = 0;
  std::string retry_after;
  for (int i = 0; i < 10; ++i) {
    HttpResult r = client_->Get("/api/2.0/sandboxes");
    if (r.status == 429) {
      ++throttled;
      retry_after = r.Header("Retry-After");
      EXPECT_EQ(Json(r)["error_code"], "REQUEST_LIMIT_EXCEEDED");
    }
  }
  EXPECT_GE(throttled, 5);
  EXPECT_FALSE(retry_after.empty());
}

TEST_F(DatabricksEmulatorTest, AdminStopsBehindTheClientsBackAndRecordsArgvWithoutEnvValues) {
  Boot();
  CreateRunning("a");
  Exec("a", {{"cmd", "true"}, {"args", {"--flag"}}, {"envs", {{"CODEX_API_KEY", "sk-secret"}}}});
  HttpResult log = admin_->Get("/_emulator/exec_log");
  ASSERT_EQ(log.status, 200);
  json entry = Json(log)["commands"][0];
  EXPECT_EQ(entry["cmd"], "true");
  EXPECT_EQ(entry["args"], json({"--flag"}));
  EXPECT_EQ(entry["env_names"], json({"CODEX_API_KEY"}));
  EXPECT_EQ(log.body.find("sk-secret"), std::string::npos);

  ASSERT_EQ(admin_->Post("/_emulator/sandboxes/a/stop").status, 200);
  EXPECT_TRUE(WaitForState("a", "STOPPED"));
}

TEST_F(DatabricksEmulatorTest, UnknownEndpointsAndMethodsAre404) {
  Boot();
  ExpectError(client_->Get("/api/2.0/nothing"), 404, "ENDPOINT_NOT_FOUND");
  ExpectError(client_->Call("PUT", "/api/2.0/sandboxes/x", "{}"), 404, "ENDPOINT_NOT_FOUND");
}

// §4: no FAILED state; a provisioning failure shows as PENDING → STOPPING → STOPPED (early SDK
// text). Injected through the admin API, for any sandbox or one, on create and on start.
TEST_F(DatabricksEmulatorTest, InjectedProvisioningFailureEndsStoppedInsteadOfRunning) {
  Boot([](auto& o) { o.stopping_delay = 300ms; });
  ASSERT_EQ(admin_->Post("/_emulator/provisioning_failures", R"({"count":1})").status, 200);
  ASSERT_EQ(Create("sb-1").status, 200);
  EXPECT_EQ(State("sb-1"), "SANDBOX_STATE_PENDING");
  EXPECT_TRUE(WaitForState("sb-1", "STOPPING"));
  EXPECT_TRUE(WaitForState("sb-1", "STOPPED"));
  json counts = Json(admin_->Get("/_emulator/provisioning_failures"));
  EXPECT_EQ(counts["failed"], 1);
  EXPECT_EQ(counts["pending"], json::object());
  // Used up: the start provisions.
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-1/start", "{}").status, 200);
  EXPECT_TRUE(WaitForState("sb-1", "RUNNING"));

  // Aimed at one sandbox: others are not affected; a start fails too.
  ASSERT_EQ(
      admin_->Post("/_emulator/provisioning_failures", R"({"count":2,"sandbox":"sb-2"})").status,
      200);
  CreateRunning("sb-3");
  ASSERT_EQ(Create("sb-2").status, 200);
  EXPECT_TRUE(WaitForState("sb-2", "STOPPED"));
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-2/start", "{}").status, 200);
  EXPECT_TRUE(WaitForState("sb-2", "STOPPED"));
  EXPECT_EQ(Json(admin_->Get("/_emulator/provisioning_failures"))["failed"], 3);
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-2/start", "{}").status, 200);
  EXPECT_TRUE(WaitForState("sb-2", "RUNNING"));
  ExpectError(admin_->Post("/_emulator/provisioning_failures", R"({"count":-1})"), 400,
              "INVALID_PARAMETER_VALUE");
}

// §1: "at most 40 sandboxes per user" (unconfirmed); refused as §8.2's TooManyRequests class
// with a QuotaFailure detail (§8.1), no Retry-After. One PAT is one user.
TEST_F(DatabricksEmulatorTest, PerUserQuotaRefusesTheCreateWithAQuotaFailure) {
  Boot([](auto& o) {
    o.max_sandboxes_per_user = 2;
    o.tokens = {kToken, "dapi-other-user"};
  });
  ASSERT_EQ(Create("a-1").status, 200);
  ASSERT_EQ(Create("a-2").status, 200);
  HttpResult refused = Create("a-3");
  ExpectError(refused, 429, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(refused.Header("Retry-After"), "");
  bool quota_failure = false;
  const json body = Json(refused);  // a range-for over a temporary's member would dangle
  for (const json& d : body["details"]) {
    quota_failure |= d.value("@type", "") == "type.googleapis.com/google.rpc.QuotaFailure" &&
                     d["violations"][0]["subject"] == "user";
  }
  EXPECT_TRUE(quota_failure) << refused.body;
  EXPECT_EQ(State("a-3"), "HTTP 404");

  HttpTestClient other(emulator_->base_url());
  other.SetHeader("Authorization", "Bearer dapi-other-user");
  EXPECT_EQ(other.Post("/api/2.0/sandboxes?sandbox_id=b-1", "{}").status, 200);
  // The owner is a fingerprint, never the token.
  const std::string owner = Json(admin_->Get("/_emulator/sandboxes/a-1"))["owner"];
  EXPECT_EQ(owner.rfind("user:", 0), 0u);
  EXPECT_EQ(owner.find(kToken), std::string::npos);

  ASSERT_EQ(client_->Delete("/api/2.0/sandboxes/a-1").status, 200);
  EXPECT_EQ(Create("a-3").status, 200);
}

// §3 row 4 (early docs): concurrent updates → 409 ABORTED.
TEST_F(DatabricksEmulatorTest, AConcurrentPatchOfTheSameSandboxIsAborted) {
  Boot([](auto& o) { o.update_duration = 1s; });
  CreateRunning("sb-1");
  auto patch = [&](const std::string& name) {
    return client_->Patch("/api/2.0/sandboxes/sb-1?update_mask=display_name",
                          json{{"display_name", name}}.dump());
  };
  auto first = std::async(std::launch::async, [&] { return patch("one"); });
  auto second = std::async(std::launch::async, [&] { return patch("two"); });
  HttpResult a = first.get(), b = second.get();
  const HttpResult& lost = a.status == 409 ? a : b;
  const HttpResult& won = a.status == 409 ? b : a;
  EXPECT_EQ(won.status, 200) << won.body;
  ExpectError(lost, 409, "ABORTED");
  EXPECT_EQ(Json(client_->Get("/api/2.0/sandboxes/sb-1"))["display_name"],
            Json(won)["display_name"]);
  // One at a time is fine, and another sandbox is never in the way.
  EXPECT_EQ(patch("three").status, 200);
  EXPECT_EQ(Json(client_->Get("/api/2.0/sandboxes/sb-1"))["display_name"], "three");
}

// The seed: "The egress IP is stable while a sandbox is running but can change across stop and
// restart cycles." Each boot gets a deterministic address unless the admin API sets one.
TEST_F(DatabricksEmulatorTest, EgressAddressChangesPerBootAndIsSettable) {
  Boot();
  CreateRunning("sb-1");
  auto egress = [&] { return Json(admin_->Get("/_emulator/sandboxes/sb-1"))["egress_ip"]; };
  const std::string first = egress();
  EXPECT_EQ(first.rfind("198.1", 0), 0u) << first;
  EXPECT_EQ(egress(), first);  // stable while running
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-1/stop", "{}").status, 200);
  ASSERT_TRUE(WaitForState("sb-1", "STOPPED"));
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-1/start", "{}").status, 200);
  ASSERT_TRUE(WaitForState("sb-1", "RUNNING"));
  const std::string second = egress();
  EXPECT_NE(second, first);

  // The next boot's address, and a change now.
  ASSERT_EQ(
      admin_->Post("/_emulator/sandboxes/sb-1/egress", R"({"next_boot_ip":"203.0.113.9"})").status,
      200);
  EXPECT_EQ(egress(), second);
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-1/stop", "{}").status, 200);
  ASSERT_TRUE(WaitForState("sb-1", "STOPPED"));
  ASSERT_EQ(client_->Post("/api/2.0/sandboxes/sb-1/start", "{}").status, 200);
  ASSERT_TRUE(WaitForState("sb-1", "RUNNING"));
  EXPECT_EQ(egress(), "203.0.113.9");
  ASSERT_EQ(admin_->Post("/_emulator/sandboxes/sb-1/egress", R"({"ip":"192.0.2.44"})").status, 200);
  EXPECT_EQ(egress(), "192.0.2.44");
  ExpectError(admin_->Post("/_emulator/sandboxes/sb-1/egress", R"({"ip":"300.1.1.1"})"), 400,
              "INVALID_PARAMETER_VALUE");

  // Deterministic: the same id's first boot gets the same address again.
  ASSERT_EQ(client_->Delete("/api/2.0/sandboxes/sb-1").status, 200);
  CreateRunning("sb-1");
  EXPECT_EQ(egress(), first);
}

// Which sandbox a connection comes from is found from the connecting process (its marker), so
// any program in the sandbox — the stand-in or the real codex — gets the sandbox's egress
// address; a connection from outside keeps its own address.
TEST_F(DatabricksEmulatorTest, EgressAddressOfAConnectionFromInsideASandbox) {
  Boot();
  CreateRunning("sb-1");
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  // A detached process of the sandbox holds a connection open (bash's /dev/tcp).
  Bash("sb-1", "setsid nohup bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                   "; sleep 30' >/dev/null 2>&1 < /dev/null &");
  sockaddr_in peer{};
  len = sizeof peer;
  const int conn = ::accept(listener, reinterpret_cast<sockaddr*>(&peer), &len);
  ASSERT_GE(conn, 0);
  const std::string egress = Json(admin_->Get("/_emulator/sandboxes/sb-1"))["egress_ip"];
  EXPECT_EQ(emulator_->EgressAddressOf("127.0.0.1", ntohs(peer.sin_port), port), egress);
  // Unknown connections (nobody holds them) are their peer address.
  EXPECT_EQ(emulator_->EgressAddressOf("127.0.0.1", 1, port), "127.0.0.1");
  ::close(conn);
  ::close(listener);
}

}  // namespace
}  // namespace sbx::emulator
