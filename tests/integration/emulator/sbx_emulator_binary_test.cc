// Drives the built sbx-emulator binary like a user: it prints its URL on stdout, serves the API,
// and on SIGTERM kills every sandbox process (detached ones too) and exits 0.
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

}  // namespace
