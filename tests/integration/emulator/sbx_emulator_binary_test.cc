// Drives the built sbx-emulator binary like a user: it prints its URL on stdout, serves the API,
// and on SIGTERM kills every sandbox process (detached ones too) and exits 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"

extern char** environ;

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::ProcessAlive;

// Reads one line from `fd` (blocking), at most 4 KiB.
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (line.size() < 4096 && ::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

TEST(SbxEmulatorBinaryTest, PrintsItsUrlServesTheApiAndCleansUpOnSigterm) {
  char tmpl[] = "/tmp/sbx-emu-bin-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = {
      SBX_EMULATOR_BINARY, "--root", root, "--pending-delay", "0", "--token", "t1",
      "--stopping-delay",  "50ms"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t emu = -1;
  ASSERT_EQ(posix_spawn(&emu, SBX_EMULATOR_BINARY, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);

  std::string first = ReadLine(out[0]);
  ASSERT_TRUE(first.starts_with("databricks: http://127.0.0.1:")) << first;
  sbx::testing::HttpTestClient client(first.substr(std::string("databricks: ").size()));
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

  ASSERT_EQ(::kill(emu, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(emu, &status, 0), emu);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(PollUntil([&] { return !ProcessAlive(sleeper); }, In(2s), 10ms));
  ::close(out[0]);
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace
