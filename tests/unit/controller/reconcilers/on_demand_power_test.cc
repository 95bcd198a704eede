// Power OnDemand (DESIGN §7.2) against the fakes: what needs a sandbox (OnDemandPower's demand),
// the Sandbox reconciler's sleep and wake (idleStop counted from status.idleSince, which a new
// reconciler — a restarted sbxd — keeps), a task arriving while the sandbox stops, the hold that
// keeps a stop from crossing a submission, and the AgentWorker on a sleeping sandbox (Ready=True
// Sleeping, no exec-sync, the session's environment_connection turned into a wake request).
#include "controller/reconcilers/on_demand_power.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "controller/reconcilers/agent_worker_reconciler.h"
#include "controller/reconcilers/sandbox_reconciler.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using api::Kind;
using api::Object;
using databricks::SandboxState;
using namespace std::chrono_literals;
namespace oa = openai;

constexpr char kWs[] = "default/default";

class OnDemandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStore::Options options;
    options.clock = &clock_;
    store_ = *SqliteStore::Open(":memory:", options);
    power_ = std::make_unique<OnDemandPower>(*store_);
    MakeReconciler();
    Object box = api::MakeObject(Kind::kSandbox, "box");
    box.sandbox_spec().sandbox_id = "default-box";
    box.sandbox_spec().power = api::Power::kOnDemand;
    box.sandbox_spec().idle_stop = 60s;
    box.sandbox_spec().setup = {{"prep", "true", 30s}};
    Object worker = api::MakeObject(Kind::kAgentWorker, "w");
    worker.agent_worker_spec().sandbox_ref = "box";
    ASSERT_TRUE(store_->Apply({box, worker}, {}).ok());
    clouds_.api().SetExecHandler([](const std::string&, const databricks::ExecRequest&) {
      databricks::ExecResult r;
      r.status = databricks::ExecStatus::kCompleted;
      r.exit_code = 0;
      r.stdout_text = "boot-1\n";
      return r;
    });
  }
  // A new reconciler and OnDemandPower: what a restart of sbxd keeps is in the store.
  void MakeReconciler() {
    SandboxReconcilerOptions options;
    options.power = power_.get();
    sandboxes_ = std::make_unique<SandboxReconciler>(*store_, clouds_, cache_, clock_, options);
  }
  Object Get(Kind kind, const std::string& name) { return *store_->Get({kind, "default", name}); }
  ReconcileResult ReconcileBox() {
    auto r = sandboxes_->Reconcile({Kind::kSandbox, "default", "box"}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ReconcileResult{};
  }
  void SetLive(SandboxState state) {
    clouds_.api().SetState("default-box", state);
    const uint64_t ticket = cache_.BeginSweep(kWs);
    cache_.ReplaceSnapshot(kWs, ticket, *clouds_.api().ListAll(100, {}));
  }
  // "Status/Reason" of an object's Ready condition, "" without one.
  std::string ReadyOf(Kind kind, const std::string& name) {
    const Object o = Get(kind, name);
    const api::Condition* c = api::FindCondition(o.conditions(), api::condition::kReady);
    return c == nullptr ? "" : std::string(api::ConditionStatusName(c->status)) + "/" + c->reason;
  }
  std::string BoxReady() { return ReadyOf(Kind::kSandbox, "box"); }
  // The worker's bring-up is over: a session whose environment its executor connected to.
  void BringUpWorker() {
    oa::CreateSessionRequest create;
    create.model = "m";
    create.workspace_directory = "/w";
    session_ = clouds_.agents().CreateSession(create, {})->id;
    Object w = Get(Kind::kAgentWorker, "w");
    auto& st = w.agent_worker_status();
    st.session_id = session_;
    st.environment_id = clouds_.agents().GetSession(session_, {})->environment.id;
    st.connected_environment_id = st.environment_id;
    st.conditions = {{"Ready", ConditionStatus::kTrue, "Ready", "", "t", 1}};
    ASSERT_TRUE(store_->UpdateStatus(w).ok());
  }
  void CreateTask(const std::string& name) {
    Object t = api::MakeObject(Kind::kAgentTask, name);
    t.agent_task_spec().worker_ref = "w";
    t.agent_task_spec().input = "hi";
    ASSERT_TRUE(store_->Apply({t}, {}).ok());
  }
  void FinishTask(const std::string& name) {
    Object t = Get(Kind::kAgentTask, name);
    t.agent_task_status().phase = api::TaskPhase::kSucceeded;
    ASSERT_TRUE(store_->UpdateStatus(t).ok());
  }
  // Created, RUNNING, set up; the worker brought up; then idle until it is stopped and STOPPED.
  void BringToSleep() {
    ReconcileBox();
    SetLive(SandboxState::kRunning);
    ReconcileBox();
    BringUpWorker();
    IdleToSleep();
  }
  // Brought up and RUNNING: idle past idleStop, then stopped and STOPPED.
  void IdleToSleep() {
    ReconcileBox();
    clock_.Advance(61s);
    ReconcileBox();
    ASSERT_EQ(clouds_.api().Calls("stop"), 1);
    SetLive(SandboxState::kStopped);
    ReconcileBox();
    ASSERT_EQ(BoxReady(), "True/Sleeping");
  }

  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  SandboxCache cache_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<OnDemandPower> power_;
  std::unique_ptr<SandboxReconciler> sandboxes_;
  std::string session_;
};

TEST_F(OnDemandTest, NewSandboxStaysUpForBringUpThenSleepsIdleStopAfterAcrossARestart) {
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "True/Running");
  // The worker has not been brought up: no idle clock, no stop however long it takes.
  clock_.Advance(10min);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 0);
  EXPECT_TRUE(Get(Kind::kSandbox, "box").sandbox_status().idle_since.empty());

  BringUpWorker();
  ReconcileResult r = ReconcileBox();
  const std::string since = Get(Kind::kSandbox, "box").sandbox_status().idle_since;
  ASSERT_FALSE(since.empty());
  EXPECT_EQ(r.action, ReconcileResult::Action::kRequeueAfter);
  EXPECT_LE(r.after, 60s);
  clock_.Advance(59s);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 0);

  // sbxd restarts: the idle clock is in status, not memory.
  power_ = std::make_unique<OnDemandPower>(*store_);
  MakeReconciler();
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 0);
  EXPECT_EQ(Get(Kind::kSandbox, "box").sandbox_status().idle_since, since);
  clock_.Advance(2s);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 1);
  EXPECT_EQ(BoxReady(), "False/Stopping");

  SetLive(SandboxState::kStopped);
  const int execs = clouds_.api().Calls("exec");
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "True/Sleeping");
  // Asleep: no boot-marker read, however long (the boot check interval passes many times).
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(10min);
    ReconcileBox();
  }
  EXPECT_EQ(clouds_.api().Calls("exec"), execs);
  EXPECT_EQ(clouds_.api().Calls("start"), 0);
  EXPECT_EQ(clouds_.api().Calls("get"), 0);
}

TEST_F(OnDemandTest, ATaskWakesItAndItSleepsIdleStopAfterTheTaskEnded) {
  ASSERT_NO_FATAL_FAILURE(BringToSleep());
  CreateTask("t1");
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_EQ(BoxReady(), "False/Waking");
  SetLive(SandboxState::kPending);
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "False/Waking");
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "True/Running");  // setup ran again for the new boot
  // The task runs longer than idleStop: never stopped under it.
  clock_.Advance(5min);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 1);

  FinishTask("t1");
  ReconcileBox();
  EXPECT_FALSE(Get(Kind::kSandbox, "box").sandbox_status().idle_since.empty());
  clock_.Advance(61s);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("stop"), 2);
}

TEST_F(OnDemandTest, ATaskArrivingWhileItStopsWaitsForStoppedThenStartsIt) {
  ReconcileBox();
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  BringUpWorker();
  ReconcileBox();
  clock_.Advance(61s);
  ReconcileBox();
  ASSERT_EQ(clouds_.api().Calls("stop"), 1);
  SetLive(SandboxState::kStopping);

  CreateTask("t1");
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "False/Waking");
  EXPECT_EQ(clouds_.api().Calls("start"), 0);  // start answers 404 unless STOPPED
  SetLive(SandboxState::kStopped);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  ReconcileBox();  // the cache says PENDING now: no second start
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
}

// A wake whose provisioning fails (PENDING → STOPPED, reference §4) is counted and reported as
// for power Running, and started again only after the backoff, not in a hot loop; a later wake
// that runs clears the count.
TEST_F(OnDemandTest, AWakeWhoseProvisioningFailsIsCountedAndStartedAgainOnABackoff) {
  ASSERT_NO_FATAL_FAILURE(BringToSleep());
  CreateTask("t1");
  ReconcileBox();
  ASSERT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_EQ(BoxReady(), "False/Waking");

  SetLive(SandboxState::kStopped);
  ReconcileResult r = ReconcileBox();
  EXPECT_EQ(BoxReady(), "False/ProvisioningFailed");
  EXPECT_EQ(Get(Kind::kSandbox, "box").sandbox_status().provisioning_failures, 1);
  EXPECT_FALSE(Get(Kind::kSandbox, "box").sandbox_status().next_start_after.empty());
  EXPECT_EQ(r.after, std::chrono::milliseconds(10'000));
  ReconcileBox();  // woken early: no start before the backoff
  EXPECT_EQ(clouds_.api().Calls("start"), 1);

  clock_.Advance(10s);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("start"), 2);
  EXPECT_EQ(BoxReady(), "False/Waking");
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  EXPECT_EQ(BoxReady(), "True/Running");
  EXPECT_EQ(Get(Kind::kSandbox, "box").sandbox_status().provisioning_failures, 0);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
}

TEST_F(OnDemandTest, AHoldKeepsAStopOffAndAStopKeepsNewHoldsOff) {
  BringUpWorker();
  const Object box = Get(Kind::kSandbox, "box");
  const api::ObjectKey key = api::KeyOf(box);
  {
    std::optional<OnDemandPower::Hold> hold = power_->TryHold(key);
    ASSERT_TRUE(hold.has_value());
    EXPECT_EQ(*power_->BeginStop(box), "a task is being submitted");
  }
  EXPECT_EQ(*power_->BeginStop(box), "");  // nothing needs it: the stop is announced
  EXPECT_FALSE(power_->TryHold(key).has_value());
  power_->EndStop(key);
  EXPECT_TRUE(power_->TryHold(key).has_value());

  // A submission written before the announcement is seen by the second read.
  CreateTask("t1");
  Object t = Get(Kind::kAgentTask, "t1");
  t.agent_task_status().phase = api::TaskPhase::kSubmitted;
  t.agent_task_status().worker = "w";
  ASSERT_TRUE(store_->UpdateStatus(t).ok());
  EXPECT_EQ(*power_->BeginStop(box), "AgentTask t1 for AgentWorker w");
  EXPECT_TRUE(power_->TryHold(key).has_value());  // that stop was not announced
}

TEST_F(OnDemandTest, DemandComesFromBringUpWakeRequestsAndUnfinishedTasks) {
  const Object box = Get(Kind::kSandbox, "box");
  EXPECT_EQ(DemandOf(*store_, box)->why, "bring-up of AgentWorker w");
  BringUpWorker();
  EXPECT_EQ(DemandOf(*store_, box)->why, "");

  Object w = Get(Kind::kAgentWorker, "w");
  w.agent_worker_status().wake_requested_at = "2026-12-01T00:00:00Z";
  ASSERT_TRUE(store_->UpdateStatus(w).ok());
  EXPECT_EQ(DemandOf(*store_, box)->why, "the session of AgentWorker w needs its executor");
  w = Get(Kind::kAgentWorker, "w");
  w.agent_worker_status().wake_requested_at.clear();
  ASSERT_TRUE(store_->UpdateStatus(w).ok());

  CreateTask("t1");
  EXPECT_EQ(DemandOf(*store_, box)->why, "AgentTask t1 for AgentWorker w");
  EXPECT_EQ(DemandOf(*store_, box)->sources.size(), 2u);
  FinishTask("t1");
  EXPECT_EQ(DemandOf(*store_, box)->why, "");

  // A configuration error ends the bring-up too: shown, then slept on.
  w = Get(Kind::kAgentWorker, "w");
  w.agent_worker_status().connected_environment_id.clear();
  w.agent_worker_status().conditions = {
      {"Ready", ConditionStatus::kFalse, "ExecutorNotFound", "", "t", 1}};
  ASSERT_TRUE(store_->UpdateStatus(w).ok());
  EXPECT_EQ(DemandOf(*store_, box)->why, "");
}

TEST_F(OnDemandTest, ATaskIsAdmittedOnlyToAnAwakeConnectedWorkerAndWakesASleepingOne) {
  BringUpWorker();
  Object box = Get(Kind::kSandbox, "box");
  box.sandbox_status().state = "STOPPED";
  box.sandbox_status().conditions = {{"Ready", ConditionStatus::kTrue, "Sleeping", "", "t", 1}};
  Object w = Get(Kind::kAgentWorker, "w");
  w.agent_worker_status().conditions = {{"Ready", ConditionStatus::kTrue, "Sleeping", "", "t", 1}};
  EXPECT_EQ(AdmitTask(power_.get(), w, box).gate, TaskGate::kWaitForWake);

  box.sandbox_status().state = "RUNNING";
  box.sandbox_status().conditions = {{"Ready", ConditionStatus::kTrue, "Running", "", "t", 1}};
  w.agent_worker_status().conditions = {
      {"Ready", ConditionStatus::kFalse, "Launching", "", "t", 1}};
  EXPECT_EQ(AdmitTask(power_.get(), w, box).gate, TaskGate::kWaitForWake);

  w.agent_worker_status().conditions = {{"Ready", ConditionStatus::kTrue, "Ready", "", "t", 1}};
  TaskAdmission admitted = AdmitTask(power_.get(), w, box);
  EXPECT_EQ(admitted.gate, TaskGate::kSubmit);
  EXPECT_TRUE(admitted.hold.has_value());
  EXPECT_EQ(*power_->BeginStop(box), "a task is being submitted");
  admitted.hold.reset();

  // A sandbox whose stop is announced: the task waits for the next start.
  ASSERT_EQ(*power_->BeginStop(box), "");
  EXPECT_EQ(AdmitTask(power_.get(), w, box).gate, TaskGate::kWaitForWake);

  // Not OnDemand: as before, Ready and a session are enough.
  box.sandbox_spec().power = api::Power::kRunning;
  EXPECT_EQ(AdmitTask(power_.get(), w, box).gate, TaskGate::kSubmit);
}

TEST_F(OnDemandTest, SessionNeedsExecutorWhileInputWaitsOrATurnRuns) {
  oa::Session s;
  s.status = oa::SessionStatus::kIdle;
  EXPECT_FALSE(SessionNeedsExecutor(s));
  s.status = oa::SessionStatus::kInProgress;
  EXPECT_TRUE(SessionNeedsExecutor(s));
  s.status = oa::SessionStatus::kIdle;
  oa::RequiredAction a;
  a.type_raw = "function_call";
  s.required_actions = {a};
  EXPECT_FALSE(SessionNeedsExecutor(s));
  a.type_raw = "environment_connection";
  s.required_actions = {a};
  EXPECT_TRUE(SessionNeedsExecutor(s));
}

TEST_F(OnDemandTest, AWorkerOnASleepingSandboxIsReadySleepingTouchesNothingAndWakesForItsSession) {
  ASSERT_NO_FATAL_FAILURE(BringToSleep());
  AgentWorkerReconcilerOptions options;
  options.schedule.status_interval = 30s;
  WakeHints hints;
  options.wake_hints = &hints;
  AgentWorkerReconciler workers(*store_, clouds_, clock_, nullptr, options);
  const int execs = clouds_.api().Calls("exec");
  const api::ObjectKey key{Kind::kAgentWorker, "default", "w"};
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  Object w = Get(Kind::kAgentWorker, "w");
  const api::Condition* ready = api::FindCondition(w.conditions(), api::condition::kReady);
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, ConditionStatus::kTrue);
  EXPECT_EQ(ready->reason, "Sleeping");
  EXPECT_TRUE(w.agent_worker_status().wake_requested_at.empty());

  // Input sent straight to the session: on the next status check the worker asks for a wake.
  clouds_.agents().SetWaitingForExecutor(session_, true);
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_TRUE(Get(Kind::kAgentWorker, "w").agent_worker_status().wake_requested_at.empty())
      << "looked before the status cadence";
  ASSERT_TRUE(hints.Mark(key));  // what a verified action_required webhook does
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_FALSE(Get(Kind::kAgentWorker, "w").agent_worker_status().wake_requested_at.empty());
  EXPECT_EQ(clouds_.api().Calls("exec"), execs);  // nothing inside the sleeping sandbox

  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_EQ(BoxReady(), "False/Waking");
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  w = Get(Kind::kAgentWorker, "w");
  ready = api::FindCondition(w.conditions(), api::condition::kReady);
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->reason, "Waking");
}

// session: PerTask on an OnDemand sandbox (#27 item 3): no standing session, so the bring-up is
// the probe that finds the executor's command; then the sandbox sleeps, the worker is
// Ready=True Sleeping without a call to either API, and a task for it wakes the sandbox.
TEST_F(OnDemandTest, APerTaskWorkerIsBroughtUpByItsProbeSleepsWithoutACallAndATaskWakesIt) {
  clouds_.api().SetExecHandler([](const std::string&, const databricks::ExecRequest&) {
    databricks::ExecResult r;  // the boot probe reads it all as the boot id; the executor
    r.status = databricks::ExecStatus::kCompleted;  // probe, as its report
    r.exit_code = 0;
    r.stdout_text = "workspace=1\ncommand=1\n";
    return r;
  });
  Object w = Get(Kind::kAgentWorker, "w");
  w.agent_worker_spec().session = api::SessionMode::kPerTask;
  ASSERT_TRUE(store_->Apply({w}, {}).ok());
  AgentWorkerReconcilerOptions options;
  AgentWorkerReconciler workers(*store_, clouds_, clock_, nullptr, options);
  const api::ObjectKey key{Kind::kAgentWorker, "default", "w"};

  const Object box = Get(Kind::kSandbox, "box");
  EXPECT_EQ(DemandOf(*store_, box)->why, "bring-up of AgentWorker w");
  ReconcileBox();
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_EQ(ReadyOf(Kind::kAgentWorker, "w"), "True/Ready");
  EXPECT_EQ(DemandOf(*store_, Get(Kind::kSandbox, "box"))->why, "") << "brought up by the probe";
  EXPECT_EQ(clouds_.agents().Calls("create"), 0);

  ASSERT_NO_FATAL_FAILURE(IdleToSleep());
  const int execs = clouds_.api().Calls("exec");
  const int environments = clouds_.agents().Calls("environment");
  const int sessions = clouds_.agents().Calls("get");
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_EQ(ReadyOf(Kind::kAgentWorker, "w"), "True/Sleeping");
  EXPECT_EQ(clouds_.api().Calls("exec"), execs) << "nothing inside the sleeping sandbox";
  EXPECT_EQ(clouds_.agents().Calls("environment"), environments);
  EXPECT_EQ(clouds_.agents().Calls("get"), sessions);

  // A task for it: not admitted while it sleeps, and it wakes the sandbox.
  CreateTask("t1");
  EXPECT_EQ(AdmitTask(power_.get(), Get(Kind::kAgentWorker, "w"), Get(Kind::kSandbox, "box")).gate,
            TaskGate::kWaitForWake);
  ReconcileBox();
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_EQ(ReadyOf(Kind::kAgentWorker, "w"), "False/Waking");
  SetLive(SandboxState::kRunning);
  ReconcileBox();
  ASSERT_EQ(BoxReady(), "True/Running");
  // Awake: the worker looks for its command on the new boot, then takes the task.
  ASSERT_TRUE(workers.Reconcile(key, {}).ok());
  EXPECT_EQ(ReadyOf(Kind::kAgentWorker, "w"), "True/Ready");
  EXPECT_GT(clouds_.api().Calls("exec"), execs);
  EXPECT_EQ(AdmitTask(power_.get(), Get(Kind::kAgentWorker, "w"), Get(Kind::kSandbox, "box")).gate,
            TaskGate::kSubmit);

  // A worker whose command is missing: the task says so rather than "being woken", and still
  // wakes the sandbox (a fresh boot may show it fixed).
  std::vector<api::ObjectKey> woken;
  power_->Attach([&](const api::ObjectKey& key) { woken.push_back(key); }, nullptr);
  Object missing = Get(Kind::kAgentWorker, "w");
  missing.agent_worker_status().conditions = {{"Ready", ConditionStatus::kFalse, "ExecutorNotFound",
                                               "command \"codex\" not found", "t", 1}};
  const TaskAdmission refused = AdmitTask(power_.get(), missing, Get(Kind::kSandbox, "box"));
  EXPECT_EQ(refused.gate, TaskGate::kWaitForWorker);
  EXPECT_EQ(refused.message,
            "worker w is not Ready (ExecutorNotFound: command \"codex\" not found)");
  EXPECT_EQ(woken, std::vector<api::ObjectKey>{api::KeyOf(Get(Kind::kSandbox, "box"))});
}

}  // namespace
}  // namespace sbx::controller
