// AgentPoolReconciler and the pool side of AgentTaskReconciler against a real SQLite store and
// the cloud fakes: replicas made at once for queued work up to max, kept at min and warm, scaled
// down after scaleDownAfter and to zero, rolled out without touching a busy replica, deleted with
// the pool; a task bound to one free replica only, in a store transaction, and the replica given
// back once the task's final status is stored.
#include "controller/reconcilers/agent_pool_reconciler.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "api/defaults.h"
#include "api/rfc3339.h"
#include "api/validation.h"
#include "controller/reconcilers/agent_task_reconciler.h"
#include "controller/reconcilers/pool_binding.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using api::Kind;
using api::TaskPhase;
using std::chrono::minutes;
using std::chrono::seconds;
namespace oa = openai;
namespace db = databricks;

class AgentPoolReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStore::Options options;
    options.clock = &clock_;
    store_ = *SqliteStore::Open(":memory:", options);
    AgentPoolReconcilerOptions pool_options;
    pool_options.suffix = [this] {
      return "r" + std::to_string(10000 + ++replicas_made_).substr(1);
    };
    pools_ = std::make_unique<AgentPoolReconciler>(*store_, clock_, nullptr, pool_options);
    tasks_ = std::make_unique<AgentTaskReconciler>(*store_, clouds_, clock_, nullptr);
  }

  // A pool "p": max replicas, min, warm, scale down after 5m; session Shared.
  void ApplyPool(int max, int min = 0, int warm = 0, std::string model = "gpt-5") {
    Object p = api::MakeObject(Kind::kAgentPool, "p");
    api::AgentPoolSpec& s = p.agent_pool_spec();
    s.template_.metadata.labels = {{"team", "a"}};
    s.template_.spec.sandbox = api::SandboxSpec{};
    s.template_.spec.agent.model = std::move(model);
    s.replicas = {min, max};
    s.warm = warm;
    s.session = api::SessionMode::kShared;
    api::ApplyDefaults(p);
    ASSERT_TRUE(api::Validate(p).ok()) << api::Validate(p);
    ASSERT_TRUE(store_->Apply({p}, {}).ok());
  }

  Object Pool() { return *store_->Get({Kind::kAgentPool, "default", "p"}); }

  Object ReconcilePool() {
    auto r = pools_->Reconcile({Kind::kAgentPool, "default", "p"}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return Pool();
  }

  std::vector<Object> Replicas() {
    std::vector<Object> out = *ListReplicas(*store_, Pool());
    std::erase_if(out, [](const Object& o) { return !o.metadata.deletion_timestamp.empty(); });
    return out;
  }

  std::string CreateTask(const std::string& name) {
    Object o = api::MakeObject(Kind::kAgentTask, name);
    o.agent_task_spec().pool_ref = "p";
    o.agent_task_spec().input = "$ true";
    clock_.Advance(seconds(1));  // creation order
    return (*store_->Apply({o}, {}))[0].object.metadata.uid;
  }

  Object ReconcileTask(const std::string& name) {
    auto r = tasks_->Reconcile({Kind::kAgentTask, "default", name}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return *store_->Get({Kind::kAgentTask, "default", name});
  }

  // Makes a replica Ready the way the worker reconciler leaves it: its sandbox created and
  // running in the fake cloud, a session, Ready=True.
  void MakeReady(const std::string& replica) {
    db::Sandbox sb;
    sb.sandbox_id = "default-" + replica;
    sb.name = "sandboxes/" + sb.sandbox_id;
    sb.state = db::SandboxState::kRunning;
    clouds_.api().Put(sb);
    oa::CreateSessionRequest create;
    create.model = "m";
    create.workspace_directory = "/w";
    Object w = *store_->Get({Kind::kAgentWorker, "default", replica});
    w.agent_worker_status().session_id = clouds_.agents().CreateSession(create, {})->id;
    w.agent_worker_status().conditions = {{"Ready", ConditionStatus::kTrue, "Ready", "", "t", 1}};
    ASSERT_TRUE(store_->UpdateStatus(w).ok());
  }

  // The replica's Sandbox object, as the worker reconciler would have made it.
  void MakeSandbox(const std::string& replica) {
    Object w = *store_->Get({Kind::kAgentWorker, "default", replica});
    Object box = api::MakeObject(Kind::kSandbox, replica);
    box.sandbox_spec() = *w.agent_worker_spec().sandbox;
    ASSERT_TRUE(store_->Apply({box}, {}).ok());
    Object created = *store_->Get({Kind::kSandbox, "default", replica});
    created.sandbox_status().sandbox_name = "sandboxes/default-" + replica;
    created.sandbox_status().workspace_ref = "default";
    ASSERT_TRUE(store_->UpdateStatus(created).ok());
  }

  std::string ConditionReason(const Object& o, std::string_view type) {
    const api::Condition* c = api::FindCondition(o.conditions(), type);
    return c == nullptr ? "" : std::string(api::ConditionStatusName(c->status)) + "/" + c->reason;
  }

  testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  testing::FakeCloudClients clouds_;
  std::unique_ptr<AgentPoolReconciler> pools_;
  std::unique_ptr<AgentTaskReconciler> tasks_;
  int replicas_made_ = 0;
};

TEST_F(AgentPoolReconcilerTest, MakesTheReplicasQueuedWorkNeedsAtOnceUpToMax) {
  ApplyPool(/*max=*/3);
  for (int i = 0; i < 5; ++i) {
    CreateTask("t" + std::to_string(i));
  }
  Object pool = ReconcilePool();
  const std::vector<Object> replicas = Replicas();
  ASSERT_EQ(replicas.size(), 3u);  // one pass, not one per resync
  for (const Object& r : replicas) {
    EXPECT_EQ(r.metadata.labels.at("sbx.dev/pool"), "p");
    EXPECT_EQ(r.metadata.labels.at("team"), "a");
    ASSERT_EQ(r.metadata.owner_references.size(), 1u);
    EXPECT_EQ(r.metadata.owner_references[0].kind, Kind::kAgentPool);
    EXPECT_TRUE(r.metadata.owner_references[0].controller);
    EXPECT_EQ(r.metadata.annotations.at("sbx.dev/template-hash"),
              pool.agent_pool_status().template_hash);
    // Each replica owns its own sandbox, named after it.
    EXPECT_EQ(r.agent_worker_spec().sandbox->sandbox_id, "default-" + r.metadata.name);
  }
  const api::AgentPoolStatus& st = pool.agent_pool_status();
  EXPECT_EQ(st.replicas, 3);
  EXPECT_EQ(st.queued, 5);
  EXPECT_EQ(st.ready, 0);
  EXPECT_EQ(ConditionReason(pool, "ScalingLimited"), "True/AtMaxReplicas");
  EXPECT_EQ(ConditionReason(pool, "Ready"), "False/ScalingUp");
  // Nothing more while they come up.
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 3u);
}

// DESIGN §8.2: while the Workspace's budget is used up, its queued tasks are held
// (BudgetExceeded) and no demand: no replica is made for them; a raised budget scales at once.
TEST_F(AgentPoolReconcilerTest, TasksHeldByTheBudgetAreNoDemand) {
  ApplyPool(/*max=*/3);
  Object ws = api::MakeObject(Kind::kWorkspace, "default");
  ws.workspace_spec().budget = api::WorkspaceBudget{.tokens = 100};
  ASSERT_TRUE(store_->Apply({ws}, {}).ok());
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch())
          .count();
  ASSERT_TRUE(store_
                  ->RecordUsage({"default/default",
                                 "uid-old",
                                 1,
                                 {Kind::kAgentTask, "default", "old"},
                                 now_ms,
                                 80,
                                 0,
                                 20,
                                 0,
                                 0,
                                 true,
                                 "Succeeded"})
                  .ok());
  CreateTask("t0");
  CreateTask("t1");
  const Object held = ReconcileTask("t0");
  EXPECT_EQ(held.agent_task_status().phase, api::TaskPhase::kQueued);
  EXPECT_EQ(ConditionReason(held, "Submitted"), "False/BudgetExceeded");
  EXPECT_EQ(held.agent_task_status().worker, "");  // bound to no replica
  Object pool = ReconcilePool();
  EXPECT_TRUE(Replicas().empty());
  EXPECT_EQ(pool.agent_pool_status().queued, 0);

  ws.workspace_spec().budget->tokens = 1000;
  ASSERT_TRUE(store_->Apply({ws}, {}).ok());
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 2u);
  EXPECT_NE(ConditionReason(ReconcileTask("t0"), "Submitted"), "False/BudgetExceeded");
}

TEST_F(AgentPoolReconcilerTest, ScalesToZeroWithoutWorkAndKeepsMinAndWarm) {
  ApplyPool(/*max=*/5);
  Object pool = ReconcilePool();
  EXPECT_TRUE(Replicas().empty());
  EXPECT_EQ(ConditionReason(pool, "Ready"), "True/ScaledToZero");

  ApplyPool(/*max=*/5, /*min=*/1, /*warm=*/2);
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 2u);  // max(min, warm)
  ApplyPool(/*max=*/5, /*min=*/3, /*warm=*/2);
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 3u);
}

TEST_F(AgentPoolReconcilerTest, AnIdleReplicaGoesAfterScaleDownAfterAndNotBefore) {
  ApplyPool(/*max=*/2);
  CreateTask("t");
  ReconcilePool();
  ASSERT_EQ(Replicas().size(), 1u);
  const std::string replica = Replicas()[0].metadata.name;
  ASSERT_TRUE(store_->Delete({Kind::kAgentTask, "default", "t"}).ok());  // the work went away
  clock_.Advance(minutes(4));
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 1u);
  clock_.Advance(minutes(1) + seconds(1));
  Object pool = ReconcilePool();
  EXPECT_TRUE(Replicas().empty());  // deleting (its finalizer cleans its sandbox)
  EXPECT_EQ(ConditionReason(pool, "Ready"), "True/ScaledToZero");
}

TEST_F(AgentPoolReconcilerTest, ATaskTakesOneFreeReadyReplicaAndNoOtherTaskTakesIt) {
  ApplyPool(/*max=*/1);
  const std::string a = CreateTask("a");
  const std::string b = CreateTask("b");
  Object a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(ConditionReason(a_task, "Submitted"), "False/WaitingForReplica");
  ReconcilePool();
  const std::string replica = Replicas().at(0).metadata.name;
  MakeSandbox(replica);
  MakeReady(replica);

  Object b_task = ReconcileTask("b");  // b is behind a: it does not jump the queue
  EXPECT_EQ(b_task.agent_task_status().queue_position, 1);
  EXPECT_TRUE(b_task.agent_task_status().worker.empty());
  a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().worker, replica);
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kSubmitted);
  EXPECT_EQ(BindingOf(*store_->Get({Kind::kAgentWorker, "default", replica})), a);
  b_task = ReconcileTask("b");
  EXPECT_TRUE(b_task.agent_task_status().worker.empty());
  EXPECT_EQ(b_task.agent_task_status().queue_position, 0);
  EXPECT_EQ(ConditionReason(b_task, "Submitted"), "False/WaitingForReplica");
  const Object pool = ReconcilePool();
  EXPECT_EQ(pool.agent_pool_status().busy, 1);
  EXPECT_EQ(pool.agent_pool_status().queued, 1);
  EXPECT_EQ(pool.agent_pool_status().idle, 0);

  // a finishes: its final status is stored, then the replica is b's.
  const std::string session = a_task.agent_task_status().session_id;
  ReconcileTask("a");  // Running
  clouds_.agents().CompleteTurn(session, oa::Usage{1, 1, 2, {}});
  a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kSucceeded);
  EXPECT_EQ(BindingOf(*store_->Get({Kind::kAgentWorker, "default", replica})), "");
  b_task = ReconcileTask("b");
  EXPECT_EQ(b_task.agent_task_status().worker, replica);
  EXPECT_EQ(BindingOf(*store_->Get({Kind::kAgentWorker, "default", replica})), b);
}

// A queued task tells its pool of the demand: the pool alone. Every queued task of the pool
// depends on the pool, so waking the pool's dependents from each queued task's pass kept all of
// them cycling through the work queue (bench/pool.sh).
TEST_F(AgentPoolReconcilerTest, ATaskWakesItsPoolAloneNotThePoolsOtherTasks) {
  testing::RecordingEnqueuer enqueuer;
  AgentTaskReconcilerOptions options;
  options.enqueuer = &enqueuer;
  tasks_ = std::make_unique<AgentTaskReconciler>(*store_, clouds_, clock_, nullptr, options);
  ApplyPool(/*max=*/1);
  CreateTask("a");
  CreateTask("b");
  EXPECT_EQ(ReconcileTask("a").agent_task_status().phase, TaskPhase::kQueued);
  ReconcileTask("b");
  EXPECT_EQ(enqueuer.CountAlone("p"), 2);
  EXPECT_EQ(enqueuer.Count("p"), 2);  // never with its dependents
}

TEST_F(AgentPoolReconcilerTest, ABindingWrittenAgainstAStaleReadLosesAndChangesNothing) {
  ApplyPool(/*max=*/1, /*min=*/1);
  ReconcilePool();
  const Object read = Replicas().at(0);
  ASSERT_TRUE(Bind(*store_, read, "task-1").ok());
  // A second binder that read the replica before the first wrote loses the transaction.
  EXPECT_EQ(Bind(*store_, read, "task-2").code(), api::StatusCode::kAborted);
  EXPECT_EQ(BindingOf(*store_->Get(api::KeyOf(read))), "task-1");
  // Unbind gives back only its own binding.
  ASSERT_TRUE(Unbind(*store_, api::KeyOf(read), "task-2", clock_.Now()).ok());
  EXPECT_EQ(BindingOf(*store_->Get(api::KeyOf(read))), "task-1");
  clock_.Advance(seconds(7));
  ASSERT_TRUE(Unbind(*store_, api::KeyOf(read), "task-1", clock_.Now()).ok());
  const Object unbound = *store_->Get(api::KeyOf(read));
  EXPECT_EQ(BindingOf(unbound), "");
  // ... and the replica is idle from then on.
  EXPECT_EQ(unbound.metadata.annotations.at(std::string(api::kIdleSinceAnnotation)),
            api::FormatRfc3339(clock_.Now()));
  EXPECT_EQ(IdleSince(unbound, {}), clock_.Now());
}

// The pool keeps no finished task in view (it lists the live ones): a replica's idle time comes
// from its last unbinding, so one that just finished a long task is not taken for idle since its
// creation.
TEST_F(AgentPoolReconcilerTest, ScaleDownAfterCountsFromTheReplicasLastTaskNotItsCreation) {
  ApplyPool(/*max=*/1);
  CreateTask("t");
  ReconcilePool();
  ASSERT_EQ(Replicas().size(), 1u);
  const std::string replica = Replicas()[0].metadata.name;
  MakeReady(replica);
  Object task = *store_->Get({Kind::kAgentTask, "default", "t"});
  ASSERT_TRUE(
      Bind(*store_, *store_->Get({Kind::kAgentWorker, "default", replica}), task.metadata.uid)
          .ok());
  clock_.Advance(minutes(10));  // the task runs
  ReconcilePool();
  ASSERT_EQ(Replicas().size(), 1u);
  // It finishes, and gives its replica back as the task reconciler does after its final status.
  task.agent_task_status().phase = api::TaskPhase::kSucceeded;
  task.agent_task_status().completed_at = api::FormatRfc3339(clock_.Now());
  ASSERT_TRUE(store_->UpdateStatus(task).ok());
  ASSERT_TRUE(
      Unbind(*store_, {Kind::kAgentWorker, "default", replica}, task.metadata.uid, clock_.Now())
          .ok());
  clock_.Advance(minutes(4));
  ReconcilePool();
  EXPECT_EQ(Replicas().size(), 1u);  // idle 4 minutes, made 14 minutes ago
  clock_.Advance(minutes(1) + seconds(1));
  ReconcilePool();
  EXPECT_TRUE(Replicas().empty());
}

TEST_F(AgentPoolReconcilerTest, AStaleBindingIsClearedAndTheReplicaCountsAsIdle) {
  ApplyPool(/*max=*/1, /*min=*/1);
  ReconcilePool();
  const std::string replica = Replicas().at(0).metadata.name;
  MakeReady(replica);
  ASSERT_TRUE(Bind(*store_, *store_->Get({Kind::kAgentWorker, "default", replica}),
                   "uid-of-a-task-long-gone")
                  .ok());
  clock_.Advance(minutes(10));
  const Object pool = ReconcilePool();
  const Object cleared = *store_->Get({Kind::kAgentWorker, "default", replica});
  EXPECT_EQ(BindingOf(cleared), "");
  EXPECT_EQ(IdleSince(cleared, {}), clock_.Now());  // idle from the pass that cleared it
  EXPECT_EQ(pool.agent_pool_status().idle, 1);
  EXPECT_EQ(pool.agent_pool_status().busy, 0);
}

TEST_F(AgentPoolReconcilerTest, ANewTemplateReplacesIdleReplicasAtOnceAndBusyOnesAfterTheirTask) {
  ApplyPool(/*max=*/2, /*min=*/2);
  ReconcilePool();
  std::vector<Object> old = Replicas();
  ASSERT_EQ(old.size(), 2u);
  for (const Object& r : old) {
    MakeReady(r.metadata.name);
  }
  const std::string uid = CreateTask("t");
  ASSERT_TRUE(Bind(*store_, *store_->Get(api::KeyOf(old[0])), uid).ok());  // busy

  ApplyPool(/*max=*/2, /*min=*/2, /*warm=*/0, "gpt-6");
  Object pool = ReconcilePool();
  std::vector<Object> now = Replicas();
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0].metadata.name, old[0].metadata.name);  // busy: kept, its turn untouched
  EXPECT_NE(now[1].metadata.name, old[1].metadata.name);  // idle: replaced at once
  EXPECT_EQ(now[1].agent_worker_spec().agent.model, "gpt-6");
  EXPECT_EQ(pool.agent_pool_status().updated_replicas, 1);
  EXPECT_EQ(ConditionReason(pool, "Progressing"), "True/RollingOut");

  Object task = *store_->Get({Kind::kAgentTask, "default", "t"});
  task.agent_task_status().phase = TaskPhase::kSucceeded;  // the task is done
  ASSERT_TRUE(store_->UpdateStatus(task).ok());
  ReconcilePool();
  pool = ReconcilePool();
  now = Replicas();
  ASSERT_EQ(now.size(), 2u);
  for (const Object& r : now) {
    EXPECT_EQ(r.agent_worker_spec().agent.model, "gpt-6");
  }
  EXPECT_EQ(ConditionReason(pool, "Progressing"), "True/RolloutComplete");
}

TEST_F(AgentPoolReconcilerTest, AReplicaThatNeverBecomesReadyShowsTheRolloutStuck) {
  ApplyPool(/*max=*/1, /*min=*/1);
  ReconcilePool();
  clock_.Advance(minutes(10) + seconds(1));
  const Object pool = ReconcilePool();
  EXPECT_EQ(ConditionReason(pool, "Progressing"), "False/RolloutStuck");
}

TEST_F(AgentPoolReconcilerTest, DeletingThePoolDeletesItsReplicasFirst) {
  ApplyPool(/*max=*/2, /*min=*/2);
  ReconcilePool();
  ASSERT_EQ(Replicas().size(), 2u);
  ASSERT_TRUE(store_->Delete({Kind::kAgentPool, "default", "p"}).ok());
  Object pool = ReconcilePool();
  EXPECT_FALSE(pool.metadata.deletion_timestamp.empty());  // waits for its replicas
  ListOptions workers;
  workers.kind = Kind::kAgentWorker;
  const std::vector<Object> listed = *store_->List(workers);
  for (const Object& w : listed) {
    EXPECT_FALSE(w.metadata.deletion_timestamp.empty()) << w.metadata.name;
    Object gone = w;
    gone.metadata.finalizers.clear();  // as the worker reconciler does once it cleaned up
    ASSERT_TRUE(store_->UpdateControllerMetadata(gone).ok());
  }
  ASSERT_TRUE(pools_->Reconcile({Kind::kAgentPool, "default", "p"}, {}).ok());
  EXPECT_EQ(store_->Get({Kind::kAgentPool, "default", "p"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(AgentPoolReconcilerTest, ATaskOfAPoolThatDoesNotExistSaysSo) {
  CreateTask("t");
  const Object t = ReconcileTask("t");
  EXPECT_EQ(t.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(ConditionReason(t, "Submitted"), "False/PoolNotFound");
}

// #27 item 6: a pool task whose attempt failed with an infrastructure code gives its replica back
// at once: the next task takes it during the delay, and the retrying task is neither queued
// demand nor ahead of anybody until its next attempt is due; then it binds a free replica again.
TEST_F(AgentPoolReconcilerTest, ARetryingTaskGivesItsReplicaBackAndIsNotDemandDuringItsDelay) {
  ApplyPool(/*max=*/1);
  Object a = api::MakeObject(Kind::kAgentTask, "a");
  a.agent_task_spec().pool_ref = "p";
  a.agent_task_spec().input = "$ true";
  a.agent_task_spec().backoff_limit = 1;
  ASSERT_TRUE(store_->Apply({a}, {}).ok());
  ReconcilePool();
  const std::string replica = Replicas().at(0).metadata.name;
  MakeSandbox(replica);
  MakeReady(replica);
  Object a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kSubmitted);
  const std::string b = CreateTask("b");
  ReconcileTask("a");  // Running
  clouds_.agents().FailTurn(a_task.agent_task_status().session_id, "sandbox_error", "lost");
  a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(ConditionReason(a_task, "Submitted"), "False/Retrying");
  EXPECT_TRUE(a_task.agent_task_status().worker.empty());
  EXPECT_EQ(a_task.agent_task_status().attempts.at(0).worker, replica);
  EXPECT_EQ(BindingOf(*store_->Get({Kind::kAgentWorker, "default", replica})), "");

  Object pool = ReconcilePool();
  EXPECT_EQ(pool.agent_pool_status().queued, 1);  // b only: a waits out its delay
  Object b_task = ReconcileTask("b");             // a, created first, is not ahead of b now
  EXPECT_EQ(b_task.agent_task_status().worker, replica);
  EXPECT_EQ(b_task.agent_task_status().phase, TaskPhase::kSubmitted);

  clock_.Advance(seconds(10));
  a_task = ReconcileTask("a");
  EXPECT_EQ(a_task.agent_task_status().phase, TaskPhase::kQueued);
  EXPECT_EQ(ConditionReason(a_task, "Submitted"), "False/WaitingForReplica");
  EXPECT_EQ(ReconcilePool().agent_pool_status().queued, 1);  // a is demand again
}

}  // namespace
}  // namespace sbx::controller
