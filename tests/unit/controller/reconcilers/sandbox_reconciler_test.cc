#include "controller/reconcilers/sandbox_reconciler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "controller/base/classify_error.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using databricks::SandboxState;
using std::chrono_literals::operator""s;

constexpr char kWs[] = "default/default";

class SandboxReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(":memory:", SqliteStore::Options{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    reconciler_ = std::make_unique<SandboxReconciler>(*store_, clouds_, cache_, clock_);
  }

  api::Object Apply(const std::string& name, std::function<void(api::SandboxSpec&)> edit = {}) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, name);
    api::SandboxSpec& spec = o.sandbox_spec();
    spec.sandbox_id = "default-" + name;
    spec.display_name = name;
    if (edit) {
      edit(spec);
    }
    auto applied = store_->Apply({o}, {});
    EXPECT_TRUE(applied.ok()) << applied.status();
    return Get(name);
  }
  api::Object Get(const std::string& name) {
    auto o = store_->Get({api::Kind::kSandbox, "default", name});
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? *o : api::Object{};
  }
  api::StatusOr<ReconcileResult> Reconcile(const std::string& name) {
    return reconciler_->Reconcile({api::Kind::kSandbox, "default", name}, {});
  }
  // What a LIST sweep would tell the cache.
  void Sweep() {
    auto& api = clouds_.api();
    const uint64_t ticket = cache_.BeginSweep(kWs);
    cache_.ReplaceSnapshot(kWs, ticket, *api.ListAll(100, {}));
  }
  void SetLiveState(const std::string& name, SandboxState state) {
    clouds_.api().SetState("default-" + name, state);
    Sweep();
  }
  const api::Condition& Cond(const std::string& name, const std::string& type) {
    static api::Condition none;
    last_ = Get(name);
    const api::Condition* c = api::FindCondition(last_.conditions(), type);
    return c != nullptr ? *c : none;
  }
  std::vector<Store::Event> Events() { return *store_->ListEvents(std::nullopt); }
  bool HasEvent(const std::string& reason) {
    for (const auto& e : Events()) {
      if (e.reason == reason) {
        return true;
      }
    }
    return false;
  }
  // Creates `name` and brings it to Ready.
  void MakeReady(const std::string& name) {
    ASSERT_TRUE(Reconcile(name).ok());
    SetLiveState(name, SandboxState::kRunning);
    ASSERT_TRUE(Reconcile(name).ok());
    ASSERT_EQ(Cond(name, "Ready").status, ConditionStatus::kTrue);
  }

  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  SandboxCache cache_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<SandboxReconciler> reconciler_;
  api::Object last_;
};

TEST_F(SandboxReconcilerTest, CreatesOnceRecordingIntentThenLive) {
  Apply("a");
  auto r = Reconcile("a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action, ReconcileResult::Action::kRequeueAfter);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  auto record = *store_->GetInventory(kWs, "sandbox", "default-a");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, Store::InventoryState::kLive);
  EXPECT_EQ(record->owner_uid, Get("a").metadata.uid);
  EXPECT_EQ(Cond("a", "Ready").reason, "Creating");
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.metadata.finalizers, std::vector<std::string>{"sbx.dev/controller"});
  EXPECT_EQ(last_.sandbox_status().state, "PENDING");
  EXPECT_TRUE(HasEvent("Created"));

  // While PENDING, reconciling again creates nothing more.
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
}

// The API floor for a Sandbox without setup: one create, nothing else (the LIST sweep observes
// RUNNING for a whole page at a time). No GET before the create, no boot-marker exec-sync.
// Issue #30: a create whose pacing wait went back to the work queue was never sent, so the pass
// that comes back for its token creates at once instead of first looking up its intent row (a
// GET that would take the place and the token the create was waiting for). After a restart
// (a new reconciler: nothing in memory) the intent is looked up as before.
TEST_F(SandboxReconcilerTest, ACreateGivenBackUnsentIsNotLookedUpWhenItComesBack) {
  Apply("a");
  clouds_.api().FailNext("create", PacingDeferred("POST /api/2.0/sandboxes: not sent yet", 1s));
  auto deferred = Reconcile("a");
  ASSERT_TRUE(IsPacingDeferred(deferred.status())) << deferred.status();
  auto intent = *store_->GetInventory(kWs, "sandbox", "default-a");
  ASSERT_TRUE(intent.has_value()) << "the intent row went in before the call";
  EXPECT_EQ(intent->state, Store::InventoryState::kIntent);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("get"), 0) << "no look before the create that was never sent";
  EXPECT_EQ((*store_->GetInventory(kWs, "sandbox", "default-a"))->state,
            Store::InventoryState::kLive);
}

TEST_F(SandboxReconcilerTest, WithoutSetupReadyCostsOnlyTheCreate) {
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());
  SetLiveState("a", SandboxState::kRunning);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_EQ(clouds_.api().Calls("get"), 0);
  EXPECT_EQ(clouds_.api().execs().size(), 0u);
  EXPECT_EQ(last_.sandbox_status().boot_id, "");
}

TEST_F(SandboxReconcilerTest, RunningSandboxGetsBootIdSetupAndReady) {
  Apply("a", [](api::SandboxSpec& s) {
    s.setup = {{"deps", "echo installing", 60s}, {"config", "echo configuring", 60s}};
  });
  ASSERT_TRUE(Reconcile("a").ok());
  SetLiveState("a", SandboxState::kRunning);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.sandbox_status().boot_id, "boot-default-a");
  ASSERT_EQ(last_.sandbox_status().setup.size(), 2u);
  EXPECT_TRUE(last_.sandbox_status().setup[0].succeeded);
  const auto execs = clouds_.api().execs();
  ASSERT_EQ(execs.size(), 3u);  // boot probe + 2 steps
  EXPECT_EQ(execs[1].cmd, "/bin/bash");
  EXPECT_EQ(execs[1].args, (std::vector<std::string>{"-c", "echo installing"}));
  EXPECT_EQ(execs[1].execution_timeout, 60s);
}

TEST_F(SandboxReconcilerTest, SteadyStateMakesNoApiCallsAndWritesNothing) {
  Apply("a");
  MakeReady("a");
  const int64_t rv = Get("a").metadata.resource_version;
  const int gets = clouds_.api().Calls("get");
  const int execs = static_cast<int>(clouds_.api().execs().size());
  for (int i = 0; i < 5; ++i) {
    auto r = Reconcile("a");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->action, ReconcileResult::Action::kDone);
  }
  EXPECT_EQ(clouds_.api().MutatingCalls(), 1);  // the create
  EXPECT_EQ(clouds_.api().Calls("get"), gets);
  EXPECT_EQ(static_cast<int>(clouds_.api().execs().size()), execs);
  EXPECT_EQ(Get("a").metadata.resource_version, rv);
}

TEST_F(SandboxReconcilerTest, PatchesExactlyTheChangedFields) {
  Apply("a", [](api::SandboxSpec& s) { s.inactivity_timeout = std::chrono::seconds(900); });
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) {
    s.inactivity_timeout = std::chrono::seconds(900);
    s.display_name = "renamed";
  });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("update"), 1);
  EXPECT_EQ(clouds_.api().last_mask(), std::vector<std::string>{"display_name"});
  EXPECT_EQ(clouds_.api().Peek("default-a")->display_name, "renamed");

  Apply("a", [](api::SandboxSpec& s) {
    s.inactivity_timeout = std::chrono::seconds(1800);
    s.display_name = "renamed";
  });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("update"), 2);
  EXPECT_EQ(clouds_.api().last_mask(), std::vector<std::string>{"spec.compute.inactivity_timeout"});
}

// The Starting event is the intent, written before the start call: a start whose answer never
// came back (a crash, a timeout after the API acted) still leaves its record (#25).
TEST_F(SandboxReconcilerTest, TheStartingEventIsWrittenBeforeTheStartCall) {
  Apply("a");
  MakeReady("a");
  SetLiveState("a", SandboxState::kStopped);
  clouds_.api().FailNext("start", api::Status(api::StatusCode::kDeadlineExceeded, "no answer"));
  EXPECT_FALSE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_TRUE(HasEvent("Starting"));
}

TEST_F(SandboxReconcilerTest, StartsAgainAfterAutoStopAndRerunsSetupForTheNewBoot) {
  Apply("a", [](api::SandboxSpec& s) { s.setup = {{"deps", "echo hi", 60s}}; });
  MakeReady("a");
  int boot = 0;
  clouds_.api().SetExecHandler([&](const std::string&, const databricks::ExecRequest& req) {
    databricks::ExecResult r;
    r.status = databricks::ExecStatus::kCompleted;
    r.exit_code = 0;
    if (req.args.size() > 2 && req.args[2] == "sbx-boot") {
      r.stdout_text = "second-boot-" + std::to_string(boot) + "\n";
    }
    return r;
  });
  SetLiveState("a", SandboxState::kStopped);  // inactivity auto-stop
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_EQ(Cond("a", "Ready").reason, "Starting");
  EXPECT_TRUE(HasEvent("Starting"));
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);  // normal, not an error

  SetLiveState("a", SandboxState::kRunning);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.sandbox_status().boot_id, "second-boot-0");
  ASSERT_EQ(last_.sandbox_status().setup.size(), 1u);
  EXPECT_EQ(last_.sandbox_status().setup[0].boot_id, "second-boot-0");
  EXPECT_TRUE(HasEvent("Rebooted"));
}

// Found by the chaos suite: the first exec-sync after a start (the boot-marker read) fails once.
// The failed reconcile still records state RUNNING, so the retry must not take the old boot's
// setup as done: a sandbox seen not RUNNING has no boot id until the marker is read again.
TEST_F(SandboxReconcilerTest, AFailedBootReadAfterAStartIsRetriedAndSetupRunsForTheNewBoot) {
  Apply("a", [](api::SandboxSpec& s) { s.setup = {{"deps", "echo hi", 60s}}; });
  MakeReady("a");
  ASSERT_EQ(last_.sandbox_status().boot_id, "boot-default-a");
  SetLiveState("a", SandboxState::kStopped);
  ASSERT_TRUE(Reconcile("a").ok());  // starts it
  EXPECT_EQ(Get("a").sandbox_status().boot_id, "");
  SetLiveState("a", SandboxState::kRunning);
  clouds_.api().SetExecHandler([](const std::string&, const databricks::ExecRequest& req) {
    databricks::ExecResult r;
    r.status = databricks::ExecStatus::kCompleted;
    r.exit_code = 0;
    if (req.args.size() > 2 && req.args[2] == "sbx-boot") {
      r.stdout_text = "boot-2\n";
    }
    return r;
  });
  clouds_.api().FailNext("exec", api::UnavailableError("503 from exec-sync"));
  EXPECT_FALSE(Reconcile("a").ok());
  EXPECT_EQ(Get("a").sandbox_status().state, "RUNNING");
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.sandbox_status().boot_id, "boot-2");
  ASSERT_EQ(last_.sandbox_status().setup.size(), 1u);
  EXPECT_EQ(last_.sandbox_status().setup[0].boot_id, "boot-2");
}

// A stop and start while sbxd was down (or between two sweeps) leave no trace in the status: a
// new sbxd reads the marker once per sandbox with setup, and then every boot_check_interval.
TEST_F(SandboxReconcilerTest, AReconcilerThatDidNotSeeTheBootReadsTheMarkerAgain) {
  Apply("a", [](api::SandboxSpec& s) { s.setup = {{"deps", "echo hi", 60s}}; });
  MakeReady("a");
  std::string current = "boot-2";
  clouds_.api().SetExecHandler([&](const std::string&, const databricks::ExecRequest& req) {
    databricks::ExecResult r;
    r.status = databricks::ExecStatus::kCompleted;
    r.exit_code = 0;
    if (req.args.size() > 2 && req.args[2] == "sbx-boot") {
      r.stdout_text = current + "\n";
    }
    return r;
  });
  // The same process: nothing is read again before the interval.
  const size_t execs = clouds_.api().execs().size();
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().execs().size(), execs);
  // A restarted sbxd (a new reconciler): reads the marker, sees the new boot, runs setup.
  reconciler_ = std::make_unique<SandboxReconciler>(*store_, clouds_, cache_, clock_);
  ASSERT_TRUE(Reconcile("a").ok());
  last_ = Get("a");
  EXPECT_EQ(last_.sandbox_status().boot_id, "boot-2");
  EXPECT_EQ(last_.sandbox_status().setup.at(0).boot_id, "boot-2");
  EXPECT_EQ(clouds_.api().execs().size(), execs + 2);  // marker + the step
  EXPECT_TRUE(HasEvent("Rebooted"));
  // And again after the interval.
  current = "boot-3";
  clock_.Advance(SandboxReconcilerOptions{}.boot_check_interval);
  auto r = Reconcile("a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Get("a").sandbox_status().boot_id, "boot-3");
  EXPECT_EQ(r->after, SandboxReconcilerOptions{}.boot_check_interval);
}

TEST_F(SandboxReconcilerTest, PowerStoppedStopsAndIsReadyWhenStopped) {
  Apply("a");
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.power = api::Power::kStopped; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("stop"), 1);
  EXPECT_EQ(Cond("a", "Ready").reason, "Stopping");
  SetLiveState("a", SandboxState::kStopped);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("a", "Ready").reason, "Stopped");
  EXPECT_EQ(clouds_.api().Calls("start"), 0);

  Apply("a");  // power back to Running
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
}

TEST_F(SandboxReconcilerTest, ImageChangeIsRefusedNotSilentlyRecreated) {
  Apply("a", [](api::SandboxSpec& s) { s.image = "main.images.agent:v1"; });
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.image = "main.images.agent:v2"; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("a", "Synced").reason, "ImmutableFieldChanged");
  EXPECT_EQ(Cond("a", "Ready").reason, "ImmutableFieldChanged");
  EXPECT_EQ(last_.sandbox_status().observed_generation, last_.metadata.generation);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_EQ(clouds_.api().Calls("delete"), 0);
}

TEST_F(SandboxReconcilerTest, RecreatesAfterExternalDeletionWithWarningEvent) {
  Apply("a");
  MakeReady("a");
  clouds_.api().Remove("default-a");
  Sweep();
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 2);
  bool warned = false;
  for (const auto& e : Events()) {
    warned |= e.reason == "ExternalDeletion" && e.type == "Warning";
  }
  EXPECT_TRUE(warned);
}

TEST_F(SandboxReconcilerTest, NeverTouchesASandboxItDidNotCreate) {
  databricks::Sandbox foreign;
  foreign.sandbox_id = "default-a";
  foreign.name = "sandboxes/default-a";
  foreign.state = SandboxState::kRunning;
  clouds_.api().Put(foreign);
  Apply("a", [](api::SandboxSpec& s) { s.display_name = "mine"; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").reason, "AlreadyExists");
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kFalse);
  // The one call is the create that found it (409, no effect): no GET is spent before a create
  // of an id inventory has never seen.
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_EQ(clouds_.api().Calls("get"), 0);
  EXPECT_EQ(clouds_.api().MutatingCalls(), 1);
  EXPECT_EQ(clouds_.api().execs().size(), 0u);
  EXPECT_TRUE(store_->GetInventory(kWs, "sandbox", "default-a")->has_value() == false);

  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("delete"), 0);
  EXPECT_TRUE(clouds_.api().Peek("default-a").has_value());
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "a"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(SandboxReconcilerTest, CreateRejectedAs409ForAForeignSandboxLeavesNoIntent) {
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());  // finalizer + create
  // Simulate: our GET said absent, but somebody created it meanwhile.
  api::Object b = Apply("b", [](api::SandboxSpec& s) { s.sandbox_id = "taken"; });
  databricks::Sandbox foreign;
  foreign.sandbox_id = "taken";
  foreign.name = "sandboxes/taken";
  clouds_.api().FailNext("get", api::NotFoundError("gone"));
  clouds_.api().Put(foreign);
  ASSERT_TRUE(Reconcile("b").ok());
  EXPECT_EQ(Cond("b", "Synced").reason, "AlreadyExists");
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "taken")->has_value());
}

TEST_F(SandboxReconcilerTest, AdoptsWhatACrashedCreateLeftBehind) {
  api::Object a = Apply("a");
  // A previous run wrote the intent, the API created the sandbox, then the process died.
  Store::InventoryRecord intent;
  intent.workspace = kWs;
  intent.resource_type = "sandbox";
  intent.external_id = "default-a";
  intent.state = Store::InventoryState::kIntent;
  intent.owner = api::KeyOf(a);
  intent.owner_uid = a.metadata.uid;
  ASSERT_TRUE(store_->PutInventory(intent).ok());
  ASSERT_TRUE(clouds_.api().Create("default-a", {}, {}).ok());
  const int creates_before = clouds_.api().Calls("create");

  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), creates_before);
  EXPECT_EQ((*store_->GetInventory(kWs, "sandbox", "default-a"))->state,
            Store::InventoryState::kLive);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
}

TEST_F(SandboxReconcilerTest, DeletePolicyDeletesThenDropsFinalizer) {
  Apply("a");
  MakeReady("a");
  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("delete"), 1);
  EXPECT_FALSE(clouds_.api().Peek("default-a").has_value());
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "default-a")->has_value());
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "a"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(SandboxReconcilerTest, DeleteToleratesAnAlreadyDeletedSandbox) {
  Apply("a");
  MakeReady("a");
  clouds_.api().Remove("default-a");
  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "a"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(SandboxReconcilerTest, OrphanPolicyLeavesSandboxAndForgetsIt) {
  Apply("a", [](api::SandboxSpec& s) { s.deletion_policy = api::DeletionPolicy::kOrphan; });
  MakeReady("a");
  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("delete"), 0);
  EXPECT_TRUE(clouds_.api().Peek("default-a").has_value());
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "default-a")->has_value());
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "a"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(SandboxReconcilerTest, FailedSetupStepIsReportedAndRetriedWithBackoff) {
  Apply("a", [](api::SandboxSpec& s) { s.setup = {{"deps", "exit 3", 60s}}; });
  ASSERT_TRUE(Reconcile("a").ok());
  SetLiveState("a", SandboxState::kRunning);
  bool fail = true;
  clouds_.api().SetExecHandler([&](const std::string&, const databricks::ExecRequest& req) {
    databricks::ExecResult r;
    r.status = databricks::ExecStatus::kCompleted;
    const bool step = req.args.size() == 2 && req.args[1] == "exit 3";
    r.exit_code = step && fail ? 3 : 0;
    r.stderr_text = step && fail ? "apt failed" : "";
    r.stdout_text = step ? "" : "boot-1";
    return r;
  });
  auto r = Reconcile("a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action, ReconcileResult::Action::kRequeueAfter);
  EXPECT_LE(r->after.count(), 0);  // rate-limited requeue, not a hot loop
  EXPECT_EQ(Cond("a", "Ready").reason, "SetupFailed");
  EXPECT_NE(Cond("a", "Ready").message.find("apt failed"), std::string::npos);
  EXPECT_EQ(last_.sandbox_status().setup.at(0).exit_code, 3);

  fail = false;
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
}

TEST_F(SandboxReconcilerTest, TransientApiErrorSetsSyncedFalseAndIsReturned) {
  Apply("a");
  clouds_.api().FailNext("create", api::UnavailableError("HTTP 503 TEMPORARILY_UNAVAILABLE"));
  auto r = Reconcile("a");
  EXPECT_EQ(r.status().code(), api::StatusCode::kUnavailable);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("a", "Synced").reason, "Unavailable");
  // The intent stays: the next attempt GETs before creating again.
  EXPECT_EQ((*store_->GetInventory(kWs, "sandbox", "default-a"))->state,
            Store::InventoryState::kIntent);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 2);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
}

TEST_F(SandboxReconcilerTest, TwoObjectsWithOneSandboxIdConflict) {
  Apply("a", [](api::SandboxSpec& s) { s.sandbox_id = "shared"; });
  ASSERT_TRUE(Reconcile("a").ok());
  Apply("b", [](api::SandboxSpec& s) { s.sandbox_id = "shared"; });
  ASSERT_TRUE(Reconcile("b").ok());
  EXPECT_EQ(Cond("b", "Synced").reason, "SandboxIdConflict");
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
}

TEST_F(SandboxReconcilerTest, MissingWorkspaceIsReportedOnSynced) {
  clouds_.SetMissing("default/other");
  Apply("a", [](api::SandboxSpec& s) { s.workspace_ref = "other"; });
  auto r = Reconcile("a");
  EXPECT_EQ(r.status().code(), api::StatusCode::kNotFound);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kFalse);
  EXPECT_NE(Cond("a", "Synced").message.find("default/other"), std::string::npos);
}

// ---- sandboxId and workspaceRef cannot move once the sandbox exists (#12 item 3) -------------

// Editing sandboxId used to create a second sandbox, and garbage collection then deleted the
// first one, home directory included.
TEST_F(SandboxReconcilerTest, ChangingSandboxIdIsRefusedAndCreatesOrDeletesNothing) {
  Apply("a");
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.sandbox_id = "default-a-renamed"; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").reason, "ImmutableFieldChanged");
  EXPECT_NE(Cond("a", "Synced").message.find("default-a-renamed"), std::string::npos);
  EXPECT_EQ(Cond("a", "Ready").reason, "ImmutableFieldChanged");
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_EQ(clouds_.api().Calls("delete"), 0);
  EXPECT_EQ(clouds_.api().ListAll(100, {})->size(), 1u);

  // Changed back: managed again, as before.
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
}

TEST_F(SandboxReconcilerTest, ChangingWorkspaceRefIsRefused) {
  Apply("a");
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.workspace_ref = "other"; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").reason, "ImmutableFieldChanged");
  EXPECT_EQ(clouds_.api("default/other").Calls("create"), 0);
}

// Deleting a Sandbox whose sandboxId was edited deletes the sandbox it created.
TEST_F(SandboxReconcilerTest, DeletingAfterARefusedEditDeletesTheCreatedSandbox) {
  Apply("a");
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.sandbox_id = "default-a-renamed"; });
  ASSERT_TRUE(Reconcile("a").ok());
  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("delete"), 1);
  EXPECT_TRUE(clouds_.api().ListAll(100, {})->empty());
}

// sbxd died between the create and the status write, then the id was edited: the intent row of
// the first id still says which sandbox is this object's.
TEST_F(SandboxReconcilerTest, AnEarlierCreateWhoseStatusWasLostStillCounts) {
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());  // created; now lose what status knows of it
  api::Object o = Get("a");
  o.sandbox_status() = api::SandboxStatus{};
  ASSERT_TRUE(store_->UpdateStatus(o).ok());
  Apply("a", [](api::SandboxSpec& s) { s.sandbox_id = "default-a-renamed"; });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").reason, "ImmutableFieldChanged");
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_EQ(last_.sandbox_status().sandbox_name, "sandboxes/default-a");
}

// An intent whose create never took effect (the API refused it) binds nothing: the id may be
// fixed, and the stale row goes.
TEST_F(SandboxReconcilerTest, AStaleIntentOfAnotherIdIsDroppedAndTheNewIdCreated) {
  api::Object o = Apply("a");
  Store::InventoryRecord stale;
  stale.workspace = kWs;
  stale.resource_type = "sandbox";
  stale.external_id = "Bad_Id";
  stale.state = Store::InventoryState::kIntent;
  stale.owner = api::KeyOf(o);
  stale.owner_uid = o.metadata.uid;
  ASSERT_TRUE(store_->PutInventory(stale).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "Bad_Id")->has_value());
  EXPECT_EQ(Get("a").sandbox_status().sandbox_name, "sandboxes/default-a");
}

// inactivityTimeout 0 = auto-stop off: sent as "0s" on create (the documented "off"); a server
// that omits a zero duration is not drift (no PATCH every pass); turning auto-stop off later is
// a PATCH to "0s".
TEST_F(SandboxReconcilerTest, ZeroInactivityTimeoutIsSentAsOffAndIsNotDriftWhenOmitted) {
  Apply("a", [](api::SandboxSpec& s) { s.inactivity_timeout = std::chrono::seconds(0); });
  MakeReady("a");
  EXPECT_EQ(clouds_.api().Peek("default-a")->inactivity_timeout, std::chrono::seconds(0));
  databricks::Sandbox omitted = *clouds_.api().Peek("default-a");
  omitted.inactivity_timeout.reset();
  clouds_.api().Put(omitted);
  Sweep();
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("update"), 0);

  Apply("a", [](api::SandboxSpec& s) { s.inactivity_timeout = std::chrono::seconds(900); });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("update"), 1);
  Apply("a", [](api::SandboxSpec& s) { s.inactivity_timeout = std::chrono::seconds(0); });
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("update"), 2);
  EXPECT_EQ(clouds_.api().last_mask(), std::vector<std::string>{"spec.compute.inactivity_timeout"});
  EXPECT_EQ(clouds_.api().Peek("default-a")->inactivity_timeout, std::chrono::seconds(0));
}

// ---- spec.limits.maxSandboxes (issue #12 item 9) ---------------------------------------------

// The Workspace "default" (the Sandboxes' default workspaceRef) with a sandbox limit.
void ApplyLimit(Store& store, int max_sandboxes) {
  api::Object ws = api::MakeObject(api::Kind::kWorkspace, "default");
  ws.workspace_spec().limits.max_sandboxes = max_sandboxes;
  auto applied = store.Apply({ws}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
}

TEST_F(SandboxReconcilerTest, MaxSandboxesRefusesTheCreateBeforeItIsSent) {
  ApplyLimit(*store_, 2);
  for (const char* name : {"a", "b", "c"}) {
    Apply(name);
  }
  ASSERT_TRUE(Reconcile("a").ok());
  ASSERT_TRUE(Reconcile("b").ok());
  auto r = Reconcile("c");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(clouds_.api().Calls("create"), 2);
  EXPECT_EQ(*r, ReconcileResult::RequeueAfter(10s));  // two store reads, no API call
  const std::string message =
      "workspace default allows 2 sandboxes (spec.limits.maxSandboxes) and sbx has created 2";
  EXPECT_EQ(Cond("c", "Synced").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("c", "Synced").reason, "QuotaExceeded");
  EXPECT_EQ(Cond("c", "Synced").message, message);
  EXPECT_EQ(Cond("c", "Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("c", "Ready").reason, "QuotaExceeded");
  EXPECT_TRUE(HasEvent("QuotaExceeded"));
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "default-c")->has_value());  // no intent

  // Waiting writes nothing more and sends nothing.
  const int64_t version = Get("c").metadata.resource_version;
  ASSERT_TRUE(Reconcile("c").ok());
  EXPECT_EQ(Get("c").metadata.resource_version, version);
  EXPECT_EQ(clouds_.api().Calls("create"), 2);

  // A slot frees up when a sandbox sbx created is deleted: the waiting one proceeds.
  ASSERT_TRUE(store_->Delete({api::Kind::kSandbox, "default", "a"}).ok());
  ASSERT_TRUE(Reconcile("a").ok());
  ASSERT_TRUE(Reconcile("c").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 3);
  EXPECT_EQ(Cond("c", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("c", "Ready").reason, "Creating");
}

TEST_F(SandboxReconcilerTest, MaxSandboxesCountsWhatSbxCreatedNotWhatTheListShows) {
  ApplyLimit(*store_, 1);
  // Somebody else's sandbox in the same workspace takes no slot of ours.
  ASSERT_TRUE(clouds_.api().Create("not-ours", {}, {}).ok());
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 2);
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
}

TEST_F(SandboxReconcilerTest, AnIntentLeftByACrashHoldsItsSlotAndMayProceed) {
  ApplyLimit(*store_, 1);
  Apply("a");
  Apply("b");
  // A crash between the intent row and the create call.
  Store::InventoryRecord intent;
  intent.workspace = kWs;
  intent.resource_type = "sandbox";
  intent.external_id = "default-a";
  intent.state = Store::InventoryState::kIntent;
  intent.owner = {api::Kind::kSandbox, "default", "a"};
  intent.owner_uid = Get("a").metadata.uid;
  ASSERT_TRUE(store_->PutInventory(intent).ok());

  ASSERT_TRUE(Reconcile("b").ok());
  EXPECT_EQ(Cond("b", "Synced").reason, "QuotaExceeded");
  ASSERT_TRUE(Reconcile("a").ok());  // its own slot: no check against itself
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(clouds_.api().Calls("create"), 1);
}

TEST_F(SandboxReconcilerTest, WithoutALimitOrAWorkspaceObjectNothingIsCounted) {
  for (int i = 0; i < 5; ++i) {
    Apply("s" + std::to_string(i));
    ASSERT_TRUE(Reconcile("s" + std::to_string(i)).ok());
  }
  ApplyLimit(*store_, 0);
  Apply("s5");
  ASSERT_TRUE(Reconcile("s5").ok());
  EXPECT_EQ(clouds_.api().Calls("create"), 6);
}

// Several workers reconcile different Sandboxes of one workspace at once: the count and the
// intent row are one step, so no two of them take the same last slot. Each round races two
// workers for the one slot of a workspace of its own. (Without the lock, 2 to 13 rounds in 200
// had two creates, in 19 of 20 runs on a 2-core machine; 300 rounds make a miss rarer still.)
TEST_F(SandboxReconcilerTest, ConcurrentCreatesNeverTakeTheSameLastSlot) {
  constexpr int kRounds = 300;
  int overshoots = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string ws = "race-" + std::to_string(round);
    api::Object workspace = api::MakeObject(api::Kind::kWorkspace, ws);
    workspace.workspace_spec().limits.max_sandboxes = 1;
    ASSERT_TRUE(store_->Apply({workspace}, {}).ok());
    const std::string names[] = {ws + "-a", ws + "-b"};
    for (const std::string& name : names) {
      Apply(name, [&](api::SandboxSpec& s) { s.workspace_ref = ws; });
    }
    std::atomic<int> waiting{2};
    std::atomic<int> failures{0};
    {
      std::vector<std::jthread> workers;
      for (const std::string& name : names) {
        workers.emplace_back([&, name] {
          // Released together, so that both reach the check at about the same moment.
          --waiting;
          while (waiting.load() > 0) {
            std::this_thread::yield();
          }
          if (!Reconcile(name).ok()) {
            ++failures;
          }
        });
      }
    }
    ASSERT_EQ(failures.load(), 0);
    auto rows = store_->ListInventory("default/" + ws);
    ASSERT_TRUE(rows.ok()) << rows.status();
    overshoots += clouds_.api("default/" + ws).Calls("create") > 1 || rows->size() > 1 ? 1 : 0;
  }
  EXPECT_EQ(overshoots, 0) << "rounds in which both workers created a sandbox, of " << kRounds;
}

// Issue #12 item 12: while the workspace's LIST fails, a reconcile calls nothing and keeps Ready
// and state as last observed (an error while observing is not evidence that the sandbox is
// down), but Synced=False/Unavailable says the observation is stale. The message is stable, so
// more failed sweeps write nothing; a successful LIST brings Synced back to True.
TEST_F(SandboxReconcilerTest, AFailingListKeepsReadyAndMarksSyncedUnavailableWithoutApiCalls) {
  Apply("a");
  MakeReady("a");
  const int calls = clouds_.api().MutatingCalls() + clouds_.api().Calls("get");
  const size_t execs = clouds_.api().execs().size();
  // Auto-stopped during the outage: nobody can see it, so nothing may act on it.
  clouds_.api().SetState("default-a", SandboxState::kStopped);

  ASSERT_TRUE(cache_.RecordSweepFailure(
      kWs, api::UnavailableError("list sandboxes: 503 Service Unavailable"), clock_.Now()));
  auto r = Reconcile("a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.sandbox_status().state, "RUNNING");
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("a", "Synced").reason, "Unavailable");
  EXPECT_EQ(Cond("a", "Synced").message,
            "the LIST sweeps of workspace default/default have failed since "
            "2026-09-01T12:00:00Z; state and Ready are as last observed: list sandboxes: 503 "
            "Service Unavailable");
  EXPECT_EQ(clouds_.api().MutatingCalls() + clouds_.api().Calls("get"), calls);
  EXPECT_EQ(clouds_.api().execs().size(), execs);

  // More failed sweeps, later: no status write.
  const int64_t version = Get("a").metadata.resource_version;
  clock_.Advance(5 * 60s);
  ASSERT_FALSE(
      cache_.RecordSweepFailure(kWs, api::UnavailableError("connection refused"), clock_.Now()));
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Get("a").metadata.resource_version, version);

  // The API answers again: the LIST shows it stopped, it is started, Synced is True.
  Sweep();
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("a", "Ready").reason, "Starting");
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
}

// Reference §4: no FAILED state; a failed provisioning shows as PENDING → STOPPING → STOPPED.
// It is reported with the service's only sign of it, started again on a growing backoff (not in
// a hot loop), never created again, and forgotten once the sandbox runs.
TEST_F(SandboxReconcilerTest, AFailedProvisioningIsReportedAndStartedAgainOnABackoff) {
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());  // created: PENDING
  SetLiveState("a", SandboxState::kStopped);
  auto r = Reconcile("a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("a", "Ready").reason, "ProvisioningFailed");
  EXPECT_NE(Cond("a", "Ready").message.find("without reaching RUNNING"), std::string::npos);
  EXPECT_EQ(Get("a").sandbox_status().provisioning_failures, 1);
  EXPECT_FALSE(Get("a").sandbox_status().next_start_after.empty());
  EXPECT_TRUE(HasEvent("ProvisioningFailed"));
  EXPECT_EQ(r->action, ReconcileResult::Action::kRequeueAfter);
  EXPECT_EQ(r->after, std::chrono::milliseconds(10'000));
  EXPECT_EQ(clouds_.api().Calls("start"), 0);

  // Woken early (a sweep, a resync): no start before the backoff has passed.
  r = Reconcile("a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 0);
  EXPECT_EQ(Cond("a", "Ready").reason, "ProvisioningFailed");
  EXPECT_EQ(Get("a").sandbox_status().provisioning_failures, 1);

  clock_.Advance(10s);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  EXPECT_EQ(Cond("a", "Ready").reason, "Starting");

  // It fails again: twice the delay.
  SetLiveState("a", SandboxState::kStopped);
  r = Reconcile("a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Get("a").sandbox_status().provisioning_failures, 2);
  EXPECT_EQ(r->after, std::chrono::milliseconds(20'000));
  clock_.Advance(19s);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 1);
  clock_.Advance(1s);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Calls("start"), 2);

  // This time it runs: Ready, and the count is gone.
  SetLiveState("a", SandboxState::kRunning);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Get("a").sandbox_status().provisioning_failures, 0);
  EXPECT_EQ(Get("a").sandbox_status().next_start_after, "");
  EXPECT_EQ(clouds_.api().Calls("create"), 1);  // never a second create
}

TEST_F(SandboxReconcilerTest, ATeardownSeenWhileProvisioningCountsOnceAndAStaleViewNotAtAll) {
  Apply("a");
  ASSERT_TRUE(Reconcile("a").ok());
  SetLiveState("a", SandboxState::kStopping);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Cond("a", "Ready").reason, "ProvisioningFailed");
  ASSERT_TRUE(Reconcile("a").ok());  // still STOPPING
  SetLiveState("a", SandboxState::kStopped);
  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(Get("a").sandbox_status().provisioning_failures, 1);
  EXPECT_EQ(clouds_.api().Calls("start"), 0);

  // A view that says STOPPED while the API says RUNNING (a stale cache) is not a failure: the
  // GET that confirms a failure finds it running.
  Apply("b");
  ASSERT_TRUE(Reconcile("b").ok());
  const uint64_t ticket = cache_.BeginSweep(kWs);
  auto listed = *clouds_.api().ListAll(100, {});
  for (auto& sb : listed) {
    if (sb.sandbox_id == "default-b") {
      sb.state = SandboxState::kStopped;
    }
  }
  cache_.ReplaceSnapshot(kWs, ticket, listed);
  clouds_.api().SetState("default-b", SandboxState::kRunning);
  ASSERT_TRUE(Reconcile("b").ok());
  ASSERT_TRUE(Reconcile("b").ok());
  EXPECT_EQ(Cond("b", "Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Get("b").sandbox_status().provisioning_failures, 0);
}

// The per-user quota of the Databricks API (429 RESOURCE_EXHAUSTED with a QuotaFailure detail,
// which the client reports as reason QuotaExceeded): Ready and Synced say so with the service's
// text, no intent row holds a slot, and the error goes back to the Manager's backoff.
TEST_F(SandboxReconcilerTest, TheApisQuotaRefusalIsReportedAndRetriedWithoutAnIntentRow) {
  Apply("a");
  clouds_.api().FailNext("create",
                         api::ResourceExhaustedError(
                             "HTTP 429 RESOURCE_EXHAUSTED: Per-user sandbox quota of 40 reached")
                             .WithReason("QuotaExceeded"));
  auto r = Reconcile("a");
  EXPECT_EQ(r.status().code(), api::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ClassifyError(r.status()).transient());
  EXPECT_EQ(Cond("a", "Ready").reason, "QuotaExceeded");
  EXPECT_NE(Cond("a", "Ready").message.find("Per-user sandbox quota of 40 reached"),
            std::string::npos);
  EXPECT_EQ(Cond("a", "Synced").reason, "QuotaExceeded");
  EXPECT_FALSE((*store_->GetInventory(kWs, "sandbox", "default-a")).has_value());
  EXPECT_TRUE(HasEvent("QuotaExceeded"));

  ASSERT_TRUE(Reconcile("a").ok());  // a slot freed up
  EXPECT_EQ(clouds_.api().Calls("create"), 2);
  EXPECT_EQ(Cond("a", "Ready").reason, "Creating");
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
}

// Reference §3 row 4 (early docs): a concurrent update gets 409 ABORTED. It is transient: the
// Manager retries on its backoff, and the PATCH goes again while the drift is there.
TEST_F(SandboxReconcilerTest, AConcurrentUpdateConflictIsRetriedAndThePatchGoesThrough) {
  Apply("a");
  MakeReady("a");
  Apply("a", [](api::SandboxSpec& s) { s.display_name = "renamed"; });
  clouds_.api().FailNext("update",
                         api::AbortedError("HTTP 409 ABORTED: Sandbox 'sandboxes/default-a' is "
                                           "being updated by another request; retry the update"));
  auto r = Reconcile("a");
  EXPECT_EQ(r.status().code(), api::StatusCode::kAborted);
  EXPECT_TRUE(ClassifyError(r.status()).transient());
  EXPECT_EQ(Cond("a", "Synced").reason, "Conflict");
  EXPECT_NE(Cond("a", "Synced").message.find("ABORTED"), std::string::npos);
  EXPECT_EQ(clouds_.api().Peek("default-a")->display_name, "a");

  ASSERT_TRUE(Reconcile("a").ok());
  EXPECT_EQ(clouds_.api().Peek("default-a")->display_name, "renamed");
  EXPECT_EQ(Cond("a", "Synced").status, ConditionStatus::kTrue);
  EXPECT_EQ(clouds_.api().Calls("update"), 2);
}

}  // namespace
}  // namespace sbx::controller
