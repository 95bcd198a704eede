#include "controller/reconcilers/sandbox_cache.h"

#include <gtest/gtest.h>

#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

databricks::Sandbox Sb(const std::string& id, databricks::SandboxState state) {
  databricks::Sandbox sb;
  sb.sandbox_id = id;
  sb.state = state;
  return sb;
}

using K = SandboxCache::Knowledge;
using S = databricks::SandboxState;
using namespace std::chrono_literals;

TEST(SandboxCacheTest, UnknownBeforeFirstSnapshotAbsentAfter) {
  SandboxCache cache;
  EXPECT_EQ(cache.Get("ws", "a").knowledge, K::kUnknown);
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {Sb("b", S::kRunning)});
  EXPECT_EQ(cache.Get("ws", "a").knowledge, K::kAbsent);
  EXPECT_EQ(cache.Get("ws", "b").knowledge, K::kPresent);
  EXPECT_EQ(cache.Get("other", "b").knowledge, K::kUnknown);
  EXPECT_EQ(cache.SnapshotSize("ws"), 1);
}

TEST(SandboxCacheTest, ReportsWhatChangedBetweenSnapshots) {
  SandboxCache cache;
  auto changed = cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"),
                                       {Sb("a", S::kRunning), Sb("b", S::kRunning)});
  EXPECT_EQ(changed.size(), 2u);
  changed = cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"),
                                  {Sb("a", S::kRunning), Sb("b", S::kStopped)});
  EXPECT_EQ(changed, std::vector<std::string>{"b"});
  changed = cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {Sb("b", S::kStopped)});
  EXPECT_EQ(changed, std::vector<std::string>{"a"});
}

TEST(SandboxCacheTest, ASnapshotDoesNotOverwriteANewerDirectObservation) {
  SandboxCache cache;
  const uint64_t ticket = cache.BeginSweep("ws");
  // While the LIST is in flight we create "new" and start "a".
  cache.Observe("ws", Sb("new", S::kPending));
  cache.Observe("ws", Sb("a", S::kPending));
  cache.ReplaceSnapshot("ws", ticket, {Sb("a", S::kStopped)});
  EXPECT_EQ(cache.Get("ws", "new").knowledge, K::kPresent);
  EXPECT_EQ(cache.Get("ws", "a").sandbox.state, S::kPending);
  EXPECT_TRUE(cache.NextLook("ws", {}).has_value()) << "in transition";
}

TEST(SandboxCacheTest, CountsByState) {
  SandboxCache cache;
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"),
                        {Sb("a", S::kRunning), Sb("b", S::kRunning), Sb("c", S::kStopped)});
  cache.Forget("ws", "c");
  auto counts = cache.CountByState();
  EXPECT_EQ(counts["RUNNING"], 2);
  EXPECT_EQ(counts.count("STOPPED"), 0u);
  EXPECT_FALSE(cache.NextLook("ws", {}).has_value()) << "nothing in transition";
}

// Issue #12 item 12: a failed LIST keeps the snapshot as the last known state and says so, with a
// message that stays the same for the whole outage (no count, no per-sweep time: a long outage
// must not rewrite every object's status on every sweep).
TEST(SandboxCacheTest, RemembersFailingSweepsUntilTheNextSnapshotWithAStableMessage) {
  SandboxCache cache;
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {Sb("a", S::kRunning)});
  EXPECT_FALSE(cache.FailingSweep("ws").has_value());

  const Clock::WallTime t0 = std::chrono::sys_days{std::chrono::September / 1 / 2026};
  cache.BeginSweep("ws");
  EXPECT_TRUE(cache.RecordSweepFailure(
      "ws", api::UnavailableError("list sandboxes: 503 Service Unavailable"), t0));
  std::optional<SandboxCache::SweepFailure> failing = cache.FailingSweep("ws");
  ASSERT_TRUE(failing.has_value());
  EXPECT_EQ(failing->reason, "Unavailable");
  EXPECT_EQ(failing->message,
            "the LIST sweeps of workspace ws have failed since 2026-09-01T00:00:00Z; state and "
            "Ready are as last observed: list sandboxes: 503 Service Unavailable");
  EXPECT_EQ(failing->failures, 1);
  EXPECT_EQ(cache.Get("ws", "a").knowledge, K::kPresent);  // last known, kept
  EXPECT_FALSE(cache.FailingSweep("other").has_value());

  // The same outage, a minute later and with another transient error: nothing to tell.
  EXPECT_FALSE(cache.RecordSweepFailure("ws", api::InternalError("connection refused"),
                                        t0 + std::chrono::minutes(1)));
  EXPECT_EQ(cache.FailingSweep("ws")->message, failing->message);
  EXPECT_EQ(cache.FailingSweep("ws")->failures, 2);

  // A failure that needs a person keeps its own reason; the run still started at t0.
  EXPECT_TRUE(
      cache.RecordSweepFailure("ws", api::UnauthenticatedError("list sandboxes: 401 invalid token"),
                               t0 + std::chrono::minutes(2)));
  EXPECT_EQ(cache.FailingSweep("ws")->reason, "Unauthenticated");
  EXPECT_EQ(cache.FailingSweep("ws")->since, t0);

  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {Sb("a", S::kStopped)});
  EXPECT_FALSE(cache.FailingSweep("ws").has_value());
}

// Issue #30, the wake path: with a clock, the cache learns how long our starts stay PENDING
// (measured from the start's answer to the sweep that saw RUNNING) and aims the next start's look
// there, with a probe halfway first; creates and what we did not start are not aimed at. Without a
// clock nothing changes (the tests above).
TEST(SandboxCacheTest, AimsTheLookAfterAStartAtTheLearnedEndOfItsPending) {
  testing::FakeClock clock;
  SandboxCache cache(&clock);
  int nudges = 0;
  cache.SetLookHook([&] { ++nudges; });
  const auto sweep = [&](S state) {
    cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {Sb("a", state)});
  };
  const auto start = [&] {
    cache.Observe("ws", Sb("a", S::kStopped));
    cache.Observe("ws", Sb("a", S::kPending));  // the start's answer
    return clock.Steady();
  };
  const Clock::SteadyTime never = clock.Steady() + 1h;
  sweep(S::kStopped);

  const Clock::SteadyTime t0 = start();
  EXPECT_EQ(cache.NextLook("ws", t0 + 1s), t0 + 1s) << "nothing learned: the fast cadence";
  EXPECT_EQ(nudges, 0);
  clock.Advance(1200ms);
  sweep(S::kRunning);  // PENDING took at most 1.2 s
  EXPECT_FALSE(cache.NextLook("ws", never).has_value());

  const Clock::SteadyTime t1 = start();
  EXPECT_EQ(nudges, 1);
  EXPECT_EQ(cache.NextLook("ws", never), t1 + 600ms) << "the probe";
  clock.Advance(600ms);
  sweep(S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t1 + 800ms) << "the probe missed: again 200 ms later";
  clock.Advance(200ms);
  sweep(S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t1 + 1000ms);
  clock.Advance(200ms);
  sweep(S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t1 + 1200ms) << "no probe at or past the aim: the aim";
  clock.Advance(200ms);
  sweep(S::kRunning);
  EXPECT_EQ(cache.aimed_looks().hits, 1);
  EXPECT_EQ(cache.aimed_looks().misses, 3);

  // Only the first probe's miss is evidence (600 ms), not those of the looks again.
  const Clock::SteadyTime t2 = start();
  EXPECT_EQ(cache.NextLook("ws", never), t2 + 900ms) << "halfway between 600 and 1,200 ms";
  clock.Advance(900ms);
  sweep(S::kRunning);  // the probe found it: 900 ms is the aim from now on
  const Clock::SteadyTime t3 = start();
  EXPECT_EQ(cache.NextLook("ws", never), t3 + 750ms);

  clock.Advance(750ms);
  sweep(S::kRunning);

  // A create is not aimed at (creates come in bursts: its look is the fast cadence), nor is a
  // PENDING the sweep found but we did not cause.
  cache.Observe("ws", Sb("new", S::kPending));
  const Clock::SteadyTime t4 = clock.Steady();
  EXPECT_EQ(cache.NextLook("ws", t4 + 1s), t4 + 1s);
  clock.Advance(300ms);
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"),
                        {Sb("a", S::kRunning), Sb("new", S::kRunning), Sb("x", S::kPending)});
  EXPECT_EQ(cache.NextLook("ws", t4 + 5s), t4 + 5s);
  cache.Observe("ws", Sb("new2", S::kPending));
  EXPECT_EQ(cache.NextLook("ws", t4 + 5s), t4 + 5s);
  EXPECT_EQ(nudges, 3) << "the starts t1, t2 and t3 only";
}

// Issue #30, the wake's tail: a workspace's first starts borrow its creates' estimate, but a
// borrowed look is never later than the fast cadence; the start's own evidence replaces it.
TEST(SandboxCacheTest, AWorkspacesFirstStartIsAimedByItsCreatesButNoLaterThanTheCadence) {
  testing::FakeClock clock;
  SandboxCache cache(&clock);
  int nudges = 0;
  cache.SetLookHook([&] { ++nudges; });
  const auto sweep = [&](const std::string& ws, S state) {
    cache.ReplaceSnapshot(ws, cache.BeginSweep(ws), {Sb("a", state)});
  };
  const auto start = [&](const std::string& ws) {
    cache.Observe(ws, Sb("a", S::kStopped));
    cache.Observe(ws, Sb("a", S::kPending));  // the start's answer
    return clock.Steady();
  };
  const Clock::SteadyTime never = clock.Steady() + 1h;
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"), {});
  cache.Observe("ws", Sb("a", S::kPending));  // our create's answer
  clock.Advance(1s);
  sweep("ws", S::kRunning);  // a create's PENDING: at most 1 s
  sweep("ws", S::kStopped);  // stopped for idleness
  EXPECT_EQ(nudges, 0) << "a create is not aimed at";

  const Clock::SteadyTime t0 = start("ws");
  EXPECT_EQ(nudges, 1);
  EXPECT_EQ(cache.NextLook("ws", never), t0 + 500ms) << "the creates' probe";
  EXPECT_EQ(cache.NextLook("ws", t0 + 300ms), t0 + 300ms) << "never later than the cadence";
  clock.Advance(500ms);
  sweep("ws", S::kPending);  // a miss, for the starts
  EXPECT_EQ(cache.NextLook("ws", never), t0 + 700ms) << "probes again 200 ms later";
  clock.Advance(200ms);
  sweep("ws", S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t0 + 900ms);
  clock.Advance(200ms);
  sweep("ws", S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t0 + 1s) << "the creates' aim";
  clock.Advance(100ms);
  sweep("ws", S::kRunning);
  EXPECT_EQ(cache.aimed_looks().hits, 1);
  EXPECT_EQ(cache.aimed_looks().misses, 3);
  sweep("ws", S::kStopped);

  // Learned: the start's own evidence (the first probe's miss at 500 ms, a sighting at 1 s), not
  // capped.
  const Clock::SteadyTime t1 = start("ws");
  EXPECT_EQ(cache.NextLook("ws", never), t1 + 750ms);
  EXPECT_EQ(cache.NextLook("ws", t1 + 300ms), t1 + 750ms) << "a learned look skips the cadence";

  // A start that outlasts what was learned: after the aim misses, looks every 200 ms, never
  // later than the cadence, until it is seen RUNNING.
  clock.Advance(750ms);
  sweep("ws", S::kRunning);  // the probe found it
  sweep("ws", S::kStopped);
  const Clock::SteadyTime t3 = start("ws");
  EXPECT_EQ(cache.NextLook("ws", never), t3 + 625ms) << "the probe";
  clock.Advance(625ms);
  sweep("ws", S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t3 + 750ms) << "the aim (825 ms would be past it)";
  clock.Advance(125ms);
  sweep("ws", S::kPending);  // the aim missed
  EXPECT_EQ(cache.NextLook("ws", never), t3 + 950ms) << "looks again soon";
  EXPECT_EQ(cache.NextLook("ws", t3 + 800ms), t3 + 800ms) << "never later than the cadence";
  clock.Advance(200ms);
  sweep("ws", S::kPending);
  EXPECT_EQ(cache.NextLook("ws", never), t3 + 1150ms) << "and again";
  clock.Advance(200ms);
  sweep("ws", S::kRunning);
  EXPECT_FALSE(cache.NextLook("ws", never).has_value());
  // The looks again (misses at 950 and 1,150 ms) are no evidence: the next start probes between
  // the last real miss (750 ms) and the 1 s sighting, not near this one-off 1.35 s.
  sweep("ws", S::kStopped);
  const Clock::SteadyTime t4 = start("ws");
  EXPECT_EQ(cache.NextLook("ws", never), t4 + 875ms);

  // Creates that took 5 s: the borrowed aim would be late, so the cadence looks first.
  cache.ReplaceSnapshot("slow", cache.BeginSweep("slow"), {});
  cache.Observe("slow", Sb("a", S::kPending));
  clock.Advance(5s);
  sweep("slow", S::kRunning);
  sweep("slow", S::kStopped);
  const Clock::SteadyTime t2 = start("slow");
  EXPECT_EQ(cache.NextLook("slow", t2 + 1s), t2 + 1s);
}

}  // namespace
}  // namespace sbx::controller
