#include "controller/engine/manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "controller/base/classify_error.h"
#include "controller/base/inline_wait.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/engine/poll.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::ObjectKey;
using api::StatusOr;
using testing_internal::PollUntil;

ObjectKey Key(Kind kind, const std::string& name) { return ObjectKey{kind, "default", name}; }

// A reconciler whose behaviour per call is scripted by the test. Thread-safe.
class ScriptedReconciler final : public Reconciler {
 public:
  using Behaviour =
      std::function<StatusOr<ReconcileResult>(const ObjectKey&, int call, std::stop_token)>;
  ScriptedReconciler(Kind kind, Behaviour behaviour) : kind_(kind), behaviour_(behaviour) {}

  Kind kind() const override { return kind_; }
  StatusOr<ReconcileResult> Reconcile(const ObjectKey& key, std::stop_token stop) override {
    int call;
    {
      std::lock_guard lock(mu_);
      call = ++calls_[key];
      max_concurrent_ = std::max(max_concurrent_, ++in_flight_[key]);
    }
    struct Leave {
      ScriptedReconciler* r;
      ObjectKey k;
      ~Leave() {
        std::lock_guard lock(r->mu_);
        --r->in_flight_[k];
      }
    } leave{this, key};
    return behaviour_(key, call, stop);
  }

  int calls(const ObjectKey& key) const {
    std::lock_guard lock(mu_);
    auto it = calls_.find(key);
    return it == calls_.end() ? 0 : it->second;
  }
  int max_concurrent() const {
    std::lock_guard lock(mu_);
    return max_concurrent_;
  }

 private:
  const Kind kind_;
  const Behaviour behaviour_;
  mutable std::mutex mu_;
  std::map<ObjectKey, int> calls_;      // Guarded by mu_.
  std::map<ObjectKey, int> in_flight_;  // Guarded by mu_.
  int max_concurrent_ = 0;              // Guarded by mu_.
};

class RecordingObserver final : public ReconcileObserver {
 public:
  void OnReconciled(const ReconcileRecord& record) override {
    std::lock_guard lock(mu_);
    records_.push_back(record);
  }
  std::vector<ReconcileRecord> records() const {
    std::lock_guard lock(mu_);
    return records_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<ReconcileRecord> records_;  // Guarded by mu_.
};

class ManagerTest : public ::testing::Test {
 protected:
  void StartWith(ScriptedReconciler::Behaviour behaviour, int workers = 2,
                 std::function<StatusOr<bool>(const ObjectKey&)> owns = nullptr) {
    reconciler_ = std::make_unique<ScriptedReconciler>(Kind::kSandbox, std::move(behaviour));
    manager_ = std::make_unique<Manager>(clock_, ManagerOptions{.workers = workers,
                                                                .backoff = {},
                                                                .random = [] { return 0.5; },
                                                                .defer_pacing = defer_pacing_});
    if (owns) {
      manager_->SetOwnership(std::move(owns));
    }
    manager_->Register(*reconciler_);
    manager_->SetObserver(&observer_);
    manager_->Start();
  }
  bool defer_pacing_ = false;
  // Waits until `key` has been reconciled `n` times AND the worker has acted on the result.
  bool WaitForReconciles(int64_t n, std::chrono::milliseconds timeout = 10s) {
    return PollUntil(
        [&] {
          return manager_->Stats().reconciles_total >= n &&
                 static_cast<int64_t>(observer_.records().size()) >= n;
        },
        timeout);
  }

  testing::FakeClock clock_;
  RecordingObserver observer_;
  std::unique_ptr<ScriptedReconciler> reconciler_;
  std::unique_ptr<Manager> manager_;  // declared last: stopped before the rest is destroyed
  const ObjectKey a_ = Key(Kind::kSandbox, "a");
};

TEST_F(ManagerTest, ReconcilesAnEnqueuedKeyOnce) {
  StartWith([](auto&, int, auto) { return ReconcileResult::Done(); });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  EXPECT_EQ(reconciler_->calls(a_), 1);
  const ManagerStats s = manager_->Stats();
  EXPECT_EQ(s.queue.waiting, 0);
  EXPECT_EQ(s.queue.depth, 0);
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 0);
  ASSERT_EQ(observer_.records().size(), 1u);
  EXPECT_TRUE(observer_.records()[0].status.ok());
  EXPECT_EQ(observer_.records()[0].result, ReconcileResult::Done());
}

// Replicas splitting workspaces: a key another replica owns never reaches the reconciler, and
// a store error while deciding is retried like any transient error.
TEST_F(ManagerTest, KeysThisReplicaDoesNotOwnAreDroppedBeforeTheReconciler) {
  const ObjectKey mine = Key(Kind::kSandbox, "mine");
  const ObjectKey theirs = Key(Kind::kSandbox, "theirs");
  const ObjectKey unsure = Key(Kind::kSandbox, "unsure");
  std::atomic<int> asked_unsure{0};
  StartWith([](auto&, int, auto) { return ReconcileResult::Done(); }, 2,
            [&](const ObjectKey& key) -> StatusOr<bool> {
              if (key == unsure && asked_unsure.fetch_add(1) == 0) {
                return api::UnavailableError("store restarting");
              }
              return key.name != "theirs";
            });
  manager_->Enqueue(theirs);
  manager_->Enqueue(mine);
  manager_->Enqueue(unsure);
  ASSERT_TRUE(PollUntil([&] { return manager_->Stats().not_owned_total == 1; }, 10s));
  ASSERT_TRUE(WaitForReconciles(1));
  EXPECT_EQ(reconciler_->calls(mine), 1);
  EXPECT_EQ(reconciler_->calls(theirs), 0);
  EXPECT_EQ(manager_->queue().NumRequeues(theirs), 0);
  // The unsure key waits on the backoff, then is reconciled.
  ASSERT_TRUE(PollUntil([&] { return manager_->Stats().queue.waiting == 1; }, 10s));
  EXPECT_EQ(reconciler_->calls(unsure), 0);
  clock_.Advance(2s);
  ASSERT_TRUE(WaitForReconciles(2));
  EXPECT_EQ(reconciler_->calls(unsure), 1);
  EXPECT_EQ(manager_->Stats().transient_errors_total, 1);
}

TEST_F(ManagerTest, TransientErrorIsRequeuedWithBackoff) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    if (call <= 2) {
      return api::UnavailableError("503 from the sandbox API");
    }
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  const auto t1 = clock_.Steady();
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 1);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), t1 + 1s);
  EXPECT_EQ(observer_.records()[0].error->reason, "Unavailable");

  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(2));
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 2);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), t1 + 1s + 2s);  // doubled

  clock_.Advance(2s);
  ASSERT_TRUE(WaitForReconciles(3));
  EXPECT_EQ(reconciler_->calls(a_), 3);
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 0);  // success forgets the failures
  EXPECT_FALSE(manager_->queue().ReadyAt(a_).has_value());
  EXPECT_EQ(manager_->Stats().transient_errors_total, 2);
}

TEST_F(ManagerTest, RetryAfterFromTheServerIsHonoured) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    if (call == 1) {
      return api::ResourceExhaustedError("429").WithRetryAfter(20s);
    }
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 20s);
  EXPECT_EQ(observer_.records()[0].error->reason, "RateLimited");
  clock_.Advance(20s);
  ASSERT_TRUE(WaitForReconciles(2));
}

// Issue #25: a call inside a reconcile may not sleep out a retry; the worker thread tells it so
// (inline_wait.h), and the requeue honours the wait the call handed back.
TEST_F(ManagerTest, AReconcileRunsWithNoInlineWaitAndItsHandedBackWaitIsTheRequeue) {
  std::atomic<bool> saw_zero_limit = false;
  StartWith([&](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    saw_zero_limit = InlineWaitLimit() == std::optional<std::chrono::milliseconds>(0ms);
    if (call == 1) {
      return api::UnavailableError("503").WithRetryAfter(3s);
    }
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  EXPECT_TRUE(saw_zero_limit);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 3s);
  EXPECT_FALSE(InlineWaitLimit().has_value()) << "only the worker's reconcile is limited";
  clock_.Advance(3s);
  ASSERT_TRUE(WaitForReconciles(2));
}

// Issue #25: a failing server's Retry-After is the requeue itself for the first three failures in
// a row (random 503s do not grow into a long backoff): 1 s, 1 s, 1 s, then 1 s, 2 s as the
// backoff counts from there.
TEST_F(ManagerTest, AServerFailuresRetryAfterIsTheDelayForThreeFailuresInARow) {
  StartWith([](auto&, int, auto) -> StatusOr<ReconcileResult> {
    return api::UnavailableError("503").WithRetryAfter(1s);
  });
  manager_->Enqueue(a_);
  const std::chrono::seconds waits[] = {1s, 1s, 1s, 1s, 2s};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WaitForReconciles(i + 1));
    EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + waits[i]) << i;
    clock_.Advance(waits[i]);
  }
}

// Issue #30: a call's wait for its pacing token handed back is no failure. The key runs as its
// own owner (its place in line is kept under its key), comes back exactly at that place, and its
// backoff does not grow: a real 429 after many deferrals still waits 1 s, not 2^n.
TEST_F(ManagerTest, APacingWaitHandedBackIsRequeuedAtItsTimeWithoutGrowingTheBackoff) {
  std::atomic<bool> owned_by_key = false;
  defer_pacing_ = true;  // sbxd --pacing-give-back
  StartWith([&](auto& key, int call, auto) -> StatusOr<ReconcileResult> {
    owned_by_key = InlineWaitOwner() == key.ToString();
    if (call <= 5) {
      return PacingDeferred("paced", 300ms);
    }
    return api::ResourceExhaustedError("429").WithRetryAfter(1s);
  });
  manager_->Enqueue(a_);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WaitForReconciles(i + 1));
    EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 300ms) << i;
    EXPECT_EQ(manager_->queue().NumRequeues(a_), 0) << i;
    clock_.Advance(300ms);
  }
  EXPECT_TRUE(owned_by_key);
  ASSERT_TRUE(WaitForReconciles(6));
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 1s) << "the first failure's wait";
}

// ... while a 429's Retry-After (congestion) stays a minimum under the growing backoff.
TEST_F(ManagerTest, ACongestionsRetryAfterIsAMinimumUnderTheGrowingBackoff) {
  StartWith([](auto&, int, auto) -> StatusOr<ReconcileResult> {
    return api::ResourceExhaustedError("429").WithRetryAfter(1s);
  });
  manager_->Enqueue(a_);
  const std::chrono::seconds waits[] = {1s, 2s, 4s};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitForReconciles(i + 1));
    EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + waits[i]) << i;
    clock_.Advance(waits[i]);
  }
}

// A terminal error is tried again only after a long backoff that grows (30 s, 60 s, … 10 min),
// never at once — but a change of the object (a new enqueue) brings it back immediately.
TEST_F(ManagerTest, TerminalErrorIsRetriedOnlyAfterALongGrowingBackoff) {
  StartWith([](auto&, int, auto) -> StatusOr<ReconcileResult> {
    return api::PermissionDeniedError("403: missing scope api.agents.environments.connect");
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  const auto t1 = clock_.Steady();
  EXPECT_EQ(manager_->Stats().terminal_errors_total, 1);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), t1 + 30s);
  EXPECT_EQ(observer_.records()[0].error->reason, "PermissionDenied");
  clock_.Advance(29s);
  EXPECT_FALSE(WaitForReconciles(2, 200ms));
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(2));
  EXPECT_EQ(manager_->queue().ReadyAt(a_), t1 + 30s + 60s);  // doubled
  // A later change (a new enqueue) brings it back at once.
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(3));
  EXPECT_EQ(reconciler_->calls(a_), 3);
}

TEST_F(ManagerTest, ExceptionIsCaughtAndRequeuedAsInternal) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    if (call == 1) {
      throw std::runtime_error("yaml-cpp blew up");
    }
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  const ReconcileRecord first = observer_.records()[0];
  EXPECT_EQ(first.status.code(), api::StatusCode::kInternal);
  EXPECT_NE(first.status.message().find("yaml-cpp blew up"), std::string::npos);
  EXPECT_TRUE(first.error->transient());
  EXPECT_EQ(manager_->Stats().exceptions_total, 1);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 1s);
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(2));
  EXPECT_TRUE(observer_.records()[1].status.ok());
}

TEST_F(ManagerTest, RequeueAfterIsHonouredAndResetsBackoff) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    if (call == 1) {
      return api::UnavailableError("flaky");
    }
    if (call == 2) {
      return ReconcileResult::RequeueAfter(30s);  // e.g. sandbox still PENDING
    }
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(2));
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 0);
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 30s);
  clock_.Advance(29s);
  EXPECT_EQ(reconciler_->calls(a_), 2);
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(3));
}

TEST_F(ManagerTest, RequeueAfterZeroIsRateLimitedNotAHotLoop) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    return call == 1 ? ReconcileResult::RequeueAfter(0ms) : ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  EXPECT_EQ(manager_->queue().ReadyAt(a_), clock_.Steady() + 1s);
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 1);
}

// #30: the AgentWorker stores a new session and launches into it on the next pass. Before,
// that requeue was rate-limited: after two failed passes, the launch waited 4 s of backoff.
TEST_F(ManagerTest, AContinueRunsTheNextPassAtOnceAfterFailures) {
  StartWith([](auto&, int call, auto) -> StatusOr<ReconcileResult> {
    if (call <= 2) {
      return api::UnavailableError("flaky");
    }
    return call == 3 ? ReconcileResult::Continue() : ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(WaitForReconciles(1));
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForReconciles(2));
  clock_.Advance(2s);
  ASSERT_TRUE(WaitForReconciles(4));  // the continue's pass, without the clock moving
  EXPECT_EQ(manager_->queue().NumRequeues(a_), 0);
}

TEST_F(ManagerTest, NeverRunsTwoReconcilesOfOneKeyAtOnce) {
  StartWith(
      [](auto&, int, auto) {
        std::this_thread::yield();
        return ReconcileResult::Done();
      },
      /*workers=*/4);
  for (int i = 0; i < 1000; ++i) {
    manager_->Enqueue(Key(Kind::kSandbox, "k" + std::to_string(i % 5)));
  }
  ASSERT_TRUE(PollUntil([&] {
    const ManagerStats s = manager_->Stats();
    return s.queue.depth == 0 && s.queue.processing == 0;
  }));
  EXPECT_EQ(reconciler_->max_concurrent(), 1);
  for (int i = 0; i < 5; ++i) {
    EXPECT_GE(reconciler_->calls(Key(Kind::kSandbox, "k" + std::to_string(i))), 1);
  }
}

TEST_F(ManagerTest, StopDrainsInFlightReconciles) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;  // Guarded by mu.
  std::atomic<bool> started{false}, finished{false};
  StartWith([&](auto&, int, auto) {
    started = true;
    std::unique_lock lock(mu);
    cv.wait_for(lock, 10s, [&] { return release; });
    finished = true;
    return ReconcileResult::Done();
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(PollUntil([&] { return started.load(); }));
  std::atomic<bool> stopped{false};
  std::jthread stopper([&] {
    manager_->Stop();
    stopped = true;
  });
  ASSERT_TRUE(PollUntil([&] { return manager_->queue().ShuttingDown(); }));
  EXPECT_FALSE(stopped.load());  // the reconcile is still running: Stop waits for it
  manager_->Enqueue(Key(Kind::kSandbox, "after-stop"));  // intake is closed
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(PollUntil([&] { return stopped.load(); }));
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(reconciler_->calls(Key(Kind::kSandbox, "after-stop")), 0);
}

TEST_F(ManagerTest, CancelledStopAbortsInFlightReconciles) {
  std::atomic<bool> started{false}, saw_stop{false};
  StartWith([&](auto&, int, std::stop_token stop) -> StatusOr<ReconcileResult> {
    started = true;
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    saw_stop = cv.wait_for(lock, stop, 10s, [] { return false; }) || stop.stop_requested();
    return api::CancelledError("shutting down");
  });
  manager_->Enqueue(a_);
  ASSERT_TRUE(PollUntil([&] { return started.load(); }));
  std::stop_source cancel;
  cancel.request_stop();
  manager_->Stop(cancel.get_token());
  EXPECT_TRUE(saw_stop.load());
}

TEST_F(ManagerTest, ChangeToADependencyEnqueuesItsDependents) {
  ScriptedReconciler workers(Kind::kAgentWorker,
                             [](auto&, int, auto) { return ReconcileResult::Done(); });
  reconciler_ = std::make_unique<ScriptedReconciler>(
      Kind::kSandbox, [](auto&, int, auto) { return ReconcileResult::Done(); });
  manager_ = std::make_unique<Manager>(clock_);
  manager_->Register(*reconciler_);
  manager_->Register(workers);
  manager_->Start();

  const ObjectKey w1 = Key(Kind::kAgentWorker, "w1");
  const ObjectKey w2 = Key(Kind::kAgentWorker, "w2");
  const ObjectKey ws = Key(Kind::kWorkspace, "default");
  manager_->dependencies().Track(w1, a_);
  manager_->dependencies().Track(w2, Key(Kind::kSandbox, "other"));
  manager_->dependencies().Track(a_, ws);
  manager_->Enqueue(ws);  // Workspace → Sandbox a → AgentWorker w1
  ASSERT_TRUE(PollUntil([&] { return reconciler_->calls(a_) == 1 && workers.calls(w1) == 1; }));
  EXPECT_EQ(workers.calls(w2), 0);
  // No Workspace reconciler is registered: its key is dropped, not retried.
  ASSERT_TRUE(PollUntil([&] { return manager_->Stats().unhandled_kind_total == 1; }));
  EXPECT_EQ(manager_->queue().NumRequeues(ws), 0);
  manager_->Stop();
}

TEST_F(ManagerTest, EnqueueOneWakesTheKeyAloneNotItsDependents) {
  ScriptedReconciler workers(Kind::kAgentWorker,
                             [](auto&, int, auto) { return ReconcileResult::Done(); });
  reconciler_ = std::make_unique<ScriptedReconciler>(
      Kind::kSandbox, [](auto&, int, auto) { return ReconcileResult::Done(); });
  // One worker: keys are reconciled in the order they were queued.
  ManagerOptions one_worker;
  one_worker.workers = 1;
  manager_ = std::make_unique<Manager>(clock_, one_worker);
  manager_->Register(*reconciler_);
  manager_->Register(workers);
  manager_->Start();

  const ObjectKey w1 = Key(Kind::kAgentWorker, "w1");
  manager_->dependencies().Track(w1, a_);
  manager_->EnqueueOne(a_);
  ASSERT_TRUE(PollUntil([&] { return reconciler_->calls(a_) == 1; }));
  manager_->Enqueue(Key(Kind::kSandbox, "marker"));  // queued after a_: done means a_'s are too
  ASSERT_TRUE(PollUntil([&] { return reconciler_->calls(Key(Kind::kSandbox, "marker")) == 1; }));
  EXPECT_EQ(workers.calls(w1), 0);
  manager_->Stop();
}

TEST(ManagerDeathTest, TwoReconcilersForOneKindIsABug) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  testing::FakeClock clock;
  ScriptedReconciler r1(Kind::kSandbox, [](auto&, int, auto) { return ReconcileResult::Done(); });
  ScriptedReconciler r2(Kind::kSandbox, [](auto&, int, auto) { return ReconcileResult::Done(); });
  Manager manager(clock);
  manager.Register(r1);
  EXPECT_DEATH(manager.Register(r2), "two reconcilers for kind Sandbox");
}

}  // namespace
}  // namespace sbx::controller
