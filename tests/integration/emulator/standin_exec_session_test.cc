// The stand-in executor's JSON-RPC server over its sessions (emulator/executor/internal/), as
// reference/codex-exec-server.md §9.3 says a stand-in must behave: process/read, process/write,
// fs/readFile, fs/writeFile and the resume window of §7.5, with real child processes. Frames go
// in through OnFrame and come out through the send callback, exactly what travels on the
// WebSocket.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/base64.h"
#include "emulator/executor/internal/exec_session.h"
#include "emulator/executor/internal/json_rpc_server.h"
#include "emulator/executor/standin_executor.h"
#include "gtest/gtest.h"
#include "tests/support/poll.h"

namespace sbx::emulator::internal::executor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using sbx::testing::In;
using sbx::testing::PollUntil;

// One connection: what the executor sent on it.
class Wire {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& frame) {
      std::lock_guard lock(mu_);
      frames_.push_back(json::parse(frame));
    };
  }
  std::vector<json> Frames() {
    std::lock_guard lock(mu_);
    return frames_;
  }
  // The newest response with this id: a poll that repeats a request id must see each new
  // answer, not the first one again.
  std::optional<json> Response(int id) {
    std::vector<json> frames = Frames();
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      if (f->contains("id") && (*f)["id"] == id) {
        return *f;
      }
    }
    return std::nullopt;
  }
  // Notifications `method` for `process_id`, in arrival order.
  std::vector<json> Notifications(const std::string& method, const std::string& process_id) {
    std::vector<json> out;
    for (const json& f : Frames()) {
      if (f.value("method", "") == method && f["params"].value("processId", "") == process_id) {
        out.push_back(f["params"]);
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<json> frames_;
};

class StandinExecSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbx-standin-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Sends request `id` and returns the response (sent synchronously by OnFrame).
  json Call(JsonRpcServer& server, Wire& wire, int id, const std::string& method,
            const json& params) {
    EXPECT_TRUE(server.OnFrame(json{{"id", id}, {"method", method}, {"params", params}}.dump()));
    std::optional<json> r = wire.Response(id);
    EXPECT_TRUE(r.has_value()) << method;
    return r.value_or(json::object());
  }
  // initialize + initialized on a new connection; returns the session id.
  std::string Open(JsonRpcServer& server, Wire& wire, const json& params = {{"clientName", "t"}}) {
    json r = Call(server, wire, 1, "initialize", params);
    EXPECT_TRUE(r.contains("result")) << r.dump();
    EXPECT_TRUE(server.OnFrame(R"({"method":"initialized"})"));
    return r["result"].value("sessionId", "");
  }
  std::string Uri(const std::string& name) const { return "file://" + (dir_ / name).string(); }
  static std::string Text(const json& read) {
    std::string out;
    for (const json& c : read["chunks"]) {
      out += api::Base64Decode(c["chunk"].get<std::string>()).value_or("<bad base64>");
    }
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(StandinExecSessionTest, WriteFileThenReadFileRoundTripsBytesAndRefusesNativePaths) {
  ExecSessions sessions;
  Wire wire;
  JsonRpcServer server(sessions, wire.Sink());
  ASSERT_TRUE(server.OnFrame(R"({"id":1,"method":"initialize","params":{"clientName":"t"}})"));
  // Filesystem methods wait for `initialized` (§7.2), with codex's text.
  json early = Call(server, wire, 2, "fs/readFile", {{"path", Uri("x")}, {"sandbox", nullptr}});
  EXPECT_EQ(early["error"]["code"], -32600);
  EXPECT_EQ(early["error"]["message"],
            "client must send initialized before using filesystem methods");
  ASSERT_TRUE(server.OnFrame(R"({"method":"initialized"})"));

  const std::string bytes("hello\0world\n\xff", 13);
  json wrote = Call(
      server, wire, 3, "fs/writeFile",
      {{"path", Uri("f.bin")}, {"dataBase64", api::Base64Encode(bytes)}, {"sandbox", nullptr}});
  ASSERT_TRUE(wrote.contains("result")) << wrote.dump();
  EXPECT_EQ(wrote["result"], json::object());
  std::ifstream on_disk(dir_ / "f.bin", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(on_disk), {}), bytes);

  json read = Call(server, wire, 4, "fs/readFile", {{"path", Uri("f.bin")}, {"sandbox", nullptr}});
  ASSERT_TRUE(read.contains("result")) << read.dump();
  EXPECT_EQ(api::Base64Decode(read["result"]["dataBase64"].get<std::string>()), bytes);

  json native = Call(server, wire, 5, "fs/readFile", {{"path", (dir_ / "f.bin").string()}});
  EXPECT_EQ(native["error"]["code"], -32602);
  EXPECT_EQ(native["error"]["message"], "invalid URI: relative URL without a base");
  json missing_field = Call(server, wire, 6, "fs/writeFile", {{"path", Uri("g")}});
  EXPECT_EQ(missing_field["error"]["message"], "missing field `dataBase64`");
  json absent = Call(server, wire, 7, "fs/readFile", {{"path", Uri("nope")}});
  EXPECT_EQ(absent["error"]["message"], "No such file or directory (os error 2)");
}

TEST_F(StandinExecSessionTest, WriteFeedsPipedStdinAndReadReturnsOutputExitAndCloseBySeq) {
  ExecSessions sessions;
  Wire wire;
  JsonRpcServer server(sessions, wire.Sink());
  Open(server, wire);
  json started = Call(server, wire, 2, "process/start",
                      {{"processId", "p1"},
                       {"argv", {"/bin/sh", "-c", "read line; echo got:$line; exit 3"}},
                       {"cwd", "file://" + dir_.string()},
                       {"env", json::object()},
                       {"tty", false},
                       {"pipeStdin", true}});
  EXPECT_EQ(started["result"], (json{{"processId", "p1"}, {"sandboxType", "none"}}));
  json wrote =
      Call(server, wire, 3, "process/write",
           {{"processId", "p1"}, {"chunk", api::Base64Encode("hello\n")}, {"writeId", "w1"}});
  EXPECT_EQ(wrote["result"]["status"], "accepted");

  // waitMs blocks until something after afterSeq exists; poll until the process is closed.
  json read;
  ASSERT_TRUE(PollUntil(
      [&] {
        read = Call(server, wire, 4, "process/read",
                    {{"processId", "p1"}, {"afterSeq", 0}, {"waitMs", 1000}})["result"];
        return read.value("closed", false);
      },
      In(10s)));
  EXPECT_EQ(Text(read), "got:hello\n");
  EXPECT_TRUE(read["exited"]);
  EXPECT_EQ(read["exitCode"], 3);
  EXPECT_EQ(read["sandboxDenied"], false);
  // Output, exited and closed share one increasing seq: nextSeq is past all of them.
  const json exited = wire.Notifications("process/exited", "p1").at(0);
  const json closed = wire.Notifications("process/closed", "p1").at(0);
  EXPECT_LT(read["chunks"].back()["seq"].get<int64_t>(), exited["seq"].get<int64_t>());
  EXPECT_EQ(closed["seq"].get<int64_t>(), exited["seq"].get<int64_t>() + 1);
  EXPECT_EQ(read["nextSeq"].get<int64_t>(), closed["seq"].get<int64_t>() + 1);
  // Reading on from the last chunk returns no chunk again.
  json after = Call(server, wire, 5, "process/read",
                    {{"processId", "p1"}, {"afterSeq", read["chunks"].back()["seq"]}})["result"];
  EXPECT_TRUE(after["chunks"].empty());

  // Without pipeStdin (or tty) there is no stdin to write; an unknown id is said so.
  Call(server, wire, 6, "process/start",
       {{"processId", "p2"},
        {"argv", {"/bin/sleep", "5"}},
        {"cwd", "file://" + dir_.string()},
        {"env", json::object()},
        {"tty", false}});
  EXPECT_EQ(Call(server, wire, 7, "process/write",
                 {{"processId", "p2"},
                  {"chunk", api::Base64Encode("x")},
                  {"writeId", "w2"}})["result"]["status"],
            "stdinClosed");
  EXPECT_EQ(Call(server, wire, 8, "process/write",
                 {{"processId", "nope"},
                  {"chunk", api::Base64Encode("x")},
                  {"writeId", "w3"}})["result"]["status"],
            "unknownProcess");
  EXPECT_EQ(Call(server, wire, 9, "process/terminate", {{"processId", "p2"}})["result"]["running"],
            true);
  EXPECT_EQ(Call(server, wire, 10, "process/read", {{"processId", "nope"}})["error"]["code"],
            -32600);
}

TEST_F(StandinExecSessionTest, MaxBytesPagesTheOutputAndNextSeqContinuesIt) {
  ExecSessions sessions;
  Wire wire;
  JsonRpcServer server(sessions, wire.Sink());
  Open(server, wire);
  Call(server, wire, 2, "process/start",
       {{"processId", "p"},
        {"argv", {"/bin/sh", "-c", "echo one; sleep 0.2; echo two; sleep 0.2; echo three"}},
        {"cwd", "file://" + dir_.string()},
        {"env", json::object()},
        {"tty", false}});
  ASSERT_TRUE(
      PollUntil([&] { return !wire.Notifications("process/closed", "p").empty(); }, In(10s)));
  std::string all;
  int64_t after = 0;
  int pages = 0;
  for (int id = 10; id < 20; ++id) {
    json page = Call(server, wire, id, "process/read",
                     {{"processId", "p"}, {"afterSeq", after}, {"maxBytes", 1}})["result"];
    if (page["chunks"].empty()) {
      break;
    }
    EXPECT_EQ(page["chunks"].size(), 1u);  // at least one chunk, never more than maxBytes allows
    all += Text(page);
    after = page["nextSeq"].get<int64_t>() - 1;
    ++pages;
  }
  EXPECT_EQ(all, "one\ntwo\nthree\n");
  EXPECT_EQ(pages, 3);
}

TEST_F(StandinExecSessionTest, ProcessesSurviveADroppedConnectionAndAResumeReadsTheirOutput) {
  ExecSessions sessions;  // the default 30 s window
  Wire first;
  auto server = std::make_unique<JsonRpcServer>(sessions, first.Sink());
  const std::string session_id = Open(*server, first);
  ASSERT_FALSE(session_id.empty());
  Call(*server, first, 2, "process/start",
       {{"processId", "slow"},
        {"argv", {"/bin/sh", "-c", "echo before; read go; echo after-drop; exit 5"}},
        {"cwd", "file://" + dir_.string()},
        {"env", json::object()},
        {"tty", false},
        {"pipeStdin", true}});
  ASSERT_TRUE(
      PollUntil([&] { return !first.Notifications("process/output", "slow").empty(); }, In(10s)));
  server->Detach();  // the socket dropped
  server.reset();

  // A new connection without resumeSessionId gets a new session, which does not know "slow".
  Wire other;
  JsonRpcServer fresh(sessions, other.Sink());
  EXPECT_NE(Open(fresh, other), session_id);
  EXPECT_EQ(Call(fresh, other, 2, "process/read", {{"processId", "slow"}})["error"]["code"],
            -32600);

  // Resuming gets the same session back: the process still runs and takes input.
  Wire second;
  JsonRpcServer resumed(sessions, second.Sink());
  EXPECT_EQ(Open(resumed, second, {{"clientName", "t"}, {"resumeSessionId", session_id}}),
            session_id);
  EXPECT_EQ(Call(resumed, second, 2, "process/write",
                 {{"processId", "slow"},
                  {"chunk", api::Base64Encode("\n")},
                  {"writeId", "w"}})["result"]["status"],
            "accepted");
  json read;
  int id = 3;
  ASSERT_TRUE(PollUntil(
      [&] {
        read = Call(resumed, second, id++, "process/read",
                    {{"processId", "slow"}, {"afterSeq", 0}, {"waitMs", 500}})["result"];
        return read.value("closed", false);
      },
      In(10s)));
  EXPECT_EQ(Text(read), "before\nafter-drop\n");
  EXPECT_EQ(read["exitCode"], 5);
  // The resumed connection gets the live notifications from then on.
  EXPECT_FALSE(second.Notifications("process/closed", "slow").empty());
  EXPECT_TRUE(first.Notifications("process/closed", "slow").empty());
}

TEST_F(StandinExecSessionTest, AfterTheResumeWindowTheSessionIsUnknownAndItsProcessesAreKilled) {
  ExecSessions sessions(300ms);
  Wire first;
  auto server = std::make_unique<JsonRpcServer>(sessions, first.Sink());
  const std::string session_id = Open(*server, first);
  const std::string pid_file = (dir_ / "pid").string();
  Call(*server, first, 2, "process/start",
       {{"processId", "long"},
        {"argv", {"/bin/sh", "-c", "echo $$ > " + pid_file + "; exec sleep 60"}},
        {"cwd", "file://" + dir_.string()},
        {"env", json::object()},
        {"tty", false}});
  pid_t pid = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        std::ifstream in(pid_file);
        return static_cast<bool>(in >> pid) && pid > 0;
      },
      In(10s)));
  server->Detach();
  server.reset();
  // Within the window it is alive; after it, it is gone (no resume came).
  EXPECT_EQ(::kill(pid, 0), 0);
  EXPECT_TRUE(PollUntil([&] { return ::kill(pid, 0) != 0; }, In(10s)));

  Wire second;
  JsonRpcServer late(sessions, second.Sink());
  json r =
      Call(late, second, 1, "initialize", {{"clientName", "t"}, {"resumeSessionId", session_id}});
  EXPECT_EQ(r["error"]["code"], -32600);
  EXPECT_EQ(r["error"]["message"], "unknown session id " + session_id);
}

TEST(StandinExecutorDefaults, TheResumeWindowIsThirtySecondsAsInCodex) {
  EXPECT_EQ(ExecSessions::kDefaultResumeWindow, 30s);
  EXPECT_EQ(StandinExecutorOptions{}.resume_window, 30s);
}

}  // namespace
}  // namespace sbx::emulator::internal::executor
