#include "controller/reconcilers/sandbox_sweeper.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using sbx::testing::RecordingEnqueuer;

using namespace std::chrono_literals;

class SandboxSweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
    gc_ = std::make_unique<GarbageCollector>(*store_, cache_, clock_,
                                             GarbageCollectorOptions{1min, 0.1});
    sweeper_ = std::make_unique<SandboxSweeper>(*store_, clouds_, cache_, gc_.get(), clock_,
                                                SandboxSweeperOptions{60s, 0.1, 2s, 2});
  }
  void AddSandbox(const std::string& name, databricks::SandboxState state) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, name);
    o.sandbox_spec().sandbox_id = "default-" + name;
    ASSERT_TRUE(store_->Apply({o}, {}).ok());
    databricks::Sandbox sb;
    sb.sandbox_id = "default-" + name;
    sb.state = state;
    clouds_.api().Put(sb);
  }

  // A live sandbox that inventory records for an owner object that no longer exists.
  void AddOrphan(const std::string& id, Clock::WallTime recorded) {
    Store::InventoryRecord r;
    r.workspace = "default/default";
    r.resource_type = "sandbox";
    r.external_id = id;
    r.state = Store::InventoryState::kLive;
    r.owner = {api::Kind::kSandbox, "default", "gone"};
    r.owner_uid = "uid-gone";
    r.created_at = r.updated_at = FormatRfc3339(recorded);
    ASSERT_TRUE(store_->PutInventory(r).ok());
    databricks::Sandbox orphan;
    orphan.sandbox_id = id;
    orphan.state = databricks::SandboxState::kRunning;
    clouds_.api().Put(orphan);
  }

  // Polls until the fake has seen `n` LIST calls (the sweeper runs on its own thread).
  int WaitForLists(int n) {
    for (int i = 0; i < 2000 && clouds_.api().Calls("list") < n; ++i) {
      std::this_thread::sleep_for(1ms);
    }
    return clouds_.api().Calls("list");
  }

  // Polls until `cache` has counted `n` aimed looks that found the sandbox started: the page of
  // the LIST the fake answered has been applied.
  static void WaitForAimedHits(const SandboxCache& cache, int64_t n) {
    EXPECT_TRUE(testing::PollUntil([&] { return cache.aimed_looks().hits >= n; },
                                   testing::In(std::chrono::seconds(10)), 1ms))
        << "the sweeper applied the aimed look's page";
  }

  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  SandboxCache cache_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<GarbageCollector> gc_;
  std::unique_ptr<SandboxSweeper> sweeper_;
  RecordingEnqueuer out_;
};

TEST_F(SandboxSweeperTest, ListsInPagesAndEnqueuesOnlyWhatChanged) {
  for (const char* n : {"a", "b", "c", "d", "e"}) {
    AddSandbox(n, databricks::SandboxState::kRunning);
  }
  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_EQ(clouds_.api().Calls("list"), 3);  // ⌈5 / page size 2⌉
  EXPECT_EQ(out_.Take().size(), 5u);          // first sight of each
  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_TRUE(out_.Take().empty());

  clouds_.api().SetState("default-c", databricks::SandboxState::kStopped);  // auto-stop
  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  auto keys = out_.Take();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].name, "c");
  EXPECT_EQ(clouds_.api().Calls("get"), 0);
}

// Replicas splitting workspaces: a workspace another replica holds is neither listed nor
// garbage-collected here.
TEST_F(SandboxSweeperTest, SweepsOnlyTheWorkspacesThisReplicaOwns) {
  bool owned = false;
  SandboxSweeperOptions options{60s, 0.1, 2s, 2};
  std::vector<std::string> asked;
  options.owns_workspace = [&](const std::string& workspace) {
    asked.push_back(workspace);
    return owned;
  };
  SandboxSweeper sweeper(*store_, clouds_, cache_, gc_.get(), clock_, options);
  AddSandbox("a", databricks::SandboxState::kRunning);
  AddOrphan("default-orphan", clock_.Now() - 2min);
  ASSERT_TRUE(sweeper.SweepAll(out_, {}).ok());
  EXPECT_EQ(asked, std::vector<std::string>{"default/default"});
  EXPECT_EQ(clouds_.api().Calls("list"), 0);
  EXPECT_EQ(clouds_.api().Calls("delete"), 0);
  EXPECT_TRUE(out_.Take().empty());

  owned = true;  // taken over
  ASSERT_TRUE(sweeper.SweepAll(out_, {}).ok());
  EXPECT_GT(clouds_.api().Calls("list"), 0);
  EXPECT_EQ(clouds_.api().Calls("delete"), 1);  // the orphan, now that this replica owns it
}

TEST_F(SandboxSweeperTest, AFailedListChangesNothingAndSkipsGarbageCollection) {
  AddSandbox("a", databricks::SandboxState::kRunning);
  AddOrphan("default-orphan", clock_.Now());
  clock_.Advance(10min);

  clouds_.api().FailNext("list", api::UnavailableError("503"));
  EXPECT_FALSE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_EQ(cache_.Get("default/default", "default-a").knowledge,
            SandboxCache::Knowledge::kUnknown);
  EXPECT_TRUE(clouds_.api().Peek("default-orphan").has_value());
  EXPECT_EQ(sweeper_->sweep_errors_total(), 1);

  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_FALSE(clouds_.api().Peek("default-orphan").has_value());
}

TEST_F(SandboxSweeperTest, SweepsFastOnlyWhileSomethingIsInTransition) {
  AddSandbox("a", databricks::SandboxState::kRunning);
  std::jthread runner([&](std::stop_token stop) { sweeper_->Run(out_, stop); });
  ASSERT_EQ(WaitForLists(1), 1);
  // Steady: 10 fast periods (20 s) pass without another LIST (period is 60 s).
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(clock_.WaitForSleepers(1));
    clock_.Advance(2s);
  }
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  EXPECT_EQ(clouds_.api().Calls("list"), 1);

  databricks::Sandbox pending;
  pending.sandbox_id = "default-a";
  pending.state = databricks::SandboxState::kPending;
  cache_.Observe("default/default", pending);  // as after our own start
  clock_.Advance(2s);
  EXPECT_EQ(WaitForLists(2), 2);
  runner.request_stop();
}

// Issue #30, the wake path: once the cache has learned how long a start stays PENDING, the sweeper
// looks for a started sandbox when it is due to run (a probe halfway first), not on its fast
// period; and a start answered while the sweeper sleeps is planned at once.
TEST_F(SandboxSweeperTest, LooksForAStartedSandboxWhenItsLearnedPendingTimeEnds) {
  SandboxCache cache(&clock_);
  SandboxSweeper sweeper(*store_, clouds_, cache, nullptr, clock_,
                         SandboxSweeperOptions{60s, 0.1, 2s, 2});
  AddSandbox("a", databricks::SandboxState::kStopped);
  std::jthread runner([&](std::stop_token stop) { sweeper.Run(out_, stop); });
  ASSERT_EQ(WaitForLists(1), 1);
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  const auto start = [&] {
    clouds_.api().SetState("default-a", databricks::SandboxState::kStopped);
    cache.Observe("default/default", *clouds_.api().Peek("default-a"));
    clouds_.api().SetState("default-a", databricks::SandboxState::kPending);
    cache.Observe("default/default", *clouds_.api().Peek("default-a"));  // the start's answer
  };
  // Once a start is learned, its answer wakes the sweeper to plan the look. The test waits for
  // that plan before it moves the clock: planned after the clock moved, the look would be due
  // "now" and wait the sweeper's minimum sleep, which fake time never passes (a CI flake).
  const auto start_and_replan = [&] {
    const int64_t entered = clock_.sleeps_entered();
    start();
    ASSERT_TRUE(clock_.WaitForSleepsEntered(entered + 1)) << "the hook woke the sweeper";
  };

  start();  // nothing learned yet: found by the fast sweep 2 s later
  clouds_.api().SetState("default-a", databricks::SandboxState::kRunning);
  clock_.Advance(2s);
  ASSERT_EQ(WaitForLists(2), 2);
  ASSERT_TRUE(clock_.WaitForSleepers(1));

  start_and_replan();  // learned: at most 2 s. A probe at 1 s (the sweeper was asleep until the
                       // fast period)
  clock_.Advance(999ms);
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  EXPECT_EQ(clouds_.api().Calls("list"), 2);
  clock_.Advance(1ms);
  ASSERT_EQ(WaitForLists(3), 3) << "the probe";
  clouds_.api().SetState("default-a", databricks::SandboxState::kRunning);
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  clock_.Advance(1s);
  ASSERT_EQ(WaitForLists(4), 4) << "the aim";
  // The fake counts a LIST when it answers it; the sweeper applies the page after (a CI flake
  // read the cache in between).
  WaitForAimedHits(cache, 1);
  EXPECT_EQ(cache.Get("default/default", "default-a").sandbox.state,
            databricks::SandboxState::kRunning);
  EXPECT_EQ(cache.aimed_looks().misses, 1);
  EXPECT_EQ(cache.aimed_looks().hits, 1);

  // The page budget (2 pages a second here, one page per LIST) holds a page more than a LIST: an
  // aim 250 ms after its probe is not pushed back to the 500 ms spacing.
  for (const auto probe : {1500ms, 1750ms}) {
    ASSERT_TRUE(clock_.WaitForSleepers(1));
    const int lists = clouds_.api().Calls("list");
    start_and_replan();
    clock_.Advance(probe);
    ASSERT_EQ(WaitForLists(lists + 1), lists + 1) << "the probe at " << probe.count() << " ms";
    clouds_.api().SetState("default-a", databricks::SandboxState::kRunning);
    ASSERT_TRUE(clock_.WaitForSleepers(1));
    clock_.Advance(2s - probe);
    ASSERT_EQ(WaitForLists(lists + 2), lists + 2) << "the aim, at 2 s";
  }
  WaitForAimedHits(cache, 3);
  EXPECT_EQ(cache.aimed_looks().misses, 3);
  EXPECT_EQ(cache.aimed_looks().hits, 3);
  runner.request_stop();
}

// Issue #30: while the workspace's calls wait in a pacing line longer than fast_sweep_backlog
// (15 s by default), what a fast sweep would find only leads to calls at the back of that line:
// no fast sweep until the line is nearly through.
TEST_F(SandboxSweeperTest, NoFastSweepWhileTheWorkspacesPacingLineIsLong) {
  AddSandbox("a", databricks::SandboxState::kRunning);
  std::jthread runner([&](std::stop_token stop) { sweeper_->Run(out_, stop); });
  ASSERT_EQ(WaitForLists(1), 1);
  databricks::Sandbox pending;
  pending.sandbox_id = "default-a";
  pending.state = databricks::SandboxState::kPending;
  cache_.Observe("default/default", pending);
  clouds_.api().SetPacingBacklog(16s);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(clock_.WaitForSleepers(1));
    clock_.Advance(2s);
  }
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  EXPECT_EQ(clouds_.api().Calls("list"), 1) << "a pending sandbox, but a 16 s line";
  clouds_.api().SetPacingBacklog(15s);
  clock_.Advance(2s);
  EXPECT_EQ(WaitForLists(2), 2);
  runner.request_stop();
}

// A big workspace is fast-swept less often: the LIST pages may take at most
// fast_pages_per_second (here 2) of its budget. 10 sandboxes at page size 2 are 5 pages, so a fast
// sweep may come every 2.5 s, not every 2 s. Fast sweeps do not garbage-collect.
TEST_F(SandboxSweeperTest, FastSweepsOfABigWorkspaceAreSpacedByItsPageCount) {
  for (int i = 0; i < 10; ++i) {
    AddSandbox("s" + std::to_string(i), databricks::SandboxState::kPending);
  }
  std::jthread runner([&](std::stop_token stop) { sweeper_->Run(out_, stop); });
  ASSERT_EQ(WaitForLists(5), 5);  // the first (regular) sweep: 5 pages
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));  // a fast period, not yet the page budget
  EXPECT_EQ(clouds_.api().Calls("list"), 5);
  ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));  // 4 s ≥ 2.5 s: a fast sweep
  EXPECT_EQ(clouds_.api().Calls("list"), 10);

  // An orphan past GC's grace: fast sweeps leave it alone, the next regular sweep takes it.
  AddOrphan("default-orphan", clock_.Now() - 10min);
  for (int i = 0; i < 20; ++i) {  // 40 s: fast sweeps only (the period is 60 s ± 10%)
    ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));
  }
  // Every other 2 s step (11 sandboxes with the orphan: 6 pages, 3 s): 10 fast sweeps.
  EXPECT_EQ(clouds_.api().Calls("list"), 10 + 10 * 6);
  EXPECT_TRUE(clouds_.api().Peek("default-orphan").has_value());
  for (int i = 0; i < 15 && clouds_.api().Peek("default-orphan").has_value(); ++i) {
    ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));
  }
  EXPECT_FALSE(clouds_.api().Peek("default-orphan").has_value());
  runner.request_stop();
}

// Issue #12 item 12: a failed LIST marks the workspace's observation stale in the cache and
// enqueues its objects so they can say so — once per outage, not once per failed sweep — and the
// first LIST that succeeds again enqueues them all, so that they report Synced=True.
TEST_F(SandboxSweeperTest, AFailedListMarksTheWorkspaceStaleAndEnqueuesItsObjectsOncePerOutage) {
  AddSandbox("a", databricks::SandboxState::kRunning);
  AddSandbox("b", databricks::SandboxState::kRunning);
  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  out_.Take();

  clouds_.api().FailNext("list", api::UnavailableError("list sandboxes: 503"));
  EXPECT_FALSE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_EQ(out_.Take().size(), 2u);
  std::optional<SandboxCache::SweepFailure> failing = cache_.FailingSweep("default/default");
  ASSERT_TRUE(failing.has_value());
  EXPECT_EQ(failing->reason, "Unavailable");
  EXPECT_EQ(cache_.Get("default/default", "default-a").knowledge,
            SandboxCache::Knowledge::kPresent);  // the last known state stays

  clock_.Advance(1min);
  clouds_.api().FailNext("list", api::UnavailableError("list sandboxes: 503"));
  EXPECT_FALSE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_TRUE(out_.Take().empty());  // the same outage: nothing new to report
  EXPECT_EQ(cache_.FailingSweep("default/default")->failures, 2);
  EXPECT_EQ(sweeper_->SweepErrorsByWorkspace(),
            (std::map<std::string, int64_t>{{"default/default", 2}}));

  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());  // nothing changed live, yet both are told
  EXPECT_EQ(out_.Take().size(), 2u);
  EXPECT_FALSE(cache_.FailingSweep("default/default").has_value());
  ASSERT_TRUE(sweeper_->SweepAll(out_, {}).ok());
  EXPECT_TRUE(out_.Take().empty());
}

// While a workspace's LIST fails, what the cache says is in transition is last known, not
// current: no fast sweeps (they would retry the failing API every fast period), only the retry
// after period/4 (here 15 s).
TEST_F(SandboxSweeperTest, AFailingWorkspaceIsNotFastSweptWhileItsListFails) {
  AddSandbox("a", databricks::SandboxState::kPending);
  std::jthread runner([&](std::stop_token stop) { sweeper_->Run(out_, stop); });
  for (int i = 0; i < 2000 && clouds_.api().Calls("list") < 1; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(clouds_.api().Calls("list"), 1);
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  clouds_.api().FailNext("list", api::UnavailableError("list sandboxes: 503"));
  ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));  // a fast sweep, which fails
  ASSERT_EQ(clouds_.api().Calls("list"), 2);
  ASSERT_TRUE(cache_.FailingSweep("default/default").has_value());
  for (int i = 0; i < 7; ++i) {  // 14 s: the sandbox is still PENDING in the cache
    ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));
  }
  EXPECT_EQ(clouds_.api().Calls("list"), 2);
  ASSERT_TRUE(clock_.AdvanceAndWaitForNextSleep(2s));  // 16 s ≥ 15 s: the retry
  EXPECT_EQ(clouds_.api().Calls("list"), 3);
  EXPECT_FALSE(cache_.FailingSweep("default/default").has_value());
  runner.request_stop();
}

}  // namespace
}  // namespace sbx::controller
