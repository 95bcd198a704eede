#include "controller/reconcilers/sandbox_usage.h"

#include <gtest/gtest.h>

namespace sbx::controller {
namespace {

Clock::WallTime At(const char* text) { return *ParseRfc3339(text); }

TEST(SandboxUsageTest, RunningTimeIsCountedInPiecesThatNeitherOverlapNorLeaveGaps) {
  api::SandboxUsage usage;
  // Not running: nothing opens.
  EXPECT_FALSE(CountRunning(usage, false, At("2026-12-04T10:00:00Z"), true));
  EXPECT_EQ(usage, api::SandboxUsage{});

  // RUNNING observed: an interval opens, nothing is counted yet.
  EXPECT_FALSE(CountRunning(usage, true, At("2026-12-04T10:00:00.100Z"), true));
  EXPECT_EQ(usage.running_since, "2026-12-04T10:00:00.100Z");
  EXPECT_EQ(usage.running_millis, 0);

  // Still running, no write due: left open.
  EXPECT_FALSE(CountRunning(usage, true, At("2026-12-04T10:00:30Z"), false));
  EXPECT_EQ(usage.running_since, "2026-12-04T10:00:00.100Z");
  EXPECT_EQ(api::RunningMillisAt(usage, At("2026-12-04T10:00:30Z")), 29'900);

  // A checkpoint: the piece closes, the next opens where it ended.
  std::optional<RunningPiece> piece =
      CountRunning(usage, true, At("2026-12-04T10:01:00.100Z"), true);
  ASSERT_TRUE(piece);
  EXPECT_EQ(piece->millis(), 60'000);
  EXPECT_EQ(usage.running_millis, 60'000);
  EXPECT_EQ(usage.running_since, "2026-12-04T10:01:00.100Z");
  const int64_t next_from = piece->to_ms;

  // Stopped: the last piece starts where the previous ended, and nothing stays open.
  piece = CountRunning(usage, false, At("2026-12-04T10:01:10.600Z"), false);
  ASSERT_TRUE(piece);
  EXPECT_EQ(piece->from_ms, next_from);
  EXPECT_EQ(piece->millis(), 10'500);
  EXPECT_EQ(usage.running_millis, 70'500);
  EXPECT_EQ(usage.running_since, "");
  EXPECT_EQ(api::RunningMillisAt(usage, At("2026-12-04T11:00:00Z")), 70'500);

  // A pass retried with the same status finds the same piece (the ledger keeps it once).
  api::SandboxUsage retried;
  retried.running_since = "2026-12-04T10:01:00.100Z";
  retried.running_millis = 60'000;
  std::optional<RunningPiece> again =
      CountRunning(retried, false, At("2026-12-04T10:01:10.700Z"), false);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->from_ms, next_from);
}

TEST(SandboxUsageTest, ACheckpointIsDueOnlyForAnIntervalOpenThatLong) {
  api::SandboxUsage usage;
  EXPECT_FALSE(CheckpointDue(usage, At("2026-12-04T10:00:00Z"), std::chrono::seconds(60)));
  usage.running_since = "2026-12-04T10:00:00.000Z";
  EXPECT_FALSE(CheckpointDue(usage, At("2026-12-04T10:00:59.999Z"), std::chrono::seconds(60)));
  EXPECT_TRUE(CheckpointDue(usage, At("2026-12-04T10:01:00Z"), std::chrono::seconds(60)));
}

TEST(SandboxUsageTest, AClockThatSteppedBackCountsNothing) {
  api::SandboxUsage usage;
  usage.running_since = "2026-12-04T10:00:00.000Z";
  EXPECT_FALSE(CountRunning(usage, false, At("2026-12-04T09:59:00Z"), false));
  EXPECT_EQ(usage.running_millis, 0);
  EXPECT_EQ(usage.running_since, "");
}

TEST(SandboxUsageTest, AnIntervalOpensWhenUpdateTimeSaysItBeganIfThatLiesBetweenObservations) {
  const auto seen = At("2026-12-04T10:00:00Z");  // last seen PENDING
  const auto now = At("2026-12-04T10:00:01Z");   // first seen RUNNING
  // update_time between the two: the transition.
  const std::optional<Clock::WallTime> began = RunningBegan("2026-12-04T10:00:00.200Z", seen, now);
  ASSERT_TRUE(began);
  api::SandboxUsage usage;
  EXPECT_FALSE(CountRunning(usage, true, now, false, began));
  EXPECT_EQ(usage.running_since, "2026-12-04T10:00:00.200Z");
  // Not after the last sighting of it not running (a service that keeps update_time at the
  // create or the last PATCH), not in the future, not without a sighting, not unparsable.
  EXPECT_FALSE(RunningBegan("2026-12-04T09:59:59.900Z", seen, now));
  EXPECT_FALSE(RunningBegan("2026-12-04T10:00:00Z", seen, now));
  EXPECT_FALSE(RunningBegan("2026-12-04T10:00:01.001Z", seen, now));
  EXPECT_FALSE(RunningBegan("2026-12-04T10:00:00.200Z", std::nullopt, now));
  EXPECT_FALSE(RunningBegan("", seen, now));
}

}  // namespace
}  // namespace sbx::controller
