// Drives the built sbx-emulator binary like a user: it prints its URL on stdout, serves the API,
// and on SIGTERM kills every sandbox process (detached ones too) and exits 0. The seed's own
// launch command, verbatim, starts the sandbox's built-in codex, which registers.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::ProcessAlive;
using sbx::testing::ProcessOptions;

TEST(SbxEmulatorBinaryTest, PrintsItsUrlServesTheApiAndCleansUpOnSigterm) {
  char tmpl[] = "/tmp/sbx-emu-bin-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  ProcessOptions options;
  options.args = {
      "--root", (dir / "emu").string(), "--pending-delay", "0", "--token", "t1", "--stopping-delay",
      "50ms"};
  options.stdout_path = dir / "emulator.out";
  options.stderr_path = dir / "emulator.err";
  auto emu = Process::Start(SBX_EMULATOR_BINARY, options);
  ASSERT_TRUE(emu.ok()) << emu.status();

  // The URL is the first line it prints.
  auto url = (*emu)->WaitForLine(std::regex(R"(^databricks: (http://127\.0\.0\.1:\S+))"), In(30s));
  ASSERT_TRUE(url.has_value()) << (*emu)->Stdout() << (*emu)->Stderr();
  ASSERT_TRUE((*emu)->Stdout().starts_with((*url)[0])) << (*emu)->Stdout();
  sbx::testing::HttpTestClient client((*url)[1]);
  client.SetHeader("Authorization", "Bearer t1");
  ASSERT_EQ(client.Post("/api/2.0/sandboxes?sandbox_id=bin", "{}").status, 200);
  EXPECT_TRUE(PollUntil(
      [&] {
        return json::parse(client.Get("/api/2.0/sandboxes/bin").body)["status"]["state"] ==
               "SANDBOX_STATE_RUNNING";
      },
      In(5s), 10ms));
  auto r = client.Post(
      "/api/2.0/sandbox-exec/sandboxes/bin/exec-sync",
      R"({"cmd":"/bin/bash","args":["-c","setsid nohup sleep 1000 >/dev/null 2>&1 & echo $!"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  pid_t sleeper = std::stoi(json::parse(r.body)["stdout"].get<std::string>());
  ASSERT_TRUE(ProcessAlive(sleeper));

  (*emu)->Signal(SIGTERM);
  EXPECT_EQ((*emu)->Wait(In(30s)), 0) << (*emu)->Stderr();
  EXPECT_TRUE(PollUntil([&] { return !ProcessAlive(sleeper); }, In(2s), 10ms));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// The seed's launch command, verbatim (a login shell, whose /etc/profile resets PATH): `codex`
// is built into the emulated sandbox as on the service, so the executor starts and registers at
// the session's remote_url, and the environment turns `connected`.
TEST(SbxEmulatorBinaryTest, TheSeedsLaunchCommandVerbatimStartsTheBuiltInCodex) {
  char tmpl[] = "/tmp/sbx-emu-seed-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  ProcessOptions options;
  options.args = {"--root",
                  (dir / "emu").string(),
                  "--pending-delay",
                  "0",
                  "--token",
                  "t1",
                  "--openai-port",
                  "0",
                  "--openai-api-key",
                  "sk-app",
                  "--openai-executor-key",
                  "sk-exec"};
  options.stdout_path = dir / "emulator.out";
  options.stderr_path = dir / "emulator.err";
  auto emu = Process::Start(SBX_EMULATOR_BINARY, options);
  ASSERT_TRUE(emu.ok()) << emu.status();
  auto dbx_url = (*emu)->WaitForLine(std::regex(R"(^databricks: (http://\S+))"), In(30s));
  auto oai_url = (*emu)->WaitForLine(std::regex(R"(^openai: (http://\S+)/v1)"), In(30s));
  ASSERT_TRUE(dbx_url && oai_url) << (*emu)->Stdout() << (*emu)->Stderr();
  sbx::testing::HttpTestClient dbx((*dbx_url)[1]);
  dbx.SetHeader("Authorization", "Bearer t1");
  sbx::testing::HttpTestClient oai((*oai_url)[1]);
  oai.SetHeader("Authorization", "Bearer sk-app");
  oai.SetHeader("OpenAI-Beta", "agents=v1");

  auto created = oai.Post(
      "/v1/agents/sessions",
      R"({"agent":{"model":"m"},"environment":{"type":"self_hosted","workspace_directory":"/home/sandbox-agent"}})");
  ASSERT_EQ(created.status, 201) << created.body;
  const json session = json::parse(created.body);
  const std::string remote_url = session["environment"]["remote_url"];
  const std::string environment_id = session["environment"]["id"];
  ASSERT_EQ(dbx.Post("/api/2.0/sandboxes?sandbox_id=seed", "{}").status, 200);
  ASSERT_TRUE(PollUntil(
      [&] {
        return json::parse(dbx.Get("/api/2.0/sandboxes/seed").body)["status"]["state"] ==
               "SANDBOX_STATE_RUNNING";
      },
      In(5s), 10ms));

  // Both a login and a non-login shell find codex.
  for (const char* flag : {"-lc", "-c"}) {
    const json probe = {{"cmd", "/bin/bash"}, {"args", {flag, "command -v codex"}}};
    auto r = dbx.Post("/api/2.0/sandbox-exec/sandboxes/seed/exec-sync", probe.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body).value("exit_code", -1), 0) << flag << " " << r.body;
  }

  const std::string command = "CODEX_HOME=$(mktemp -d) setsid nohup codex exec-server --remote " +
                              remote_url + " --environment-id " + environment_id +
                              " </dev/null >log 2>&1 & echo pid=$!";
  const json launch = {
      {"cmd", "/bin/bash"}, {"args", {"-lc", command}}, {"envs", {{"CODEX_API_KEY", "sk-exec"}}}};
  auto r = dbx.Post("/api/2.0/sandbox-exec/sandboxes/seed/exec-sync", launch.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).value("stdout", "").rfind("pid=", 0), 0u) << r.body;
  EXPECT_TRUE(PollUntil(
      [&] {
        const json env =
            json::parse(oai.Get("/v1/agents/environments/" + environment_id).body, nullptr, false);
        return env.is_object() && env.value("status", "") == "connected";
      },
      In(30s), 20ms))
      << dbx.Post("/api/2.0/sandbox-exec/sandboxes/seed/exec-sync",
                  R"({"cmd":"/bin/cat","args":["/home/sandbox-agent/log"]})")
             .body;

  (*emu)->Signal(SIGTERM);
  EXPECT_EQ((*emu)->Wait(In(30s)), 0) << (*emu)->Stderr();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
