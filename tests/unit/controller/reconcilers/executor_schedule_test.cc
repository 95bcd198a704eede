#include "controller/reconcilers/executor_schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "api/conditions.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using namespace std::chrono_literals;
namespace condition = api::condition;
namespace reason = api::reason;

class ExecutorScheduleTest : public ::testing::Test {
 protected:
  void SetCondition(std::string_view type, ConditionStatus status, std::string_view why) {
    api::SetCondition(status_.conditions, {std::string(type), status, std::string(why), "", "", 1},
                      "t");
  }
  ExecutorFacts Facts(std::optional<Clock::SteadyTime> last_check = std::nullopt) {
    return ExecutorFactsOf(status_, "boot-1", last_check);
  }
  // A worker whose executor a probe saw running in boot-1, connected, probed and checked now.
  void Running() {
    SetCondition(condition::kExecutorRunning, ConditionStatus::kTrue, reason::kRunning);
    SetCondition(condition::kExecutorConnected, ConditionStatus::kTrue, reason::kConnected);
    status_.executor.launched_at = FormatRfc3339(clock_.Now());
    status_.executor.last_probe_at = FormatRfc3339(clock_.Now());
    status_.executor.probed_boot_id = "boot-1";
  }

  testing::FakeClock clock_;
  ExecutorScheduleOptions options_;
  ExecutorSchedule schedule_{options_};
  api::AgentWorkerStatus status_;
};

TEST_F(ExecutorScheduleTest, LaunchesAtOnceWhenNothingWasLaunchedSinceTheSandboxStarted) {
  EXPECT_TRUE(ExecutorSchedule::LaunchNow(Facts()));  // a new worker
  SetCondition(condition::kExecutorRunning, ConditionStatus::kFalse, reason::kSandboxNotRunning);
  EXPECT_TRUE(ExecutorSchedule::LaunchNow(Facts()));
  SetCondition(condition::kExecutorRunning, ConditionStatus::kFalse, reason::kSandboxStopped);
  EXPECT_TRUE(ExecutorSchedule::LaunchNow(Facts()));
  SetCondition(condition::kExecutorRunning, ConditionStatus::kUnknown, reason::kLaunching);
  EXPECT_FALSE(ExecutorSchedule::LaunchNow(Facts()));
  SetCondition(condition::kExecutorRunning, ConditionStatus::kFalse, reason::kMissingScope);
  EXPECT_FALSE(ExecutorSchedule::LaunchNow(Facts()));
  EXPECT_EQ(Facts().phase, ExecutorPhase::kDown);
}

TEST_F(ExecutorScheduleTest, ChecksAConnectedExecutorOnTheStatusInterval) {
  Running();
  const Clock::SteadyTime checked = clock_.Steady();
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 30s);
  clock_.Advance(29s);
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 1s);
  clock_.Advance(1s);
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 0s);
}

TEST_F(ExecutorScheduleTest, ChecksOftenWhileInDoubtAndAtOnceWithoutACacheOrAfterABoot) {
  Running();
  const Clock::SteadyTime checked = clock_.Steady();
  SetCondition(condition::kExecutorConnected, ConditionStatus::kFalse, reason::kDisconnected);
  EXPECT_TRUE(ExecutorSchedule::InDoubt(Facts(checked)));
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 1s);
  SetCondition(condition::kExecutorConnected, ConditionStatus::kFalse, "Pending");
  EXPECT_FALSE(ExecutorSchedule::InDoubt(Facts(checked)));
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 5s);  // connect_poll
  // A restart lost the cache: one early GET, no more.
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(), clock_.Steady()), 0s);
  status_.executor.probed_boot_id = "boot-0";
  EXPECT_TRUE(Facts(checked).rebooted);
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(checked), clock_.Steady()), 0s);
}

// Right after its own launch sbxd looks at 0.25, 0.5, 1, 2, 3 … s (an executor usually connects
// within a fraction of a second); a launch it did not see (a restart lost the cache) and an
// executor found down are looked at every verify_after_launch.
TEST_F(ExecutorScheduleTest, LooksSoonAfterItsOwnLaunchThenLessOften) {
  status_.executor.probed_boot_id = "boot-1";
  SetCondition(condition::kExecutorRunning, ConditionStatus::kUnknown, reason::kLaunching);
  const Clock::SteadyTime launched = clock_.Steady();
  const auto until_next = [&] {
    const ExecutorFacts f = ExecutorFactsOf(status_, "boot-1", clock_.Steady(), launched);
    EXPECT_EQ(f.phase, ExecutorPhase::kLaunched);
    return schedule_.UntilStatusCheck(f, clock_.Steady());
  };
  EXPECT_EQ(until_next(), 250ms);  // looked at the launch itself
  std::vector<std::chrono::milliseconds> looks;
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(until_next());
    looks.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Steady() - launched));
  }
  EXPECT_EQ(looks, (std::vector<std::chrono::milliseconds>{250ms, 500ms, 1s, 2s, 3s}));
  EXPECT_EQ(schedule_.UntilStatusCheck(Facts(clock_.Steady()), clock_.Steady()), 1s);
  SetCondition(condition::kExecutorRunning, ConditionStatus::kFalse, reason::kExecutorExited);
  EXPECT_EQ(schedule_.UntilStatusCheck(
                ExecutorFactsOf(status_, "boot-1", clock_.Steady(), launched), clock_.Steady()),
            1s);
}

TEST_F(ExecutorScheduleTest, ProbesOnTheProbeIntervalFromTheRecordedLastProbe) {
  Running();
  EXPECT_FALSE(schedule_.ProbeDue(Facts(), /*connected=*/true, clock_.Now()));
  clock_.Advance(4min + 59s);
  EXPECT_FALSE(schedule_.ProbeDue(Facts(), true, clock_.Now()));
  clock_.Advance(1s);
  EXPECT_TRUE(schedule_.ProbeDue(Facts(), true, clock_.Now()));
  // Never probed (an older sbxd's status), or a new boot: now.
  clock_.Advance(-5min);
  status_.executor.last_probe_at.clear();
  EXPECT_TRUE(schedule_.ProbeDue(Facts(), true, clock_.Now()));
  Running();
  status_.executor.probed_boot_id = "boot-0";
  EXPECT_TRUE(schedule_.ProbeDue(Facts(), true, clock_.Now()));
}

TEST_F(ExecutorScheduleTest, ALaunchedExecutorHasItsConnectGraceThenIsProbedUnlessConnected) {
  Running();
  SetCondition(condition::kExecutorRunning, ConditionStatus::kUnknown, reason::kLaunching);
  EXPECT_TRUE(schedule_.InConnectGrace(Facts(), /*connected=*/false, clock_.Now()));
  EXPECT_FALSE(schedule_.InConnectGrace(Facts(), /*connected=*/true, clock_.Now()));
  clock_.Advance(5s);
  EXPECT_FALSE(schedule_.InConnectGrace(Facts(), false, clock_.Now()));
  EXPECT_TRUE(schedule_.ProbeDue(Facts(), /*connected=*/false, clock_.Now()));
  EXPECT_FALSE(schedule_.ProbeDue(Facts(), /*connected=*/true, clock_.Now()));
  // Found missing or exited: no grace, the next look probes.
  SetCondition(condition::kExecutorRunning, ConditionStatus::kFalse,
               reason::kWorkspaceDirectoryMissing);
  clock_.Advance(-5s);
  EXPECT_FALSE(schedule_.InConnectGrace(Facts(), false, clock_.Now()));
  EXPECT_TRUE(schedule_.ProbeDue(Facts(), false, clock_.Now()));
}

TEST_F(ExecutorScheduleTest, CrashLoopDelayDoublesUpToTheCapAndAuthFailuresWaitLonger) {
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExitedOnStart", /*ran=*/false, 0), 10s);
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExitedOnStart", false, 1), 10s);
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExitedOnStart", false, 2), 20s);
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExitedOnStart", false, 4), 80s);
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExitedOnStart", false, 40), 5min);
  EXPECT_EQ(schedule_.CrashLoopDelay("ExecutorExited", /*ran=*/true, 3), 0s);
  EXPECT_EQ(schedule_.CrashLoopDelay(std::string(reason::kMissingScope), true, 0), 10min);
  EXPECT_EQ(schedule_.CrashLoopDelay(std::string(reason::kIpNotAuthorized), false, 1), 10min);
}

TEST_F(ExecutorScheduleTest, TheNextLaunchWaitsForTheRecordedTime) {
  EXPECT_EQ(ExecutorSchedule::UntilLaunchAllowed(status_.executor, clock_.Now()), 0s);
  status_.executor.next_launch_after = FormatRfc3339(clock_.Now() + 10min);
  EXPECT_EQ(ExecutorSchedule::UntilLaunchAllowed(status_.executor, clock_.Now()), 10min);
  clock_.Advance(9min);
  EXPECT_EQ(ExecutorSchedule::UntilLaunchAllowed(status_.executor, clock_.Now()), 1min);
  clock_.Advance(2min);
  EXPECT_EQ(ExecutorSchedule::UntilLaunchAllowed(status_.executor, clock_.Now()), 0s);
}

}  // namespace
}  // namespace sbx::controller
