#include "controller/reconcilers/reconcile_skeleton.h"

#include <gtest/gtest.h>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;

struct CountingTarget : ReconcileTarget {
  bool prepared = false;
};

class ReconcileSkeletonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
    api::Object sb = api::MakeObject(api::Kind::kSandbox, "box");
    sb.sandbox_spec().sandbox_id = "default-box";
    ASSERT_TRUE(store_->Apply({sb}, {}).ok());
    steps_.prepare = [](CountingTarget& t) { t.prepared = true; };
    steps_.converge = [this](CountingTarget& t) -> api::StatusOr<ReconcileResult> {
      ++converged_;
      EXPECT_TRUE(t.prepared);
      reconcilers_internal::SetCondition(t.object, api::condition::kReady, ConditionStatus::kTrue,
                                         api::reason::kReady, "", clock_);
      return converge_result_;
    };
    steps_.finalize = [this](CountingTarget&) -> api::StatusOr<std::optional<ReconcileResult>> {
      ++finalized_;
      return finalize_result_;
    };
    steps_.record_outcome = [this](CountingTarget& t, const api::Status& status) {
      RecordSyncedError(t.object, status, clock_);
    };
    steps_.forget = [this](const api::ObjectKey&) { ++forgotten_; };
  }
  api::StatusOr<ReconcileResult> Run() { return RunReconcile(*store_, key_, {}, steps_); }
  api::Object Box() { return *store_->Get(key_); }

  testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  const api::ObjectKey key_{api::Kind::kSandbox, "default", "box"};
  ReconcileSteps<CountingTarget> steps_;
  api::StatusOr<ReconcileResult> converge_result_ = ReconcileResult::Done();
  api::StatusOr<std::optional<ReconcileResult>> finalize_result_ = std::optional<ReconcileResult>();
  int converged_ = 0, finalized_ = 0, forgotten_ = 0;
};

TEST_F(ReconcileSkeletonTest, AddsTheFinalizerConvergesAndWritesStatusOnlyWhenItChanged) {
  ASSERT_TRUE(Run().ok());
  EXPECT_EQ(converged_, 1);
  const api::Object first = Box();
  EXPECT_TRUE(reconcilers_internal::HasFinalizer(first));
  EXPECT_EQ(first.sandbox_status().observed_generation, first.metadata.generation);
  ASSERT_NE(api::FindCondition(first.conditions(), api::condition::kReady), nullptr);

  ASSERT_TRUE(Run().ok());  // nothing changed: nothing written
  EXPECT_EQ(converged_, 2);
  EXPECT_EQ(Box().metadata.resource_version, first.metadata.resource_version);
}

TEST_F(ReconcileSkeletonTest, AnErrorBecomesSyncedFalseWithItsClassAndIsReturned) {
  converge_result_ = api::UnavailableError("the API is down");
  auto r = Run();
  EXPECT_EQ(r.status().code(), api::StatusCode::kUnavailable);
  const api::Object box = Box();  // a named copy: the condition pointer must not dangle
  const api::Condition* synced = api::FindCondition(box.conditions(), api::condition::kSynced);
  ASSERT_NE(synced, nullptr);
  EXPECT_EQ(synced->status, ConditionStatus::kFalse);
  EXPECT_EQ(synced->reason, api::reason::kUnavailable);
  EXPECT_EQ(synced->message, "the API is down");
}

TEST_F(ReconcileSkeletonTest, FinalizesUntilCleanedUpThenRemovesTheFinalizerAndForgets) {
  ASSERT_TRUE(Run().ok());
  ASSERT_TRUE(store_->Delete(key_).ok());  // marks it deleted: our finalizer holds it
  finalize_result_ = std::optional(ReconcileResult::RequeueAfter(std::chrono::seconds(2)));
  auto r = Run();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->after, std::chrono::seconds(2));
  EXPECT_EQ(finalized_, 1);
  EXPECT_TRUE(store_->Get(key_).ok());

  finalize_result_ = std::optional<ReconcileResult>();
  ASSERT_TRUE(Run().ok());
  EXPECT_EQ(finalized_, 2);
  EXPECT_EQ(forgotten_, 1);
  EXPECT_EQ(store_->Get(key_).status().code(), api::StatusCode::kNotFound);
  EXPECT_EQ(converged_, 1);

  ASSERT_TRUE(Run().ok());  // gone: forgotten again, nothing else
  EXPECT_EQ(forgotten_, 2);
  EXPECT_EQ(finalized_, 2);
}

// steps.dependencies: an object that is gone is untracked in the reconciler's index, so the
// reconcilers need no forget step of their own for it.
TEST_F(ReconcileSkeletonTest, AnObjectThatIsGoneIsUntrackedInTheDependencyIndex) {
  DependencyIndex index;
  steps_.dependencies = &index;
  const api::ObjectKey worker{api::Kind::kAgentWorker, "default", "w"};
  index.SetDependencies(key_, {worker});
  ASSERT_TRUE(Run().ok());
  EXPECT_EQ(index.DependentsOf(worker), std::vector<api::ObjectKey>{key_});  // still there

  ASSERT_TRUE(store_->Delete(key_).ok());
  ASSERT_TRUE(Run().ok());  // finalized and gone
  EXPECT_TRUE(index.DependentsOf(worker).empty());
  EXPECT_EQ(forgotten_, 1);  // and the reconciler's own forget still runs
}

}  // namespace
}  // namespace sbx::controller
