#include "controller/reconcilers/internal/pending_estimate.h"

#include <gtest/gtest.h>

namespace sbx::controller::reconcilers_internal {
namespace {

using namespace std::chrono_literals;
using Looks = PendingEstimate::Looks;

TEST(PendingEstimateTest, NoAimUntilSomethingWasSeenRunning) {
  PendingEstimate e;
  EXPECT_FALSE(e.Next().has_value());
  e.Missed(400ms);
  EXPECT_FALSE(e.Next().has_value()) << "a miss alone says only that PENDING is longer";
}

// The aim is the shortest sighting; the probe halves the gap to the longest miss until it is
// within the tolerance, then only the aim remains.
TEST(PendingEstimateTest, ProbesHalfwayBetweenTheLongestMissAndTheShortestSighting) {
  PendingEstimate e;
  e.Sighted(1600ms);  // seen by a fast sweep: somewhere in PENDING's last second
  ASSERT_TRUE(e.Next().has_value());
  EXPECT_EQ(e.Next()->aim, 1600ms);
  EXPECT_EQ(e.Next()->probe, 800ms);
  e.Missed(800ms);
  EXPECT_EQ(e.Next()->probe, 1200ms);
  e.Sighted(1200ms);  // the probe found it
  EXPECT_EQ(e.Next()->aim, 1200ms);
  EXPECT_EQ(e.Next()->probe, 1000ms);
  e.Missed(1000ms);
  e.Sighted(1100ms);
  e.Missed(1050ms);  // 1,100 − 1,050 = the tolerance: done probing
  EXPECT_EQ(e.Next()->aim, 1100ms);
  EXPECT_FALSE(e.Next()->probe.has_value());
}

// PENDING got longer: the aim missed, which drops the sightings it contradicts.
TEST(PendingEstimateTest, AMissedAimDropsTheSightingsItContradicts) {
  PendingEstimate e;
  e.Sighted(1000ms);
  e.Sighted(1300ms);
  e.Missed(1000ms);
  ASSERT_TRUE(e.Next().has_value());
  EXPECT_EQ(e.Next()->aim, 1300ms);
  e.Missed(1300ms);
  EXPECT_FALSE(e.Next().has_value()) << "every sighting is contradicted: the fast period again";
}

// PENDING got shorter: once the old misses leave the window, probing finds the new time.
TEST(PendingEstimateTest, OldEvidenceLeavesTheWindowSoAShorterPendingIsFound) {
  PendingEstimate e;
  e.Missed(950ms);
  for (size_t i = 0; i < PendingEstimate::kWindow - 1; ++i) {
    e.Sighted(1000ms);
  }
  EXPECT_FALSE(e.Next()->probe.has_value());
  e.Sighted(1000ms);  // pushes the miss out
  ASSERT_TRUE(e.Next()->probe.has_value());
  EXPECT_EQ(*e.Next()->probe, 500ms);
}

}  // namespace
}  // namespace sbx::controller::reconcilers_internal
