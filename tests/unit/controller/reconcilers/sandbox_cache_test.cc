#include "controller/reconcilers/sandbox_cache.h"

#include <gtest/gtest.h>

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
  EXPECT_TRUE(cache.HasTransitions("ws"));
}

TEST(SandboxCacheTest, CountsByState) {
  SandboxCache cache;
  cache.ReplaceSnapshot("ws", cache.BeginSweep("ws"),
                        {Sb("a", S::kRunning), Sb("b", S::kRunning), Sb("c", S::kStopped)});
  cache.Forget("ws", "c");
  auto counts = cache.CountByState();
  EXPECT_EQ(counts["RUNNING"], 2);
  EXPECT_EQ(counts.count("STOPPED"), 0u);
  EXPECT_FALSE(cache.HasTransitions("ws"));
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

}  // namespace
}  // namespace sbx::controller
