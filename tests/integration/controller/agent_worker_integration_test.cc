// Integration tests of the AgentWorker contract (DESIGN §3) as shipped: the BUILT sbxd, sbxctl
// and sbx-emulator binaries. Each test has its own temp directory, its own emulator (both
// halves: Databricks API with 200 ms PENDING/STOPPING delays, OpenAI Agents API whose
// environments report `disconnected` 1 s after the executor's socket closed, stand-in `codex`
// in every sandbox), its own SQLite store and its own sbxd (1 s sweeps, executor status checks
// and probes every 2 s so that losses are noticed within seconds, not minutes).
//
// Desired state goes in with `sbxctl apply -f`, status comes back with `sbxctl get -o json`;
// the cloud side is checked (and broken) through the emulator's APIs and admin APIs. Emulated
// sandboxes run their commands on this host (as root, in a private mount namespace), so the
// executor's pid in status.executor.pid is a host pid the test can look at and kill.
//
// Everything waits by polling with a deadline; nothing sleeps to "let it settle", except the
// no-hot-loop check, which by nature watches a counter over a fixed window.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::ProcessAlive;
using sbx::testing::ProcessOptions;
using sbx::testing::ReadFile;
using sbx::testing::RunProcess;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using sbx::testing::WriteFile;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr milliseconds kConverge{45'000};  // apply → Ready and friends, on a loaded machine
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";

struct WorkerManifest {
  std::string name;
  std::string command;                   // spec.executor.command; empty = default (codex)
  std::vector<std::string> extra_setup;  // more `run`s of setup steps after the workspace one

  std::string Yaml() const {
    std::string y = "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: " + name +
                    "\nspec:\n  sandbox:\n    inactivityTimeout: 1h\n    setup:\n"
                    "      - name: workspace\n        run: " +
                    json(std::string("mkdir -p ") + kWorkspace).dump() + "\n";
    for (size_t i = 0; i < extra_setup.size(); ++i) {
      y += "      - name: extra" + std::to_string(i) +
           "\n        run: " + json(extra_setup[i]).dump() + "\n";
    }
    y += "  agent:\n    model: gpt-5-codex\n    instructions: Keep the tests green.\n"
         "  workspaceDirectory: " +
         std::string(kWorkspace) + "\n";
    if (!command.empty()) {
      y += "  executor:\n    command: " + json(command).dump() + "\n";
    }
    return y;
  }
};

// A worker whose executor command is a wrapper (installed by a setup step) that writes one
// recognisable line to the log, "codex-wrap: starting codex exec-server for <environment id>",
// then execs the stand-in codex (same pid).
WorkerManifest WrappedWorker(const std::string& name) {
  WorkerManifest m{name, "/home/sandbox-agent/bin/codex-wrap", {}};
  m.extra_setup.push_back(
      "mkdir -p /home/sandbox-agent/bin && printf '%s\\n' '#!/bin/bash' "
      "'echo \"codex-wrap: starting codex $1 for $5\"' 'exec codex \"$@\"' "
      "> /home/sandbox-agent/bin/codex-wrap && chmod +x /home/sandbox-agent/bin/codex-wrap");
  return m;
}

class AgentWorkerTest : public ::testing::Test {
 protected:
  AgentWorkerTest() : harness_(HarnessOptions()) {}

  // Recognisable secrets: the secrets tests look for them where they must never be.
  static SbxdHarness::Options HarnessOptions() {
    std::random_device rd;
    const std::string salt = std::to_string(rd() % 100000);
    return {.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
            .dir_prefix = "sbx-aw-itest-",
            .token = "dapi-SECRET-55e1-" + salt,
            .app_key = "sk-app-SECRET-91c2-" + salt,
            .executor_key = "sk-exec-SECRET-7f3a-" + salt};
  }

  void SetUp() override {
    dir_ = harness_.dir();
    db_ = harness_.db();
    token_ = harness_.options().token;
    app_key_ = harness_.options().app_key;
    executor_key_ = harness_.options().executor_key;
  }

  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  ProcessOptions Options(const std::string& log_name, std::vector<std::string> args) {
    return harness_.ChildOptions(log_name, std::move(args));
  }

  // Both halves; environments report `disconnected` 1 s after the executor's socket closed.
  void StartEmulator(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--disconnected-after", "1s"});
    const sbx::api::Status started = harness_.StartEmulator(std::move(extra), kConverge);
    ASSERT_TRUE(started.ok()) << started;
    dbx_ = &harness_.databricks();
    oai_ = &harness_.openai();
  }

  // Executor status checks and probes every 2 s, so that losses are noticed within seconds.
  void StartSbxd(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(),
                 {"--executor-status-interval", "2s", "--executor-probe-interval", "2s"});
    auto p = harness_.StartSbxd("sbxd", std::move(extra));
    ASSERT_TRUE(p.ok()) << p.status();
    sbxd_ = *p;
  }

  // Emulator (with `emulator_flags`) and sbxd.
  void StartAll(std::vector<std::string> emulator_flags = {},
                std::vector<std::string> sbxd_flags = {}) {
    ASSERT_NO_FATAL_FAILURE(StartEmulator(std::move(emulator_flags)));
    ASSERT_NO_FATAL_FAILURE(StartSbxd(std::move(sbxd_flags)));
  }

  RunResult Sbxctl(std::vector<std::string> args, milliseconds timeout = milliseconds(60'000)) {
    return harness_.Sbxctl(std::move(args), timeout);
  }

  void ApplyYaml(const std::string& name, const std::string& yaml) {
    RunResult r = harness_.Apply(name, yaml);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void Apply(const WorkerManifest& m) { ApplyYaml(m.name, m.Yaml()); }

  json Get(const std::string& kind, const std::string& name) { return harness_.Get(kind, name); }

  // Polls the worker until `pred(worker json)`; last_ keeps the last read for messages.
  bool WaitWorker(const std::string& name, const std::function<bool(const json&)>& pred,
                  milliseconds timeout = kConverge) {
    return PollUntil(
        [&] {
          last_ = Get("agentworker", name);
          return last_.is_object() && pred(last_);
        },
        In(timeout), milliseconds(200));
  }

  static bool Ready(const json& w) {
    return ConditionOf(w, "Ready") == std::pair<std::string, std::string>{"True", "Ready"} &&
           ConditionOf(w, "ExecutorConnected").first == "True" && Pid(w) > 0;
  }
  bool WaitReady(const std::string& name) { return WaitWorker(name, Ready); }

  static std::string S(const json& w, const char* field) {
    return w.is_object() && w.contains("status") ? w["status"].value(field, "") : "";
  }
  static int64_t Pid(const json& w) {
    return w.value(json::json_pointer("/status/executor/pid"), int64_t{0});
  }
  static int Restarts(const json& w) {
    return w.value(json::json_pointer("/status/executor/restarts"), 0);
  }
  static std::string ExitReason(const json& w) {
    return w.value(json::json_pointer("/status/executor/lastExitReason"), std::string());
  }

  std::string Events(const std::string& target) {
    RunResult r = Sbxctl({"events", target});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  static int Count(const std::string& haystack, const std::string& needle) {
    int n = 0;
    for (size_t at = haystack.find(needle); at != std::string::npos;
         at = haystack.find(needle, at + needle.size())) {
      ++n;
    }
    return n;
  }

  // Sends one user message to `session` and waits until its turn has completed.
  void RunTurn(const std::string& session, const std::string& text) {
    const json body = {
        {"events",
         {{{"type", "agent.session.input.message"},
           {"input",
            {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", text}}}}}}}}}}};
    HttpResult sent = oai_->Post("/v1/agents/sessions/" + session + "/events", body.dump());
    ASSERT_EQ(sent.status, 202) << sent.body;
    ASSERT_TRUE(PollUntil(
        [&] {
          const json turns = json::parse(
              oai_->Get("/v1/agents/sessions/" + session + "/turns").body, nullptr, false);
          return turns.is_object() && turns.contains("data") && !turns["data"].empty() &&
                 turns["data"][0].value("status", "") == "completed";
        },
        In(kConverge), milliseconds(200)));
  }

  // Registration attempts the OpenAI emulator saw for an environment.
  int64_t RegistrationAttempts(const std::string& environment_id) {
    HttpResult r = oai_->Get("/_emulator/openai/registrations");
    EXPECT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains(environment_id)) {
      return 0;
    }
    return j[environment_id].value("attempts", int64_t{0});
  }

  SbxdHarness harness_;
  fs::path dir_;
  fs::path db_;
  std::string token_, app_key_, executor_key_;
  Process* sbxd_ = nullptr;        // owned by the harness
  HttpTestClient* dbx_ = nullptr;  // the emulator's Databricks API, with the token
  HttpTestClient* oai_ = nullptr;  // its OpenAI API (root), with the app key
  json last_;
};

// a. An inline-template worker: its Sandbox is created, the session too, the executor launched
//    in the sandbox connects → Ready with ExecutorConnected=True. `sbxctl logs` prints the
//    executor's log (a wrapper around codex writes a recognisable first line), `--tail`, `-f`
//    sees appended bytes exactly once, and a worker whose sandbox is stopped gets one clear
//    error line.
TEST_F(AgentWorkerTest, InlineWorkerBecomesReadyAndLogsShowsTheExecutorLog) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WrappedWorker("alpha")));
  ASSERT_TRUE(WaitReady("alpha")) << last_.dump(2);
  const std::string env_id = S(last_, "environmentId");
  EXPECT_FALSE(S(last_, "sessionId").empty());
  EXPECT_EQ(S(last_, "environmentStatus"), "connected");
  EXPECT_EQ(ConditionOf(last_, "SandboxReady").first, "True");
  EXPECT_TRUE(ProcessAlive(Pid(last_)));
  // The owned Sandbox and the Databricks sandbox behind it.
  const json sandbox = Get("sandbox", "alpha");
  ASSERT_TRUE(sandbox.is_object());
  EXPECT_EQ(sandbox["status"].value("state", ""), "RUNNING");
  EXPECT_EQ(dbx_->Get("/api/2.0/sandboxes/default-alpha").status, 200);
  EXPECT_THAT(Events("agentworker/alpha"), HasSubstr("ExecutorLaunched"));

  const std::string first_line = "codex-wrap: starting codex exec-server for " + env_id;
  RunResult logs = Sbxctl({"logs", "agentworker/alpha"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr(first_line));
  // --tail 1 of a log with two more lines → only the last one.
  RunResult append =
      Sbxctl({"exec", "sandbox/alpha", "--", "/bin/bash", "-c",
              "printf 'line-two\\nline-three\\n' >> /home/sandbox-agent/.sbx/alpha/log"});
  ASSERT_EQ(append.exit_code, 0) << append.err;
  logs = Sbxctl({"logs", "alpha", "--tail", "1"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "line-three\n");

  // -f: the whole log once, then only what is appended.
  auto follow = Process::Start(
      SBXCTL_PATH, Options("logs-f", {"--db", db_.string(), "logs", "agentworker/alpha", "-f"}));
  ASSERT_TRUE(follow.ok()) << follow.status();
  ASSERT_TRUE((*follow)->WaitForLine(std::regex("^line-three$"), In(kConverge)))
      << (*follow)->Stderr();
  append = Sbxctl({"exec", "sandbox/alpha", "--", "/bin/bash", "-c",
                   "echo appended-while-following >> /home/sandbox-agent/.sbx/alpha/log"});
  ASSERT_EQ(append.exit_code, 0) << append.err;
  ASSERT_TRUE((*follow)->WaitForLine(std::regex("^appended-while-following$"), In(kConverge)))
      << (*follow)->Stdout() << (*follow)->Stderr();
  (*follow)->Signal(SIGINT);
  EXPECT_EQ((*follow)->Wait(In(milliseconds(10'000))), 0);
  const std::string followed = (*follow)->Stdout();
  EXPECT_EQ(Count(followed, first_line), 1) << followed;
  EXPECT_EQ(Count(followed, "line-three"), 1) << followed;
  EXPECT_EQ(Count(followed, "appended-while-following"), 1) << followed;

  // A worker whose sandbox is kept stopped: one clear error line, exit 1.
  ASSERT_NO_FATAL_FAILURE(
      ApplyYaml("parked",
                "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: parked\n"
                "spec:\n  power: Stopped\n---\napiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\n"
                "metadata:\n  name: idle\nspec:\n  sandboxRef: parked\n  agent:\n"
                "    model: gpt-5-codex\n"));
  ASSERT_TRUE(PollUntil(
      [&] {
        const json s = Get("sandbox", "parked");
        return s.is_object() && S(s, "state") == "STOPPED";
      },
      In(kConverge)));
  logs = Sbxctl({"logs", "agentworker/idle"});
  EXPECT_EQ(logs.exit_code, 1);
  EXPECT_THAT(logs.err, HasSubstr("sandbox parked of agentworker/idle is not running"));
  EXPECT_EQ(Count(logs.err, "\n"), 1) << logs.err;
  logs = Sbxctl({"logs", "sandbox/parked"});
  EXPECT_EQ(logs.exit_code, 1);
  EXPECT_THAT(logs.err, HasSubstr("not an agentworker"));
}

// b. The sandbox stopped behind the controller's back (like an idle auto-stop, which kills every
//    process in it): the Sandbox reconciler starts it again, the worker sees the new boot and
//    relaunches the executor, which connects again.
TEST_F(AgentWorkerTest, RelaunchesTheExecutorAfterTheSandboxWasStoppedAndStarted) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"beta", "", {}}));
  ASSERT_TRUE(WaitReady("beta")) << last_.dump(2);
  const int64_t old_pid = Pid(last_);
  const int restarts = Restarts(last_);
  const json sandbox = Get("sandbox", "beta");
  const std::string old_boot = S(sandbox, "bootId");
  ASSERT_FALSE(old_boot.empty());

  HttpResult stop = dbx_->Post("/_emulator/sandboxes/default-beta/stop");
  ASSERT_EQ(stop.status, 200) << stop.body;
  ASSERT_TRUE(PollUntil([&] { return !ProcessAlive(old_pid); }, In(kConverge)));
  ASSERT_TRUE(WaitWorker("beta", [&](const json& w) {
    return Ready(w) && Restarts(w) > restarts && Pid(w) != old_pid;
  })) << last_.dump(2);
  EXPECT_NE(S(Get("sandbox", "beta"), "bootId"), old_boot);
  EXPECT_TRUE(ProcessAlive(Pid(last_)));
  const std::string events = Events("agentworker/beta");
  EXPECT_GE(Count(events, "ExecutorLaunched"), 1);
  EXPECT_THAT(events, Not(HasSubstr("ExecutorExitedOnStart")));
}

// c. The executor killed inside a running sandbox: the periodic probe finds it dead and the
//    executor is relaunched at once (it ran fine before: no crash-loop delay) and reconnects.
//    `sbxctl logs -f` follows into the relaunch's new log (log → log.1), although it is exactly
//    as long as the old one: the new file is noticed by its inode, not by its size.
TEST_F(AgentWorkerTest, RelaunchesAKilledExecutor) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WrappedWorker("gamma")));
  ASSERT_TRUE(WaitReady("gamma")) << last_.dump(2);
  const int64_t old_pid = Pid(last_);
  const int restarts = Restarts(last_);
  const std::string first_line =
      "codex-wrap: starting codex exec-server for " + S(last_, "environmentId");
  auto follow = Process::Start(
      SBXCTL_PATH, Options("logs-f", {"--db", db_.string(), "logs", "agentworker/gamma", "-f"}));
  ASSERT_TRUE(follow.ok()) << follow.status();
  ASSERT_TRUE((*follow)->WaitForLine(std::regex("^codex-wrap: "), In(kConverge)))
      << (*follow)->Stderr();

  ASSERT_EQ(::kill(static_cast<pid_t>(old_pid), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitWorker("gamma", [&](const json& w) {
    return Ready(w) && Restarts(w) > restarts && Pid(w) != old_pid;
  })) << last_.dump(2);
  const auto recovered_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed_at)
          .count();
  std::cerr << "executor killed → relaunched and connected in " << recovered_ms << " ms\n";
  EXPECT_TRUE(ProcessAlive(Pid(last_)));
  EXPECT_EQ(ExitReason(last_), "ExecutorExited");
  // A probe racing the relaunch must not mistake it for an exit on start.
  EXPECT_THAT(Events("agentworker/gamma"), Not(HasSubstr("ExecutorExitedOnStart")));
  // The same line again, from the relaunch's log.
  EXPECT_TRUE(PollUntil([&] { return Count((*follow)->Stdout(), first_line) == 2; }, In(kConverge),
                        milliseconds(200)))
      << (*follow)->Stdout() << (*follow)->Stderr();
  (*follow)->Signal(SIGINT);
  EXPECT_EQ((*follow)->Wait(In(milliseconds(10'000))), 0);

  // sbxd counts the exit and the relaunch (what an alert on crash loops reads).
  const int port = SbxdHarness::MetricsPort(*sbxd_, kConverge);
  ASSERT_GT(port, 0);
  const std::string text =
      HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
  EXPECT_THAT(text, HasSubstr("\nsbx_executor_exits_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\nsbx_executor_relaunches_total 1\n"));
}

// d. Registration refused with 403 missing scope: Ready=False/MissingScope, and the executor is
//    not relaunched in a hot loop (auth failures back off for minutes).
TEST_F(AgentWorkerTest, MissingScopeIsReportedWithoutAHotLoop) {
  ASSERT_NO_FATAL_FAILURE(StartAll({"--registration-failure", "scope"}));
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"delta", "", {}}));
  ASSERT_TRUE(WaitWorker("delta", [](const json& w) {
    return ConditionOf(w, "Ready") == std::pair<std::string, std::string>{"False", "MissingScope"};
  })) << last_.dump(2);
  EXPECT_EQ(ConditionOf(last_, "ExecutorRunning").second, "MissingScope");
  EXPECT_EQ(ExitReason(last_), "MissingScope");
  const std::string env_id = S(last_, "environmentId");
  ASSERT_FALSE(env_id.empty());
  EXPECT_GE(RegistrationAttempts(env_id), 1);
  // ~10 s of sbxd running (5 status/probe periods): the attempts must stay ≤ 2.
  const bool hot = PollUntil([&] { return RegistrationAttempts(env_id) > 2; },
                             In(milliseconds(10'000)), milliseconds(500));
  EXPECT_FALSE(hot) << "registration attempts: " << RegistrationAttempts(env_id);
  EXPECT_TRUE(sbxd_->Running());
  EXPECT_EQ(ConditionOf(Get("agentworker", "delta"), "Ready").second, "MissingScope");
}

// d2. The OpenAI organisation's IP allowlist (the seed's troubleshooting row): the sandbox's
//     egress address is not listed, so the executor is refused with 401 "IP is not authorized"
//     and the worker says IPNotAuthorized (without a hot loop). The next start of the sandbox
//     brings an allowed address; sbx re-checks after the restart and the worker becomes Ready.
//     The allowlist saw the sandbox's egress address, found from the registering process.
TEST_F(AgentWorkerTest, IpNotAuthorizedClearsAfterARestartBringsAnAllowedEgressAddress) {
  ASSERT_NO_FATAL_FAILURE(StartAll({"--ip-allowlist", "203.0.113.0/24"}));
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"iota", "", {}}));
  ASSERT_TRUE(WaitWorker("iota", [](const json& w) {
    return ConditionOf(w, "Ready") ==
           std::pair<std::string, std::string>{"False", "IPNotAuthorized"};
  })) << last_.dump(2);
  EXPECT_EQ(ExitReason(last_), "IPNotAuthorized");
  const std::string env_id = S(last_, "environmentId");
  const json sandbox = json::parse(dbx_->Get("/_emulator/sandboxes/default-iota").body);
  const json allowlist = json::parse(oai_->Get("/_emulator/openai/ip_allowlist").body);
  EXPECT_EQ(allowlist["last_registration_addresses"][env_id], sandbox["egress_ip"])
      << allowlist.dump() << sandbox.dump();
  const int64_t attempts = RegistrationAttempts(env_id);
  EXPECT_FALSE(PollUntil([&] { return RegistrationAttempts(env_id) > attempts + 1; },
                         In(milliseconds(6'000)), milliseconds(500)))
      << "hot loop: " << RegistrationAttempts(env_id);

  // The next boot gets an allowed address; the sandbox stops behind sbx's back.
  ASSERT_EQ(
      dbx_->Post("/_emulator/sandboxes/default-iota/egress", R"({"next_boot_ip":"203.0.113.5"})")
          .status,
      200);
  ASSERT_EQ(dbx_->Post("/_emulator/sandboxes/default-iota/stop").status, 200);
  ASSERT_TRUE(WaitReady("iota")) << last_.dump(2);
  EXPECT_EQ(
      json::parse(
          oai_->Get("/_emulator/openai/ip_allowlist").body)["last_registration_addresses"][env_id],
      "203.0.113.5");
}

// e. The session expires: a new session (new environment) is created and the executor is
//    relaunched for it; Ready again.
TEST_F(AgentWorkerTest, ReplacesAnExpiredSessionAndRelaunchesTheExecutor) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"eps", "", {}}));
  ASSERT_TRUE(WaitReady("eps")) << last_.dump(2);
  const std::string old_session = S(last_, "sessionId");
  const std::string old_env = S(last_, "environmentId");
  const int64_t old_pid = Pid(last_);

  HttpResult expire = oai_->Post("/_emulator/openai/sessions/" + old_session + "/expire");
  ASSERT_EQ(expire.status, 200) << expire.body;
  ASSERT_TRUE(WaitWorker("eps", [&](const json& w) {
    return Ready(w) && !S(w, "sessionId").empty() && S(w, "sessionId") != old_session;
  })) << last_.dump(2);
  EXPECT_NE(S(last_, "environmentId"), old_env);
  EXPECT_NE(Pid(last_), old_pid);
  EXPECT_TRUE(ProcessAlive(Pid(last_)));
  // The old environment's executor was stopped.
  EXPECT_TRUE(PollUntil([&] { return !ProcessAlive(old_pid); }, In(kConverge)));
  HttpResult env = oai_->Get("/v1/agents/environments/" + S(last_, "environmentId"));
  ASSERT_EQ(env.status, 200) << env.body;
  EXPECT_EQ(json::parse(env.body).value("status", ""), "connected");
  const std::string events = Events("agentworker/eps");
  EXPECT_THAT(events, HasSubstr("SessionLost"));
  EXPECT_GE(Count(events, "SessionCreated"), 2) << events;
  EXPECT_THAT(events, Not(HasSubstr("ExecutorExitedOnStart")));
}

// f. Deleting the worker deletes its session, stops its executor, deletes its owned Sandbox
//    object and (through the Sandbox's own finalizer) the Databricks sandbox.
TEST_F(AgentWorkerTest, DeleteCleansUpSessionExecutorAndOwnedSandbox) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"zeta", "", {}}));
  ASSERT_TRUE(WaitReady("zeta")) << last_.dump(2);
  const std::string session = S(last_, "sessionId");
  const int64_t pid = Pid(last_);
  ASSERT_EQ(oai_->Get("/v1/agents/sessions/" + session).status, 200);
  // The worker does some work (a session that never ran a turn cannot be deleted: see the last
  // test).
  ASSERT_NO_FATAL_FAILURE(RunTurn(session, "$ true"));

  RunResult del = Sbxctl({"delete", "agentworker/zeta", "--wait"});
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_FALSE(Get("agentworker", "zeta").is_object());
  EXPECT_EQ(oai_->Get("/v1/agents/sessions/" + session).status, 404);
  EXPECT_TRUE(PollUntil([&] { return !ProcessAlive(pid); }, In(kConverge)));
  ASSERT_TRUE(PollUntil([&] { return !Get("sandbox", "zeta").is_object(); }, In(kConverge)))
      << Get("sandbox", "zeta").dump(2);
  EXPECT_TRUE(PollUntil([&] { return dbx_->Get("/api/2.0/sandboxes/default-zeta").status == 404; },
                        In(kConverge)));
}

// g. Secrets: with recognisable keys, a worker runs to Ready under `--log-level debug`; none of
//    the three keys appears in the database (and its WAL), in sbxd's output, or in any argv of
//    the exec-sync calls the emulator recorded. (The executor key is in the sandbox process's
//    environment by design; the exec log records env NAMES only.)
TEST_F(AgentWorkerTest, SecretsStayOutOfTheDatabaseLogsAndArgv) {
  ASSERT_NO_FATAL_FAILURE(StartAll({}, {"--log-level", "debug"}));
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"eta", "", {}}));
  ASSERT_TRUE(WaitReady("eta")) << last_.dump(2);
  RunResult logs = Sbxctl({"logs", "agentworker/eta"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;

  HttpResult exec_log = dbx_->Get("/_emulator/exec_log");
  ASSERT_EQ(exec_log.status, 200) << exec_log.body;
  // The launch is in it (so the search below looks at the right thing) with the key's NAME.
  EXPECT_THAT(exec_log.body, HasSubstr("CODEX_API_KEY"));
  EXPECT_THAT(exec_log.body, HasSubstr("sbx-launch"));
  const std::string sbxd_out = sbxd_->Stdout() + sbxd_->Stderr();
  EXPECT_THAT(sbxd_out, HasSubstr("DEBUG")) << "is sbxd logging at debug?";

  std::map<std::string, std::string> places = {{"sbxd output", sbxd_out},
                                               {"exec_log", exec_log.body}};
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const fs::path p = db_.string() + suffix;
    if (fs::exists(p)) {
      places["database file " + p.filename().string()] = ReadFile(p);
    }
  }
  ASSERT_GT(places["database file sbx.db"].size() + places["database file sbx.db-wal"].size(), 0u);
  for (const auto& [place, content] : places) {
    for (const std::string& secret : {executor_key_, app_key_, token_}) {
      EXPECT_EQ(content.find(secret), std::string::npos) << secret << " found in " << place;
      // Not even the recognisable stem.
      EXPECT_EQ(content.find(secret.substr(0, secret.size() - 3)), std::string::npos)
          << "a prefix of " << secret << " found in " << place;
    }
  }
}

// An executor that prints its own key (CODEX_API_KEY) and dies a little later, so that the key
// reaches the worker's status through a later probe of the dead executor, not through the
// launch: no status, event, table row or `sbxctl` output may show it (SECURITY.md). Before the
// central scrub only the launch path was scrubbed, with a key known only inside Launch.
TEST_F(AgentWorkerTest, AnExecutorThatPrintsItsKeyLeavesItInNoStatusEventOrTable) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  WorkerManifest m{"theta", "/home/sandbox-agent/bin/leaky", {}};
  m.extra_setup.push_back(
      "mkdir -p /home/sandbox-agent/bin && printf '%s\\n' '#!/bin/bash' "
      "'echo \"leaky: my key is $CODEX_API_KEY\"' 'sleep 4' 'exit 3' "
      "> /home/sandbox-agent/bin/leaky && chmod +x /home/sandbox-agent/bin/leaky");
  ASSERT_NO_FATAL_FAILURE(Apply(m));
  // The log line reached the status (so the checks below look at the right thing), scrubbed.
  ASSERT_TRUE(WaitWorker("theta", [](const json& w) {
    return w.dump().find("leaky: my key is [REDACTED]") != std::string::npos;
  })) << last_.dump(2);

  std::map<std::string, std::string> places = {
      {"get -o yaml", Sbxctl({"get", "agentworker", "theta", "-o", "yaml"}).out},
      {"get -o wide", Sbxctl({"get", "agentworker", "-o", "wide"}).out},
      {"describe", Sbxctl({"describe", "agentworker", "theta"}).out},
      {"events", Events("agentworker/theta")},
      {"sbxd output", sbxd_->Stdout() + sbxd_->Stderr()}};
  for (const char* suffix : {"", "-wal"}) {
    const fs::path p = db_.string() + suffix;
    if (fs::exists(p)) {
      places["database file " + p.filename().string()] = ReadFile(p);
    }
  }
  for (const auto& [place, content] : places) {
    EXPECT_EQ(content.find(executor_key_), std::string::npos) << "executor key found in " << place;
  }
}

// Issue #12, item 7. The real service refuses to delete a self-hosted session whose first turn
// never ran (409 "session has no durably bound CCA root", reference §1.6; the emulator's
// --strict-session-delete, on by default). Deleting a worker that never got a task still
// completes: the object is gone, the session is recorded as abandoned (`sbxctl get abandoned`)
// with a Warning SessionNotDeletable naming it, and nothing retries it afterwards.
TEST_F(AgentWorkerTest, DeletingAWorkerThatNeverRanATurnCompletesAndRecordsTheSessionAbandoned) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Apply(WorkerManifest{"idle", "", {}}));
  ASSERT_TRUE(WaitReady("idle")) << last_.dump(2);
  const std::string session = S(last_, "sessionId");
  ASSERT_FALSE(session.empty());

  RunResult del = Sbxctl({"delete", "agentworker/idle", "--wait", "--timeout", "60s"});
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
  EXPECT_FALSE(Get("agentworker", "idle").is_object());
  // The service still has it: it refused every delete.
  EXPECT_EQ(oai_->Get("/v1/agents/sessions/" + session).status, 200);

  RunResult abandoned = Sbxctl({"get", "abandoned", "-o", "json"});
  ASSERT_EQ(abandoned.exit_code, 0) << abandoned.err;
  const json list = json::parse(abandoned.out, nullptr, false);
  ASSERT_TRUE(list.is_object() && list.contains("items")) << abandoned.out;
  ASSERT_EQ(list["items"].size(), 1u) << abandoned.out;
  EXPECT_EQ(list["items"][0].value("externalId", ""), session);
  EXPECT_EQ(list["items"][0].value("resourceType", ""), "session");
  EXPECT_EQ(list["items"][0].value("state", ""), "Abandoned");
  EXPECT_EQ(list["items"][0]["owner"].value("name", ""), "idle");
  RunResult table = Sbxctl({"get", "abandoned"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(session));

  RunResult events = Sbxctl({"events"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  EXPECT_THAT(events.out, HasSubstr("SessionNotDeletable"));
  EXPECT_THAT(events.out, HasSubstr(session));

  // Nothing loops on it: the delete counter stays put while sweeps and GC passes go by.
  auto deletes = [&] {
    const json c = json::parse(oai_->Get("/_emulator/counters").body, nullptr, false);
    return c.is_object() ? c.value("openai.sessions.delete", int64_t{0}) : int64_t{-1};
  };
  const int64_t after = deletes();
  EXPECT_GE(after, 2);
  EXPECT_LE(after, 10);
  // The owned sandbox goes as usual.
  ASSERT_TRUE(PollUntil([&] { return !Get("sandbox", "idle").is_object(); }, In(kConverge)))
      << Get("sandbox", "idle").dump(2);
  EXPECT_EQ(deletes(), after);
}

}  // namespace
