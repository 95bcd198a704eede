#include "controller/reconcilers/agent_worker_reconciler.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/codec.h"
#include "controller/base/inline_wait.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/fake_clock.h"
#include "tests/support/script_sandbox.h"

extern char** environ;

namespace sbx::controller {
namespace {

namespace fs = std::filesystem;
using api::ConditionStatus;
using namespace std::chrono_literals;

using testing::Alive;
using testing::ScriptSandbox;
using testing::Slurp;

class AgentWorkerReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sandbox_ = std::make_unique<ScriptSandbox>("sbx-aw-test-", "boot-1");
    sandbox_->SetCodex("echo \"codex $*\"; exec sleep 300");
    workspace_dir_ = (sandbox_->home() / "workspace").string();
    fs::create_directories(workspace_dir_);

    store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
    AgentWorkerReconcilerOptions options;
    options.boot_marker = sandbox_->boot_marker();
    reconciler_ =
        std::make_unique<AgentWorkerReconciler>(*store_, clouds_, clock_, &deps_, options);
    clouds_.api().SetExecHandler([this](const std::string&, const databricks::ExecRequest& req) {
      return sandbox_->Run(req);
    });
  }
  void TearDown() override { sandbox_.reset(); }

  // A Sandbox object that the (not running) Sandbox reconciler would have made Ready.
  void MakeSandbox(const std::string& name, bool ready, const std::string& boot = "boot-1") {
    api::Object sb = api::MakeObject(api::Kind::kSandbox, name);
    sb.sandbox_spec().sandbox_id = "default-" + name;
    auto applied = store_->Apply({sb}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
    api::Object stored = applied->at(0).object;
    stored.sandbox_status().boot_id = boot;
    stored.sandbox_status().state = "RUNNING";
    stored.sandbox_status().sandbox_name = "sandboxes/default-" + name;  // created by sbx
    stored.sandbox_status().workspace_ref = "default";
    api::SetCondition(stored.sandbox_status().conditions,
                      {"Ready", ready ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                       ready ? "Running" : "Pending", "", "", stored.metadata.generation},
                      "t");
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
    databricks::Sandbox live;
    live.sandbox_id = "default-" + name;
    live.state = databricks::SandboxState::kRunning;
    clouds_.api().Put(live);
  }
  void ApplyWorker(std::function<void(api::AgentWorkerSpec&)> edit = {}) {
    api::Object w = api::MakeObject(api::Kind::kAgentWorker, "w");
    w.agent_worker_spec().sandbox_ref = "box";
    w.agent_worker_spec().agent.model = "gpt-5";
    w.agent_worker_spec().workspace_directory = workspace_dir_;
    if (edit) {
      edit(w.agent_worker_spec());
    }
    ASSERT_TRUE(store_->Apply({w}, {}).ok());
  }
  api::StatusOr<ReconcileResult> Reconcile(const std::string& name = "w") {
    return reconciler_->Reconcile({api::Kind::kAgentWorker, "default", name}, {});
  }
  api::Object Worker(const std::string& name = "w") {
    return *store_->Get({api::Kind::kAgentWorker, "default", name});
  }
  api::Condition Cond(const std::string& type, const std::string& name = "w") {
    api::Object w = Worker(name);
    const api::Condition* c = api::FindCondition(w.conditions(), type);
    return c != nullptr ? *c : api::Condition{};
  }
  int Launches() {
    int n = 0;
    for (const auto& e : clouds_.api().execs()) {
      n += e.args.size() > 2 && e.args[2] == "sbx-launch";
    }
    return n;
  }
  bool HasEvent(const std::string& reason) {
    // A named copy: a range-for over *StatusOr-temporary would dangle.
    const std::vector<Store::Event> events = *store_->ListEvents(std::nullopt);
    for (const auto& e : events) {
      if (e.reason == reason) {
        return true;
      }
    }
    return false;
  }
  // Worker "w" on Sandbox "box": launched, alive, and seen Running by a probe after the connect
  // grace.
  void StartRunningWorker() {
    MakeSandbox("box", true);
    ApplyWorker();
    ASSERT_TRUE(Reconcile().ok());
    WaitForExecutor();
    ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
    ASSERT_EQ(Cond("ExecutorRunning").status, ConditionStatus::kTrue);
  }
  // Reconciles until the executor of `name` is alive (the launch is asynchronous: setsid).
  // A connected, Ready worker "w" on a running "box" (`edit` changes its spec first). Wrap in
  // ASSERT_NO_FATAL_FAILURE.
  void BringUpConnected(std::function<void(api::AgentWorkerSpec&)> edit = {}) {
    MakeSandbox("box", true);
    ApplyWorker(std::move(edit));
    ASSERT_TRUE(Reconcile().ok());
    WaitForExecutor();
    clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kConnected);
    clock_.Advance(1s);
    ASSERT_TRUE(Reconcile().ok());
    ASSERT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  }
  void WaitForExecutor(const std::string& name = "w") {
    for (int i = 0; i < 500 && !sandbox_->ExecutorAlive(name); ++i) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(sandbox_->ExecutorAlive(name));
  }
  // Polls until the executor of `name` has exited (or 5 s pass).
  void WaitForExit(const std::string& name = "w") {
    const int pid = sandbox_->ExecutorPid(name);
    for (int i = 0; i < 500 && Alive(pid); ++i) {
      waitpid(pid, nullptr, WNOHANG);
      std::this_thread::sleep_for(10ms);
    }
  }
  std::string EnvironmentId() { return Worker().agent_worker_status().environment_id; }
  std::optional<Store::InventoryRecord> SessionRow(const std::string& session) {
    const std::vector<Store::InventoryRecord> rows = *store_->ListInventory(std::nullopt);
    for (const Store::InventoryRecord& r : rows) {
      if (r.resource_type == "session" && r.external_id == session) {
        return r;
      }
    }
    return std::nullopt;
  }
  // Reconciles once the executor had its time to connect (then a probe looks inside).
  api::StatusOr<ReconcileResult> ReconcileAfterConnectGrace(const std::string& name = "w") {
    clock_.Advance(ExecutorScheduleOptions{}.connect_grace + 1s);
    return Reconcile(name);
  }

  std::string workspace_dir_;
  std::unique_ptr<ScriptSandbox> sandbox_;
  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  DependencyIndex deps_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<AgentWorkerReconciler> reconciler_;
};

TEST_F(AgentWorkerReconcilerTest, WaitsForItsSandboxToBeReady) {
  MakeSandbox("box", /*ready=*/false);
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("SandboxReady").reason, "SandboxNotReady");
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(clouds_.agents().Calls("create"), 0);
  EXPECT_EQ(deps_.DependentsOf({api::Kind::kSandbox, "default", "box"}).size(), 1u);
  // The box is RUNNING but not Ready (e.g. setup failing): nothing is said about the executor.
  EXPECT_EQ(Cond("ExecutorRunning").type, "");
}

// Issue #30: on a Manager worker (a reconcile whose pacing waits may go back to the work queue)
// the new session is stored and the pass ends; the launch is the next pass's first paced call,
// made without looking the session it just created up again.
TEST_F(AgentWorkerReconcilerTest, OnAManagerWorkerTheLaunchIsTheNextPassesFirstCall) {
  MakeSandbox("box", true);
  ApplyWorker();
  {
    const ScopedInlineWaitLimit worker(0ms, "AgentWorker/default/w");
    auto r = Reconcile();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->action, ReconcileResult::Action::kRequeueAfter);
    EXPECT_EQ(r->after, 0ms) << "at once";
    EXPECT_EQ(clouds_.agents().SessionCount(), 1);
    EXPECT_EQ(Launches(), 0) << "not in the session's pass";
    EXPECT_FALSE(Worker().agent_worker_status().session_id.empty()) << "stored first";
  }
  const int session_gets = clouds_.agents().Calls("get");
  {
    const ScopedInlineWaitLimit worker(0ms, "AgentWorker/default/w");
    ASSERT_TRUE(Reconcile().ok());
  }
  EXPECT_EQ(Launches(), 1);
  EXPECT_EQ(clouds_.agents().Calls("get"), session_gets) << "its own new session is not looked up";
  EXPECT_EQ(clouds_.agents().SessionCount(), 1);
  WaitForExecutor();
}

TEST_F(AgentWorkerReconcilerTest, CreatesSessionLaunchesExecutorAndBecomesReadyWhenConnected) {
  MakeSandbox("box", true);
  ApplyWorker();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(clouds_.agents().SessionCount(), 1);
  EXPECT_EQ(Launches(), 1);
  EXPECT_EQ(Cond("ExecutorRunning").reason, "Launching");
  WaitForExecutor();
  // The fake codex echoes its argv once it runs (after the pidfile is written): poll for it.
  const std::string expected =
      "codex exec-server --remote http://127.0.0.1:9/v1 --environment-id " + EnvironmentId();
  std::string log;
  for (int i = 0; i < 500 && log.find(expected) == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
    log = Slurp(sandbox_->executor_dir("w") / "log");
  }
  EXPECT_NE(log.find(expected), std::string::npos) << log;

  // Not connected yet: within the connect grace only the (cheap) environment is polled.
  auto polled = Reconcile();
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(polled->after, 250ms);  // verify_first after its own launch
  EXPECT_EQ(clouds_.api().execs().size(), 1u);
  EXPECT_EQ(Cond("ExecutorRunning").reason, "Launching");

  // Still not connected after the grace: the probe looks inside the sandbox.
  ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
  EXPECT_EQ(clouds_.api().execs().size(), 2u);
  EXPECT_EQ(Cond("ExecutorRunning").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("ExecutorConnected").reason, "Pending");
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);

  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kConnected);
  // Woken early (say by our own status write): no call before the connect poll is due.
  const int env_gets = clouds_.agents().Calls("environment");
  r = Reconcile();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(clouds_.agents().Calls("environment"), env_gets);
  EXPECT_EQ(Cond("ExecutorConnected").reason, "Pending");
  clock_.Advance(r->after);
  r = Reconcile();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(clouds_.agents().Calls("environment"), env_gets + 1);
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(r->after, 30s);  // the cheap status cadence
  EXPECT_EQ(Worker().agent_worker_status().environment_status, "connected");

  // Steady state: no more launches, no more probes until the probe interval.
  const size_t execs = clouds_.api().execs().size();
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.api().execs().size(), execs);
  EXPECT_EQ(Launches(), 1);
}

TEST_F(AgentWorkerReconcilerTest, ExecutorKeyTravelsOnlyInEnvs) {
  MakeSandbox("box", true);
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  const auto execs = clouds_.api().execs();
  bool launched_with_key = false;
  for (const auto& e : execs) {
    for (const std::string& a : e.args) {
      EXPECT_EQ(a.find("sk-executor-test"), std::string::npos) << a;
    }
    auto key = e.envs.find("CODEX_API_KEY");
    launched_with_key |= key != e.envs.end() && key->second == "sk-executor-test";
  }
  EXPECT_TRUE(launched_with_key);
  const std::string status = api::EncodeStatusJson(Worker());
  EXPECT_EQ(status.find("sk-executor-test"), std::string::npos);
}

TEST_F(AgentWorkerReconcilerTest, MissingScopeIsDiagnosedAndBacksOffInsteadOfHotLooping) {
  sandbox_->SetCodex(
      "echo 'Error: environment registry authentication error: environment registry "
      "authentication failed (403 Forbidden): Missing required scope "
      "api.agents.environments.connect' >&2; exit 1");
  MakeSandbox("box", true);
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_EQ(Launches(), 1);
  WaitForExit();
  auto r = ReconcileAfterConnectGrace();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Cond("ExecutorRunning").reason, "MissingScope");
  EXPECT_EQ(Cond("Ready").reason, "MissingScope");
  EXPECT_NE(Cond("Ready").message.find("api.agents.environments.connect"), std::string::npos);
  EXPECT_EQ(Worker().agent_worker_status().executor.last_exit_reason, "MissingScope");
  EXPECT_TRUE(HasEvent("MissingScope"));
  EXPECT_GE(r->after, 9min);

  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Reconcile().ok());
  }
  EXPECT_EQ(Launches(), 1);  // no hot loop
  clock_.Advance(11min);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_EQ(Worker().agent_worker_status().executor.restarts, 1);
}

TEST_F(AgentWorkerReconcilerTest, DiagnosesTheCommonExecutorFailures) {
  EXPECT_EQ(DiagnoseExecutorLog("Error: environment registry authentication error: environment "
                                "registry authentication failed (401 Unauthorized): IP is not "
                                "authorized"),
            "IPNotAuthorized");
  EXPECT_EQ(DiagnoseExecutorLog("… (403 Forbidden): missing required scope "
                                "api.agents.environments.connect"),
            "MissingScope");
  EXPECT_EQ(DiagnoseExecutorLog("bash: line 1: codex: command not found"), "ExecutorNotFound");
  EXPECT_EQ(DiagnoseExecutorLog("sbx: workspace directory /w does not exist"),
            "WorkspaceDirectoryMissing");
  EXPECT_EQ(DiagnoseExecutorLog("Error: remote exec-server registration requires ChatGPT "
                                "authentication or API key authentication; run `codex login` "
                                "or set CODEX_API_KEY"),
            "MissingExecutorKey");
  EXPECT_EQ(DiagnoseExecutorLog("panicked at something"), "");
}

TEST_F(AgentWorkerReconcilerTest, RelaunchesAfterTheSandboxBootedAgain) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());

  // A stop kills every process and wipes /tmp; the start is a new boot.
  sandbox_->KillExecutor();
  sandbox_->SetBoot("boot-2");
  api::Object sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_status().boot_id = "boot-2";
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());

  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_EQ(Worker().agent_worker_status().executor.restarts, 1);
  WaitForExecutor();
  EXPECT_EQ(Slurp(sandbox_->executor_dir("w") / "boot"), "boot-2\n");
}

// An executor a probe saw running that dies later (killed, crashed after hours) did not "exit
// on start": it is relaunched at the next probe, without the crash-loop delay.
TEST_F(AgentWorkerReconcilerTest, AnExecutorThatRanAndDiedIsRelaunchedAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());

  const int pid = sandbox_->ExecutorPid("w");
  sandbox_->KillExecutor();
  WaitForExit();
  ASSERT_FALSE(Alive(pid));
  clock_.Advance(6min);  // the next periodic probe
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_EQ(Worker().agent_worker_status().executor.last_exit_reason, "ExecutorExited");
  EXPECT_EQ(Worker().agent_worker_status().executor.restarts, 1);
  EXPECT_TRUE(HasEvent("ExecutorExited"));
  WaitForExecutor();
}

TEST_F(AgentWorkerReconcilerTest, AnExpiredSessionIsReplacedAndTheExecutorFollows) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  const std::string first_env = EnvironmentId();
  const std::string first_session = Worker().agent_worker_status().session_id;
  const int first_pid = sandbox_->ExecutorPid("w");
  clouds_.agents().StartTurn(first_session);  // it did some work: deletable
  clouds_.agents().FinishTurn(first_session);
  clouds_.agents().SetEnvironmentStatus(first_env, openai::EnvironmentStatus::kExpired);
  clock_.Advance(30s);  // the next look at the environment
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_TRUE(HasEvent("SessionLost"));
  EXPECT_FALSE(clouds_.agents().HasSession(first_session));  // replaced, not left behind
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("create"), 2);
  EXPECT_NE(EnvironmentId(), first_env);
  EXPECT_EQ(Launches(), 2);
  WaitForExecutor();
  EXPECT_NE(sandbox_->ExecutorPid("w"), first_pid);
  for (int i = 0; i < 500 && Alive(first_pid); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(Alive(first_pid));  // the old session's executor was stopped
}

TEST_F(AgentWorkerReconcilerTest, AStoppedSandboxMeansNoExecutor) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  api::Object sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_status().state = "STOPPED";
  api::SetCondition(sb.sandbox_status().conditions,
                    {"Ready", ConditionStatus::kFalse, "Starting", "", "", sb.metadata.generation},
                    "t2");
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("ExecutorRunning").reason, "SandboxNotRunning");
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kUnknown);
  EXPECT_EQ(Worker().agent_worker_status().executor.pid, 0);
}

// A Sandbox stopped on purpose (spec.power Stopped) reports Ready=True/Stopped; a worker on it
// used to create a session and exec-sync into the STOPPED sandbox, ending at InvalidSpec. Now it
// says SandboxStopped, calls nothing, and comes back by itself when the power changes.
TEST_F(AgentWorkerReconcilerTest, AWorkerOnAStoppedSandboxWaitsWithoutCalls) {
  MakeSandbox("box", true);
  api::Object sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_spec().power = api::Power::kStopped;
  ASSERT_TRUE(store_->Apply({sb}, {}).ok());
  sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_status().state = "STOPPED";
  api::SetCondition(sb.sandbox_status().conditions,
                    {"Ready", ConditionStatus::kTrue, "Stopped", "", "", sb.metadata.generation},
                    "t2");
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());
  ApplyWorker();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cond("Ready").reason, "SandboxStopped");
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("ExecutorRunning").reason, "SandboxStopped");
  EXPECT_EQ(clouds_.agents().Calls("create"), 0);
  EXPECT_TRUE(clouds_.api().execs().empty());
  // The dependency index brings it back when the Sandbox changes.
  EXPECT_EQ(deps_.DependentsOf({api::Kind::kSandbox, "default", "box"}).size(), 1u);

  sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_spec().power = api::Power::kRunning;
  ASSERT_TRUE(store_->Apply({sb}, {}).ok());
  sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  sb.sandbox_status().state = "RUNNING";
  sb.sandbox_status().sandbox_name = "sandboxes/" + sb.sandbox_spec().sandbox_id;
  sb.sandbox_status().workspace_ref = "default";
  api::SetCondition(sb.sandbox_status().conditions,
                    {"Ready", ConditionStatus::kTrue, "Running", "", "", sb.metadata.generation},
                    "t3");
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("create"), 1);
  EXPECT_EQ(Launches(), 1);
}

// Outside the sandbox's home (which survives a stop), sbx makes no directory.
TEST_F(AgentWorkerReconcilerTest, MissingWorkspaceDirectoryIsReported) {
  MakeSandbox("box", true);
  ApplyWorker([&](api::AgentWorkerSpec& s) {
    s.workspace_directory = (sandbox_->root() / "nope").string();
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("ExecutorRunning").reason, "WorkspaceDirectoryMissing");
  EXPECT_EQ(Cond("Ready").reason, "WorkspaceDirectoryMissing");
  EXPECT_NE(Cond("Ready").message.find("/nope does not exist"), std::string::npos);
  EXPECT_EQ(Launches(), 1);  // the launch script looked, and launched nothing
  EXPECT_FALSE(fs::exists(sandbox_->executor_dir("w") / "pid"));
  EXPECT_FALSE(fs::exists(sandbox_->executor_dir("w") / "log"));
}

TEST_F(AgentWorkerReconcilerTest, MissingCommandIsReported) {
  MakeSandbox("box", true);
  ApplyWorker([&](api::AgentWorkerSpec& s) { s.executor.command = "no-such-codex"; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("ExecutorRunning").reason, "ExecutorNotFound");
  EXPECT_NE(Cond("Ready").message.find("no-such-codex"), std::string::npos);
  EXPECT_FALSE(fs::exists(sandbox_->executor_dir("w") / "pid"));
}

// session: PerTask (#27 item 4): no standing session or executor; Ready once a probe finds the
// command; a standing session left from Shared is deleted and its executor stopped.
TEST_F(AgentWorkerReconcilerTest, APerTaskWorkerHoldsNoSessionAndIsReadyWhenTheCommandIsFound) {
  MakeSandbox("box", true);
  ApplyWorker([&](api::AgentWorkerSpec& s) { s.session = api::SessionMode::kPerTask; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("SessionReady").reason, "PerTask");
  EXPECT_EQ(Cond("ExecutorConnected").reason, "PerTask");
  EXPECT_EQ(Worker().agent_worker_status().session_id, "");
  EXPECT_EQ(clouds_.agents().Calls("create"), 0);
  EXPECT_EQ(Launches(), 0);
  EXPECT_FALSE(fs::exists(sandbox_->executor_dir("w") / "pid"));

  // From Shared to PerTask: the standing session goes, and its executor with it.
  ApplyWorker([&](api::AgentWorkerSpec& s) { s.session = api::SessionMode::kShared; });
  ASSERT_TRUE(Reconcile().ok());
  WaitForExecutor();
  const std::string session = Worker().agent_worker_status().session_id;
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(Alive(sandbox_->ExecutorPid("w")));
  clouds_.agents().SetStrictDelete(false);  // as if a turn had run in it
  ApplyWorker([&](api::AgentWorkerSpec& s) { s.session = api::SessionMode::kPerTask; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Worker().agent_worker_status().session_id, "");
  EXPECT_FALSE(clouds_.agents().HasSession(session));
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
}

TEST_F(AgentWorkerReconcilerTest, APerTaskWorkerWithoutItsCommandIsNotReady) {
  MakeSandbox("box", true);
  // Its workspaceDirectory is not used (each task has a directory of its own): not looked for.
  ApplyWorker([&](api::AgentWorkerSpec& s) {
    s.session = api::SessionMode::kPerTask;
    s.workspace_directory = (sandbox_->root() / "nope").string();
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue) << Cond("Ready").message;
  ApplyWorker([&](api::AgentWorkerSpec& s) {
    s.session = api::SessionMode::kPerTask;
    s.executor.command = "no-such-codex";
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("Ready").reason, "ExecutorNotFound");
  EXPECT_NE(Cond("Ready").message.find("no-such-codex"), std::string::npos);
}

// The common case costs one exec-sync: the launch. The connection is seen through the OpenAI
// environment status, so no probe runs inside the sandbox to verify it.
TEST_F(AgentWorkerReconcilerTest, AConnectedExecutorNeedsNoProbe) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  EXPECT_EQ(Cond("ExecutorRunning").status, ConditionStatus::kTrue);
  EXPECT_EQ(Worker().agent_worker_status().executor.pid, sandbox_->ExecutorPid("w"));
  EXPECT_EQ(clouds_.api().execs().size(), 1u);
  EXPECT_EQ(Launches(), 1);
}

// Under injected 503s, 7 of 100 workers stayed Ready=False for minutes with all four
// sub-conditions True: one failed observation had overwritten Ready. An API error while
// observing is not evidence: Synced=False says the view is stale, Ready holds until three
// failures in a row, and Ready is True again as soon as its parts are.
TEST_F(AgentWorkerReconcilerTest, ATransientObservationErrorDoesNotFlipReady) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  EXPECT_EQ(Cond("Synced").status, ConditionStatus::kTrue);

  const AgentWorkerReconcilerOptions options;
  for (int failure = 1; failure <= options.failure_threshold; ++failure) {
    // The first time twice: the routine look at a connected executor, then the needed look it
    // falls back to; after that the connection is unknown, and every look is a needed one.
    clouds_.agents().FailNext("environment", api::UnavailableError("HTTP 503 (request_id r1)"),
                              failure == 1 ? 2 : 1);
    clock_.Advance(options.schedule.status_interval);
    EXPECT_FALSE(Reconcile().ok());
    EXPECT_EQ(Cond("Synced").reason, "Unavailable");
    EXPECT_EQ(Cond("Synced").message.find("request_id"), std::string::npos);
    // The EXECUTOR column must not keep claiming Connected on a status it could not read.
    EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kUnknown);
    EXPECT_EQ(Cond("Ready").status, failure < options.failure_threshold ? ConditionStatus::kTrue
                                                                        : ConditionStatus::kFalse)
        << "after " << failure << " failures";
  }
  EXPECT_EQ(Cond("Ready").reason, "Unavailable");
  clock_.Advance(options.schedule.status_interval);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Synced").status, ConditionStatus::kTrue);

  // The Sandbox's view goes stale (its workspace's LIST sweeps fail): the worker says so too,
  // and keeps Ready.
  api::Object sb = *store_->Get({api::Kind::kSandbox, "default", "box"});
  api::SetCondition(sb.sandbox_status().conditions,
                    {"Synced", ConditionStatus::kFalse, "Unavailable", "LIST sweeps fail", "",
                     sb.metadata.generation},
                    "t9");
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());
  clock_.Advance(options.schedule.status_interval);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Synced").reason, "Unavailable");
  EXPECT_NE(Cond("Synced").message.find("LIST sweeps fail"), std::string::npos);
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
}

// Issue #25: inside a reconcile, a failed read whose retry was handed back to the work queue
// (RetryScheduled) is no answer yet, not an observation: nothing the last pass saw changes, so
// 10% of 503s on environment reads do not make workers flicker out of ExecutorConnected.
TEST_F(AgentWorkerReconcilerTest, AReadWhoseRetryWasHandedBackChangesNoCondition) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  ASSERT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
  EXPECT_EQ(clouds_.agents().RoutineEnvironmentGets(), 0) << "a look that found it connecting";
  const AgentWorkerReconcilerOptions options;
  for (int i = 0; i < options.failure_threshold + 1; ++i) {
    clouds_.agents().FailNext(
        "environment", RetryScheduled(api::UnavailableError("HTTP 503"), std::chrono::seconds(1)),
        2);  // the routine look, then the needed look it falls back to
    clock_.Advance(options.schedule.status_interval);
    const auto result = Reconcile();
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(IsRetryScheduled(result.status()));
    EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
    EXPECT_EQ(Cond("Synced").status, ConditionStatus::kTrue);
    EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  }
}

// Issue #25 / PacingTest: the look at a connection the last look saw is routine (sent only with
// a spare token, while no needed call waits out a 429). Skipped or answered 429, it changes
// nothing and is due again on the cadence (a 503 is reported as before: the test above); a look
// that finds the executor disconnected makes the next ones needed.
TEST_F(AgentWorkerReconcilerTest, TheLookAtAConnectedExecutorIsRoutineAndASkipChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  ASSERT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
  const AgentWorkerReconcilerOptions options;
  clouds_.agents().FailNext("environment",
                            api::ResourceExhaustedError("GET: not sent, a routine call and the "
                                                        "read calls are paced now"));
  clock_.Advance(options.schedule.status_interval);
  auto result = Reconcile();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->after, options.schedule.status_interval);
  EXPECT_EQ(clouds_.agents().RoutineEnvironmentGets(), 1);
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  // A 503 on the routine look (one attempt) is looked at again at once as a needed look, which
  // finds it connected: one server error flips nothing.
  clouds_.agents().FailNext("environment", api::UnavailableError("HTTP 503"));
  const int calls = clouds_.agents().Calls("environment");
  clock_.Advance(options.schedule.status_interval);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("environment"), calls + 2);
  EXPECT_EQ(clouds_.agents().RoutineEnvironmentGets(), 2);
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);
  // The next look goes, finds it disconnected, and the worker says so.
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kDisconnected);
  clock_.Advance(options.schedule.status_interval);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().RoutineEnvironmentGets(), 3);
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kFalse);
  // In doubt now: the looks that follow are needed ones.
  clock_.Advance(options.schedule.status_interval);
  (void)Reconcile();
  EXPECT_EQ(clouds_.agents().RoutineEnvironmentGets(), 3);
}

// Without setup steps the Sandbox reconciler writes no boot marker; the launch script does, so
// the executor is still tied to this boot (and the next probe finds it Running, not a stranger).
TEST_F(AgentWorkerReconcilerTest, TheLaunchWritesAMissingBootMarker) {
  fs::remove(sandbox_->boot_marker());
  MakeSandbox("box", true, /*boot=*/"");
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  WaitForExecutor();
  const std::string boot = Slurp(sandbox_->boot_marker());
  ASSERT_FALSE(boot.empty());
  EXPECT_EQ(Slurp(sandbox_->executor_dir("w") / "boot"), boot);
  ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
  EXPECT_EQ(Cond("ExecutorRunning").status, ConditionStatus::kTrue);
  EXPECT_EQ(Launches(), 1);
}

TEST_F(AgentWorkerReconcilerTest, AdoptsTheSessionACrashedCreateLeftBehind) {
  MakeSandbox("box", true);
  ApplyWorker();
  clouds_.agents().FailNext("create", api::UnavailableError("connection reset"));
  EXPECT_FALSE(Reconcile().ok());
  // The session may exist on the server although we never saw the answer: make one.
  api::Object w = Worker();
  openai::CreateSessionRequest req;
  req.model = "gpt-5";
  req.workspace_directory = workspace_dir_;
  req.metadata = {{"sbx.dev/uid", w.metadata.uid}};
  ASSERT_TRUE(clouds_.agents().CreateSession(req, {}).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().SessionCount(), 1);
  EXPECT_TRUE(HasEvent("SessionAdopted"));
}

// Found by the chaos suite: sbxd killed after the session create was recorded in inventory but
// before the status (sessionId) was written. The restarted sbxd adopts that session instead of
// creating a second one that would leave the first leaked.
TEST_F(AgentWorkerReconcilerTest, ASessionWhoseIdNeverReachedTheStatusIsAdopted) {
  MakeSandbox("box", true);
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  const std::string session = Worker().agent_worker_status().session_id;
  ASSERT_FALSE(session.empty());
  api::Object w = Worker();  // as if the status write after the create had never happened
  w.agent_worker_status() = api::AgentWorkerStatus{};
  ASSERT_TRUE(store_->UpdateStatus(w).ok());
  reconciler_ = std::make_unique<AgentWorkerReconciler>(
      *store_, clouds_, clock_, &deps_,
      AgentWorkerReconcilerOptions{.boot_marker = sandbox_->boot_marker()});
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("create"), 1);
  EXPECT_EQ(clouds_.agents().SessionCount(), 1);
  EXPECT_EQ(Worker().agent_worker_status().session_id, session);
  EXPECT_TRUE(HasEvent("SessionAdopted"));
}

// The create of the owned Sandbox and its owner reference are two writes; when the second is
// lost (the Sandbox reconciler added its finalizer in between → conflict), the next pass still
// recognises the Sandbox as its own (by the uid the create wrote) instead of reporting a name
// conflict forever. A same-named Sandbox created by someone else stays a conflict.
TEST_F(AgentWorkerReconcilerTest, AnOwnedSandboxWhoseOwnerReferenceWasLostIsStillOurs) {
  api::Object w = api::MakeObject(api::Kind::kAgentWorker, "inline");
  w.agent_worker_spec().sandbox = api::SandboxSpec{};
  w.agent_worker_spec().agent.model = "gpt-5";
  w.agent_worker_spec().workspace_directory = workspace_dir_;
  ASSERT_TRUE(store_->Apply({w}, {}).ok());
  ASSERT_TRUE(Reconcile("inline").ok());
  api::Object sb = *store_->Get({api::Kind::kSandbox, "default", "inline"});
  ASSERT_EQ(sb.metadata.owner_references.size(), 1u);
  sb.metadata.owner_references.clear();  // as if the owner-reference write had been lost
  ASSERT_TRUE(store_->UpdateControllerMetadata(sb).ok());

  ASSERT_TRUE(Reconcile("inline").ok());
  EXPECT_EQ(Cond("SandboxReady", "inline").reason, "SandboxNotReady");
  sb = *store_->Get({api::Kind::kSandbox, "default", "inline"});
  ASSERT_EQ(sb.metadata.owner_references.size(), 1u);
  EXPECT_EQ(sb.metadata.owner_references[0].uid, Worker("inline").metadata.uid);

  // Someone else's Sandbox of the same name.
  MakeSandbox("other", true);
  api::Object w2 = api::MakeObject(api::Kind::kAgentWorker, "other");
  w2.agent_worker_spec().sandbox = api::SandboxSpec{};
  w2.agent_worker_spec().agent.model = "gpt-5";
  ASSERT_TRUE(store_->Apply({w2}, {}).ok());
  EXPECT_FALSE(Reconcile("other").ok());
  EXPECT_EQ(Cond("SandboxReady", "other").reason, "SandboxNameConflict");
}

TEST_F(AgentWorkerReconcilerTest, InlineTemplateOwnsASandboxAndDeletionCleansEverythingUp) {
  api::Object w = api::MakeObject(api::Kind::kAgentWorker, "inline");
  api::SandboxSpec tmpl;
  tmpl.display_name = "inline box";
  w.agent_worker_spec().sandbox = tmpl;
  w.agent_worker_spec().agent.model = "gpt-5";
  w.agent_worker_spec().workspace_directory = workspace_dir_;
  ASSERT_TRUE(store_->Apply({w}, {}).ok());
  ASSERT_TRUE(Reconcile("inline").ok());
  auto owned = store_->Get({api::Kind::kSandbox, "default", "inline"});
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(owned->sandbox_spec().sandbox_id, "default-inline");
  ASSERT_EQ(owned->metadata.owner_references.size(), 1u);
  EXPECT_EQ(owned->metadata.owner_references[0].uid, Worker("inline").metadata.uid);
  EXPECT_EQ(Cond("SandboxReady", "inline").reason, "SandboxNotReady");

  // What the Sandbox reconciler would report once it is up.
  api::Object sb = *owned;
  sb.sandbox_status().boot_id = "boot-1";
  sb.sandbox_status().state = "RUNNING";
  sb.sandbox_status().sandbox_name = "sandboxes/" + sb.sandbox_spec().sandbox_id;
  sb.sandbox_status().workspace_ref = "default";
  api::SetCondition(sb.sandbox_status().conditions,
                    {"Ready", ConditionStatus::kTrue, "Running", "", "", sb.metadata.generation},
                    "t");
  ASSERT_TRUE(store_->UpdateStatus(sb).ok());
  databricks::Sandbox live;
  live.sandbox_id = "default-inline";
  live.state = databricks::SandboxState::kRunning;
  clouds_.api().Put(live);
  ASSERT_TRUE(Reconcile("inline").ok());
  WaitForExecutor("inline");
  const std::string session = Worker("inline").agent_worker_status().session_id;
  ASSERT_TRUE(clouds_.agents().HasSession(session));
  // The worker did its work: a turn ran (a session that never ran one cannot be deleted).
  clouds_.agents().StartTurn(session);
  clouds_.agents().FinishTurn(session);

  ASSERT_TRUE(store_->Delete({api::Kind::kAgentWorker, "default", "inline"}).ok());
  ASSERT_TRUE(Reconcile("inline").ok());
  EXPECT_FALSE(clouds_.agents().HasSession(session));
  WaitForExit("inline");
  EXPECT_FALSE(sandbox_->ExecutorAlive("inline"));
  EXPECT_EQ(store_->Get({api::Kind::kAgentWorker, "default", "inline"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "inline"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListInventory(std::nullopt)->empty());
}

// Reference §1.6: running execution must be cancelled before DELETE. The finalizer cancels the
// active turn, then deletes the session, in one pass.
TEST_F(AgentWorkerReconcilerTest, DeletionCancelsARunningTurnThenDeletesTheSession) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  const std::string session = Worker().agent_worker_status().session_id;
  clouds_.agents().StartTurn(session);

  ASSERT_TRUE(store_->Delete({api::Kind::kAgentWorker, "default", "w"}).ok());
  auto result = Reconcile();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(clouds_.agents().Calls("cancel"), 1);
  EXPECT_FALSE(clouds_.agents().HasSession(session));
  EXPECT_EQ(store_->Get({api::Kind::kAgentWorker, "default", "w"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListInventory(std::nullopt)->empty());
  EXPECT_TRUE(HasEvent("TurnCancelled"));
  EXPECT_TRUE(HasEvent("SessionDeleted"));
}

// An idle session is deleted without a cancel (a cancel costs a call and is not needed).
TEST_F(AgentWorkerReconcilerTest, DeletionOfAnIdleSessionSendsNoCancel) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  const std::string session = Worker().agent_worker_status().session_id;
  clouds_.agents().StartTurn(session);
  clouds_.agents().FinishTurn(session);
  ASSERT_TRUE(store_->Delete({api::Kind::kAgentWorker, "default", "w"}).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("cancel"), 0);
  EXPECT_FALSE(clouds_.agents().HasSession(session));
}

// Reference §1.6: a self-hosted session whose first turn never ran answers 409 "session has no
// durably bound CCA root", also after a cancel. The finalizer retries for a bounded time, then
// records the session as abandoned (inventory kAbandoned, Warning SessionNotDeletable naming
// it) and completes; nothing loops.
TEST_F(AgentWorkerReconcilerTest, ASessionThatNeverRanATurnIsAbandonedAfterBoundedRetries) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  const std::string session = Worker().agent_worker_status().session_id;
  const reconcilers_internal::SessionDeletePolicy policy;
  ASSERT_TRUE(store_->Delete({api::Kind::kAgentWorker, "default", "w"}).ok());

  auto first = Reconcile();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, ReconcileResult::RequeueAfter(policy.retry_after));
  EXPECT_TRUE(store_->Get({api::Kind::kAgentWorker, "default", "w"}).ok());  // finalizer kept
  auto row = SessionRow(session);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, Store::InventoryState::kDeleting);
  EXPECT_TRUE(HasEvent("SessionDeleteRefused"));
  EXPECT_FALSE(HasEvent("SessionNotDeletable"));

  clock_.Advance(policy.retry_after);
  auto second = Reconcile();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, ReconcileResult::RequeueAfter(policy.retry_after));

  clock_.Advance(policy.give_up_after);
  auto last = Reconcile();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(*last, ReconcileResult::Done());
  EXPECT_EQ(clouds_.agents().Calls("delete"), 3);
  EXPECT_EQ(store_->Get({api::Kind::kAgentWorker, "default", "w"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_TRUE(clouds_.agents().HasSession(session));  // still there: the service refused
  row = SessionRow(session);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, Store::InventoryState::kAbandoned);
  EXPECT_EQ(row->owner.name, "w");
  bool named = false;
  const std::vector<Store::Event> events = *store_->ListEvents(std::nullopt);
  for (const Store::Event& e : events) {
    if (e.reason == "SessionNotDeletable") {
      EXPECT_EQ(e.type, "Warning");
      named = e.message.find(session) != std::string::npos;
    }
  }
  EXPECT_TRUE(named);
  // Nothing acts on it any more.
  EXPECT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("delete"), 3);
}

// An expired session the service refuses to delete (it never ran a turn) does not hold up its
// replacement: it is abandoned at once (no retries: it is of no use any more) and a new session
// is created.
TEST_F(AgentWorkerReconcilerTest, AnExpiredSessionThatRefusesDeletionIsAbandonedAndReplaced) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  const std::string first_session = Worker().agent_worker_status().session_id;
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kExpired);
  clock_.Advance(30s);
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(HasEvent("SessionNotDeletable"));
  auto row = SessionRow(first_session);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, Store::InventoryState::kAbandoned);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("create"), 2);
  EXPECT_NE(Worker().agent_worker_status().session_id, first_session);
  EXPECT_EQ(clouds_.agents().Calls("delete"), 1);
}

// ---- The worker follows its spec (#12 item 4) ---------------------------------------------

TEST_F(AgentWorkerReconcilerTest, AModelOrInstructionsChangeUpdatesTheSessionInPlace) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  const std::string session = Worker().agent_worker_status().session_id;
  ApplyWorker([](api::AgentWorkerSpec& s) {
    s.agent.model = "gpt-5-codex";
    s.agent.instructions = "Be brief.";
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("update"), 1);
  const openai::Session updated = *clouds_.agents().GetSession(session, {});
  EXPECT_EQ(updated.agent.model, "gpt-5-codex");
  EXPECT_EQ(updated.agent.instructions, "Be brief.");
  EXPECT_EQ(Worker().agent_worker_status().session_id, session);  // the same session
  EXPECT_TRUE(HasEvent("SessionUpdated"));
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.agents().Calls("update"), 1);  // once
  EXPECT_EQ(Launches(), 1);                        // the executor is not touched
}

TEST_F(AgentWorkerReconcilerTest, AnExecutorSpecChangeRelaunchesItWithTheNewEnvironment) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  const int old_pid = sandbox_->ExecutorPid("w");
  const int restarts = Worker().agent_worker_status().executor.restarts;
  ApplyWorker([](api::AgentWorkerSpec& s) {
    s.executor.env = {{"RUST_LOG", "debug", {}}, {"TEAM_TOKEN", "", {"SBX_SECRET_TEAM", ""}}};
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_TRUE(HasEvent("ExecutorRelaunched"));
  EXPECT_EQ(Worker().agent_worker_status().executor.restarts, restarts + 1);
  for (int i = 0;
       i < 500 && (sandbox_->ExecutorPid("w") == old_pid || !sandbox_->ExecutorAlive("w")); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  const int pid = sandbox_->ExecutorPid("w");
  ASSERT_NE(pid, old_pid);
  std::string environ = Slurp("/proc/" + std::to_string(pid) + "/environ");
  std::replace(environ.begin(), environ.end(), '\0', '\n');
  EXPECT_NE(environ.find("RUST_LOG=debug\n"), std::string::npos) << environ;
  EXPECT_NE(environ.find("TEAM_TOKEN=secret:SBX_SECRET_TEAM\n"), std::string::npos);
  // Under the executor's directory (here the test's stand-in for /home/sandbox-agent/.sbx/w).
  EXPECT_NE(environ.find("CODEX_HOME=" + (sandbox_->executor_dir("w") / "codex-home").string()),
            std::string::npos)
      << environ;
  EXPECT_TRUE(fs::is_directory(sandbox_->executor_dir("w") / "codex-home"));
  // The same spec again relaunches nothing.
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kConnected);
  clock_.Advance(1min);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
}

TEST_F(AgentWorkerReconcilerTest, ANewWorkspaceDirectoryReplacesTheSession) {
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());
  const std::string session = Worker().agent_worker_status().session_id;
  const std::string moved = workspace_dir_ + "/moved";
  fs::create_directories(moved);
  ApplyWorker([&](api::AgentWorkerSpec& s) { s.workspace_directory = moved; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_TRUE(HasEvent("SessionReplaced"));
  ASSERT_TRUE(Reconcile().ok());
  const api::AgentWorkerStatus status = Worker().agent_worker_status();
  EXPECT_NE(status.session_id, session);
  EXPECT_EQ(status.workspace_directory, moved);
  EXPECT_EQ(clouds_.agents().Calls("create"), 2);
  EXPECT_EQ(Launches(), 2);
}

}  // namespace
}  // namespace sbx::controller

namespace sbx::controller {
namespace {

// What the reconciler must remember across reconciles lives in status: a restarted sbxd (a new
// reconciler on the same store) neither launches nor probes before the schedule says so.
TEST_F(AgentWorkerReconcilerTest, ARestartKeepsTheScheduleOfARunningExecutor) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kConnected);
  clock_.Advance(5s);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  const api::ExecutorStatus before = Worker().agent_worker_status().executor;
  EXPECT_FALSE(before.last_probe_at.empty());
  EXPECT_EQ(before.probed_boot_id, "boot-1");
  const size_t execs = clouds_.api().execs().size();

  reconciler_ = std::make_unique<AgentWorkerReconciler>(
      *store_, clouds_, clock_, &deps_,
      AgentWorkerReconcilerOptions{.boot_marker = sandbox_->boot_marker()});
  const int env_gets = clouds_.agents().Calls("environment");
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(clouds_.api().execs().size(), execs);                  // no launch, no probe
  EXPECT_EQ(clouds_.agents().Calls("environment"), env_gets + 1);  // the lost cache: one GET
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Worker().agent_worker_status().executor, before);

  // The probe comes when the recorded last probe is probe_interval old, not earlier.
  clock_.Advance(4min);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.api().execs().size(), execs);
  clock_.Advance(1min + 1s);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(clouds_.api().execs().size(), execs + 1);
  EXPECT_EQ(Launches(), 1);
}

// Issue #25: the probe of an executor the connection vouches for, due only by its cadence, is
// routine: a spare token or a later pass. A skip (or a 503, a 429) of it is no failure of the
// worker; the probes of a doubt are never routine, nor is a launch.
TEST_F(AgentWorkerReconcilerTest, ARoutineProbeIsPutOffWhenTheCloudPacesIt) {
  ASSERT_NO_FATAL_FAILURE(StartRunningWorker());
  for (const databricks::ExecRequest& e : clouds_.api().execs()) {
    EXPECT_FALSE(e.routine) << "the launch and the probe of a doubt are not routine: "
                            << e.args.at(2);
  }
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kConnected);
  clock_.Advance(5s);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  const std::string last_probe = Worker().agent_worker_status().executor.last_probe_at;
  const size_t execs = clouds_.api().execs().size();

  clock_.Advance(ExecutorScheduleOptions{}.probe_interval + 1s);
  clouds_.api().FailNext("exec", api::ResourceExhaustedError(
                                     "POST /exec-sync: not sent, a routine call and the command "
                                     "calls are paced now"));
  auto put_off = Reconcile();
  ASSERT_TRUE(put_off.ok()) << put_off.status();
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(Worker().agent_worker_status().executor.last_probe_at, last_probe)
      << "no look was made: it is still due";

  clock_.Advance(ExecutorScheduleOptions{}.status_interval + 1s);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_EQ(clouds_.api().execs().size(), execs + 1);
  EXPECT_TRUE(clouds_.api().execs().back().routine);
  EXPECT_NE(Worker().agent_worker_status().executor.last_probe_at, last_probe);
  EXPECT_EQ(Launches(), 1);
}

TEST_F(AgentWorkerReconcilerTest, ARestartKeepsTheCrashLoopDelay) {
  sandbox_->SetCodex("echo 'Error: IP is not authorized' >&2; exit 1");
  MakeSandbox("box", true);
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  WaitForExit();
  ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
  ASSERT_EQ(Cond("ExecutorRunning").reason, "IPNotAuthorized");
  EXPECT_FALSE(Worker().agent_worker_status().executor.next_launch_after.empty());
  ASSERT_EQ(Launches(), 1);

  for (int i = 0; i < 3; ++i) {
    reconciler_ = std::make_unique<AgentWorkerReconciler>(
        *store_, clouds_, clock_, &deps_,
        AgentWorkerReconcilerOptions{.boot_marker = sandbox_->boot_marker()});
    clock_.Advance(1min);
    ASSERT_TRUE(Reconcile().ok());
  }
  EXPECT_EQ(Launches(), 1);  // auth_backoff (10 min) holds across restarts
  EXPECT_EQ(Cond("ExecutorRunning").reason, "IPNotAuthorized");
  clock_.Advance(8min);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_TRUE(Worker().agent_worker_status().executor.next_launch_after.empty());
}

// sbxd --webhook-addr: a worker the service asked for (a verified action_required webhook, marked
// in WakeHints) looks at once — the environment check and, as it is not connected, the probe —
// instead of on its cadence; the same reconcile without the hint spends nothing.
TEST_F(AgentWorkerReconcilerTest, AWakeHintMakesTheWorkerLookAtOnce) {
  WakeHints hints;
  AgentWorkerReconcilerOptions options;
  options.boot_marker = sandbox_->boot_marker();
  options.wake_hints = &hints;
  reconciler_ = std::make_unique<AgentWorkerReconciler>(*store_, clouds_, clock_, &deps_, options);
  ASSERT_NO_FATAL_FAILURE(BringUpConnected());

  sandbox_->KillExecutor();
  WaitForExit();
  clouds_.agents().SetEnvironmentStatus(EnvironmentId(), openai::EnvironmentStatus::kDisconnected);
  clock_.Advance(1s);
  ASSERT_TRUE(Reconcile().ok());  // nothing is due: nothing is seen
  EXPECT_EQ(Launches(), 1);
  EXPECT_EQ(Cond("ExecutorConnected").status, ConditionStatus::kTrue);

  const api::ObjectKey key{api::Kind::kAgentWorker, "default", "w"};
  ASSERT_TRUE(hints.Mark(key));
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_EQ(Worker().agent_worker_status().executor.restarts, 1);
  EXPECT_FALSE(hints.Take(key));  // the reconcile consumed it
  WaitForExecutor();
}

// The seed's troubleshooting row for "401 … IP is not authorized": "re-check after a restart —
// the egress IP can change across stop/restart". A sandbox without setup steps has no bootId in
// its status, so a stop and start the worker never saw is found only by the probe (the launch's
// boot differs from the marker's): it launches again at once instead of waiting out the 10-minute
// auth backoff meant for the old address, and the condition clears once the new address is
// allowed.
TEST_F(AgentWorkerReconcilerTest, IpNotAuthorizedIsCheckedAgainAfterTheSandboxRestarts) {
  sandbox_->SetCodex(
      "echo 'Error: environment registry authentication error: environment registry "
      "authentication failed (401 Unauthorized): IP is not authorized' >&2; exit 1");
  MakeSandbox("box", true, /*boot=*/"");
  ApplyWorker();
  ASSERT_TRUE(Reconcile().ok());
  WaitForExit();
  ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
  ASSERT_EQ(Cond("ExecutorRunning").reason, "IPNotAuthorized");
  EXPECT_NE(Cond("Ready").message.find("IP is not authorized"), std::string::npos);
  // What sbx can know: the boot that was refused, not the address (the API reports none).
  EXPECT_NE(Cond("Ready").message.find("boot boot-1"), std::string::npos);
  EXPECT_NE(Cond("Ready").message.find("does not report the address"), std::string::npos);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(1min);
    ASSERT_TRUE(Reconcile().ok());
  }
  ASSERT_EQ(Launches(), 1);  // the same boot: the auth backoff holds

  // Stopped and started behind the worker's back: a new boot, whose address is allowed.
  sandbox_->SetBoot("boot-2");
  sandbox_->SetCodex("echo \"codex $*\"; exec sleep 300");
  clock_.Advance(1min);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Launches(), 2);
  EXPECT_TRUE(HasEvent("RecheckAfterRestart"));
  WaitForExecutor();
  ASSERT_TRUE(ReconcileAfterConnectGrace().ok());
  EXPECT_EQ(Cond("ExecutorRunning").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("ExecutorRunning").reason, "Running");
  EXPECT_EQ(Slurp(sandbox_->executor_dir("w") / "boot"), "boot-2\n");
}

}  // namespace
}  // namespace sbx::controller
