#include "controller/reconcilers/workspace_reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "api/usage.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using namespace std::chrono_literals;

constexpr char kWs[] = "default/team";

class WorkspaceReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(":memory:", SqliteStore::Options{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    reconciler_ = std::make_unique<WorkspaceReconciler>(*store_, clouds_, clock_, &dependencies_);
  }

  // Workspace "team" with both sections set, unless `edit` says otherwise.
  void ApplyWorkspace(std::function<void(api::WorkspaceSpec&)> edit = {}) {
    api::Object o = api::MakeObject(api::Kind::kWorkspace, "team");
    api::WorkspaceSpec& spec = o.workspace_spec();
    spec.databricks.host = "https://dbc-team.cloud.databricks.com";
    spec.databricks.token_from.env = "SBX_SECRET_TEAM_TOKEN";
    spec.openai.api_key_from.env = "SBX_SECRET_TEAM_OPENAI";
    if (edit) {
      edit(spec);
    }
    auto applied = store_->Apply({o}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  void ApplySandbox(const std::string& name, const std::string& workspace_ref) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, name);
    o.sandbox_spec().sandbox_id = "default-" + name;
    o.sandbox_spec().workspace_ref = workspace_ref;
    auto applied = store_->Apply({o}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  void ApplyInlineWorker(const std::string& name, const std::string& workspace_ref) {
    api::Object o = api::MakeObject(api::Kind::kAgentWorker, name);
    api::AgentWorkerSpec& spec = o.agent_worker_spec();
    spec.sandbox = api::SandboxSpec{};
    spec.sandbox->workspace_ref = workspace_ref;
    spec.agent.model = "gpt-5-codex";
    auto applied = store_->Apply({o}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  api::StatusOr<ReconcileResult> Reconcile() {
    return reconciler_->Reconcile({api::Kind::kWorkspace, "default", "team"}, {});
  }
  // A reconcile once the next credentials check is due (check_interval later: a reconcile
  // before then, unless the spec changed, checks nothing).
  api::StatusOr<ReconcileResult> Recheck() {
    clock_.Advance(5min);
    return Reconcile();
  }
  api::StatusOr<api::Object> Get() {
    return store_->Get({api::Kind::kWorkspace, "default", "team"});
  }
  const api::Condition& Cond(const std::string& type) {
    static api::Condition none;
    auto o = Get();
    EXPECT_TRUE(o.ok()) << o.status();
    last_ = o.ok() ? *o : api::Object{};
    const api::Condition* c = api::FindCondition(last_.conditions(), type);
    return c != nullptr ? *c : none;
  }
  bool HasCondition(const std::string& type) {
    Cond(type);
    return api::FindCondition(last_.conditions(), type) != nullptr;
  }

  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  DependencyIndex dependencies_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<WorkspaceReconciler> reconciler_;
  api::Object last_;
};

TEST_F(WorkspaceReconcilerTest, ChecksEachSideWithOneCheapCallAndIsReady) {
  ApplyWorkspace();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReconcileResult::RequeueAfter(5min));
  EXPECT_EQ(Cond("DatabricksReady").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("OpenAIReady").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(last_.workspace_status().observed_generation, last_.metadata.generation);
  // One LIST page on each side, nothing else.
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 1);
  EXPECT_EQ(clouds_.api(kWs).MutatingCalls(), 0);
  EXPECT_EQ(clouds_.agents(kWs).Calls("list"), 1);
  EXPECT_EQ(last_.metadata.finalizers,
            std::vector<std::string>{std::string(kWorkspaceInUseFinalizer)});

  // The same answer again writes nothing.
  const int64_t version = last_.metadata.resource_version;
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Get()->metadata.resource_version, version);
}

// Usage and budget (DESIGN §8.2): status.usage is the period's sum of the usage ledger, priced;
// BudgetExceeded turns True (one Warning event) when a limit is reached, without a new
// credentials check — a task's end reconciles its Workspace, and that must cost no cloud call.
TEST_F(WorkspaceReconcilerTest, UsageIsTheLedgersSumAndAReachedBudgetIsAConditionAndAnEvent) {
  ApplyWorkspace([](api::WorkspaceSpec& s) {
    s.pricing = api::WorkspacePricing{.input_tokens_per_million = 3'000'000,  // 3 per million
                                      .output_tokens_per_million = 5'000'000};
    s.budget = api::WorkspaceBudget{.period = api::BudgetPeriod::kDay, .tokens = 1000};
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("BudgetExceeded").reason, "WithinBudget");
  const api::BudgetPeriodBounds day = api::PeriodAt(api::BudgetPeriod::kDay, clock_.Now());
  EXPECT_EQ(last_.workspace_status().usage.period, day.name);
  EXPECT_EQ(last_.workspace_status().usage.cost, "0.000000");

  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch())
          .count();
  const api::ObjectKey task{api::Kind::kAgentTask, "default", "t"};
  ASSERT_TRUE(
      store_->RecordUsage({kWs, "uid-1", 1, task, now_ms, 600, 100, 300, 50, 0, false}).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kFalse);  // 900 of 1000
  // Not counted: another workspace's, and yesterday's.
  ASSERT_TRUE(
      store_->RecordUsage({"default/other", "uid-2", 1, task, now_ms, 500, 0, 500, 0, 0, true})
          .ok());
  ASSERT_TRUE(
      store_->RecordUsage({kWs, "uid-3", 1, task, now_ms - 86'400'000, 500, 0, 500, 0, 0, true})
          .ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kFalse);

  ASSERT_TRUE(store_->RecordUsage({kWs, "uid-1", 2, task, now_ms, 60, 0, 40, 0, 0, true}).ok());
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("BudgetExceeded").reason, "BudgetExceeded");
  EXPECT_NE(Cond("BudgetExceeded").message.find("tokens: 1000 used of 1000 today (" + day.name),
            std::string::npos)
      << Cond("BudgetExceeded").message;
  const api::WorkspaceUsage& usage = last_.workspace_status().usage;
  EXPECT_EQ(usage.input_tokens, 660);
  EXPECT_EQ(usage.cached_input_tokens, 100);
  EXPECT_EQ(usage.output_tokens, 340);
  EXPECT_EQ(usage.reasoning_tokens, 50);
  EXPECT_EQ(usage.tasks, 1);
  // 660 × 3 + 340 × 5 micro-units (a cached price unset is the input price).
  EXPECT_EQ(usage.cost, "0.003680");
  // Looked at again by the day's end at the latest.
  EXPECT_EQ(r->action, ReconcileResult::Action::kRequeueAfter);
  EXPECT_LE(r->after, std::chrono::ceil<std::chrono::milliseconds>(day.end - clock_.Now()));
  ASSERT_TRUE(Reconcile().ok());
  auto events = store_->ListEvents(api::ObjectKey{api::Kind::kWorkspace, "default", "team"});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(std::count_if(events->begin(), events->end(),
                          [](const Store::Event& e) {
                            return e.reason == "BudgetExceeded" && e.type == "Warning" &&
                                   e.count == 1;
                          }),
            1);
  // Five reconciles, one credentials check.
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 1);
  EXPECT_EQ(clouds_.agents(kWs).Calls("list"), 1);

  // Raised (a spec change: checked again) → within budget; removed → no condition at all.
  ApplyWorkspace([](api::WorkspaceSpec& s) {
    s.budget = api::WorkspaceBudget{.period = api::BudgetPeriod::kDay, .tokens = 5000};
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kFalse);
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 2);
  EXPECT_EQ(last_.workspace_status().usage.cost, "");  // no pricing now
  ApplyWorkspace();
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_FALSE(HasCondition("BudgetExceeded"));
}

TEST_F(WorkspaceReconcilerTest, ComputeIsWhatItsSandboxesRanAndAComputeBudgetHolds) {
  ApplyWorkspace([](api::WorkspaceSpec& s) {
    s.pricing = api::WorkspacePricing{.compute_per_hour = 2'000'000};  // 2 per hour
    s.budget = api::WorkspaceBudget{.compute_hours = 1'000'000};       // 1 hour a month
  });
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch())
          .count();
  // A task's own compute overlaps its sandbox's (tasks share sandboxes): not summed.
  const api::ObjectKey task{api::Kind::kAgentTask, "default", "t"};
  ASSERT_TRUE(store_
                  ->RecordUsage(
                      {kWs, "task-uid", 1, task, now_ms, 0, 0, 0, 0, 9'000'000, true, "Succeeded"})
                  .ok());
  // Two pieces of a sandbox's RUNNING time: 30 min + 29 min 59.999 s.
  const api::ObjectKey sandbox{api::Kind::kSandbox, "default", "fixer"};
  ASSERT_TRUE(store_
                  ->RecordUsage({kWs, "sb-uid", now_ms - 3'600'000, sandbox, now_ms - 1'800'000, 0,
                                 0, 0, 0, 1'800'000, false, ""})
                  .ok());
  ASSERT_TRUE(store_
                  ->RecordUsage({kWs, "sb-uid", now_ms - 1'800'000, sandbox, now_ms, 0, 0, 0, 0,
                                 1'799'999, false, ""})
                  .ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kFalse);
  EXPECT_EQ(last_.workspace_status().usage.compute_millis, 3'599'999);
  EXPECT_EQ(last_.workspace_status().usage.tasks, 1);
  EXPECT_EQ(last_.workspace_status().usage.cost, "1.999999");  // 2/h × 3599.999 s, half up

  ASSERT_TRUE(
      store_->RecordUsage({kWs, "sb-uid", now_ms, sandbox, now_ms + 1, 0, 0, 0, 0, 1, false, ""})
          .ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("BudgetExceeded").status, ConditionStatus::kTrue);
  EXPECT_NE(Cond("BudgetExceeded").message.find("computeHours: 3600 s used of 1 h"),
            std::string::npos)
      << Cond("BudgetExceeded").message;
  EXPECT_EQ(last_.workspace_status().usage.cost, "2.000000");
}

TEST_F(WorkspaceReconcilerTest, ARejectedTokenIsUnauthenticatedWithAStableMessage) {
  ApplyWorkspace();
  clouds_.api(kWs).FailNext(
      "list", api::UnauthenticatedError("HTTP 401 UNAUTHENTICATED: bad token (request_id r-1)"));
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();  // a failed check is status, not a reconcile error
  EXPECT_EQ(*r, ReconcileResult::RequeueAfter(5min));
  EXPECT_EQ(Cond("DatabricksReady").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("DatabricksReady").reason, "Unauthenticated");
  EXPECT_EQ(Cond("DatabricksReady").message, "HTTP 401 UNAUTHENTICATED: bad token");
  EXPECT_EQ(Cond("OpenAIReady").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("Ready").reason, "Unauthenticated");
  EXPECT_EQ(Cond("Ready").message, "Databricks: HTTP 401 UNAUTHENTICATED: bad token");

  // Fixed (a rotated secret): Ready again on the next check (not before it is due: a reconcile
  // in between, e.g. for the usage, calls no cloud).
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 1);
  ASSERT_TRUE(Recheck().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
}

TEST_F(WorkspaceReconcilerTest, CredentialsThatCannotBeResolvedSendNothing) {
  ApplyWorkspace();
  clouds_.SetResolveError(
      kWs, api::FailedPreconditionError("Workspace team: OpenAI base URL needs a key of its own")
               .WithReason("CredentialsMissing"));
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("DatabricksReady").reason, "CredentialsMissing");
  EXPECT_EQ(Cond("OpenAIReady").reason, "CredentialsMissing");
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("Ready").reason, "CredentialsMissing");
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 0);
  EXPECT_EQ(clouds_.agents(kWs).Calls("list"), 0);

  // A secret that is not there (no reason of its own) is CredentialsMissing too.
  clouds_.SetResolveError(
      kWs, api::FailedPreconditionError("spec.databricks.tokenFrom: secret file \"t\" not found"));
  ASSERT_TRUE(Recheck().ok());
  EXPECT_EQ(Cond("DatabricksReady").reason, "CredentialsMissing");
  // A reference the operator does not allow keeps its own reason.
  clouds_.SetResolveError(kWs,
                          api::InvalidArgumentError("tokenFrom: DATABRICKS_TOKEN is not allowed")
                              .WithReason("SecretNotAllowed"));
  ASSERT_TRUE(Recheck().ok());
  EXPECT_EQ(Cond("DatabricksReady").reason, "SecretNotAllowed");
  EXPECT_EQ(Cond("DatabricksReady").status, ConditionStatus::kFalse);
}

TEST_F(WorkspaceReconcilerTest, UnreachableIsFalseAndAnErrorWhileObservingIsUnknown) {
  ApplyWorkspace();
  clouds_.api(kWs).FailNext("list", api::UnavailableError("connection refused"));
  clouds_.agents(kWs).FailNext("list", api::ResourceExhaustedError("HTTP 429 rate_limit"));
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReconcileResult::RequeueAfter(30s));  // looked at again sooner
  EXPECT_EQ(Cond("DatabricksReady").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("DatabricksReady").reason, "Unreachable");
  EXPECT_EQ(Cond("OpenAIReady").status, ConditionStatus::kUnknown);
  EXPECT_EQ(Cond("OpenAIReady").reason, "RateLimited");
  // False wins over Unknown; both messages are shown.
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kFalse);
  EXPECT_EQ(Cond("Ready").reason, "Unreachable");
  EXPECT_EQ(Cond("Ready").message, "Databricks: connection refused; OpenAI: HTTP 429 rate_limit");

  clouds_.agents(kWs).FailNext("list", api::InternalError("HTTP 500"));
  ASSERT_TRUE(Recheck().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kUnknown);
  EXPECT_EQ(Cond("Ready").reason, "InternalError");
}

TEST_F(WorkspaceReconcilerTest, ASectionLeftUnsetIsNotChecked) {
  ApplyWorkspace([](api::WorkspaceSpec& spec) { spec.openai = {}; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_FALSE(HasCondition("OpenAIReady"));
  EXPECT_EQ(clouds_.agents(kWs).Calls("list"), 0);
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 1);

  // Neither section: nothing to check, nothing sent; a condition of a section that went away
  // goes with it.
  ApplyWorkspace([](api::WorkspaceSpec& spec) {
    spec.openai = {};
    spec.databricks = {};
    spec.limits.max_sandboxes = 3;
  });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Cond("Ready").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Ready").reason, "NothingToCheck");
  EXPECT_FALSE(HasCondition("DatabricksReady"));
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), 1);
}

TEST_F(WorkspaceReconcilerTest, ReadinessGatesNothingItIsOnlyReported) {
  // The Workspace's check failing is not a reconcile error (no retry storm, no Synced).
  ApplyWorkspace();
  clouds_.api(kWs).FailNext("list", api::PermissionDeniedError("HTTP 403"));
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cond("Ready").reason, "PermissionDenied");
  EXPECT_FALSE(HasCondition("Synced"));
}

TEST_F(WorkspaceReconcilerTest, DeletionWaitsForEveryObjectThatUsesIt) {
  ApplyWorkspace();
  ApplySandbox("a", "team");
  ApplySandbox("elsewhere", "other");
  ApplyInlineWorker("w", "team");
  ApplyInlineWorker("w-default", "default");
  ASSERT_TRUE(Reconcile().ok());  // holds the finalizer from now on

  auto deleted = store_->Delete({api::Kind::kWorkspace, "default", "team"});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, DeleteOutcome::kMarkedForDeletion);
  const int list_calls = clouds_.api(kWs).Calls("list");
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReconcileResult::RequeueAfter(30s));
  ASSERT_TRUE(Get().ok()) << "deleted while Sandbox a and AgentWorker w still use it";
  EXPECT_EQ(Cond("Deleting").status, ConditionStatus::kTrue);
  EXPECT_EQ(Cond("Deleting").reason, "InUse");
  EXPECT_EQ(Cond("Deleting").message,
            "waiting for 2 objects that use this workspace to be deleted: Sandbox a, "
            "AgentWorker w");
  EXPECT_EQ(clouds_.api(kWs).Calls("list"), list_calls);  // no checks while deleting

  // A change to a user (its deletion above all) enqueues the Workspace: the Manager enqueues the
  // transitive dependents of a changed key.
  const api::ObjectKey ws{api::Kind::kWorkspace, "default", "team"};
  const api::ObjectKey a{api::Kind::kSandbox, "default", "a"};
  const api::ObjectKey w{api::Kind::kAgentWorker, "default", "w"};
  EXPECT_EQ(dependencies_.TransitiveDependentsOf(a), std::vector<api::ObjectKey>{ws});
  EXPECT_EQ(dependencies_.TransitiveDependentsOf(w), std::vector<api::ObjectKey>{ws});

  ASSERT_TRUE(store_->Delete(a).ok());
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(Get().ok());
  EXPECT_EQ(Cond("Deleting").message,
            "waiting for 1 object that uses this workspace to be deleted: AgentWorker w");

  ASSERT_TRUE(store_->Delete(w).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Get().status().code(), api::StatusCode::kNotFound);
  EXPECT_EQ(dependencies_.size(), 0);
  // The objects of other workspaces were never waited for, nor touched.
  EXPECT_TRUE(store_->Get({api::Kind::kSandbox, "default", "elsewhere"}).ok());
}

TEST_F(WorkspaceReconcilerTest, AWorkspaceNobodyUsesGoesAtOnce) {
  ApplyWorkspace();
  ApplySandbox("elsewhere", "other");
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(store_->Delete({api::Kind::kWorkspace, "default", "team"}).ok());
  ASSERT_TRUE(Get().ok());  // the finalizer holds it until the reconciler has looked
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReconcileResult::Done());
  EXPECT_EQ(Get().status().code(), api::StatusCode::kNotFound);
  // Gone: a later reconcile of its key is a no-op.
  ASSERT_TRUE(Reconcile().ok());
}

}  // namespace
}  // namespace sbx::controller
