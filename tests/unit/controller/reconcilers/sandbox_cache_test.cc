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

}  // namespace
}  // namespace sbx::controller
