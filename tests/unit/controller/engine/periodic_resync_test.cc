#include "controller/engine/periodic_resync.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/fake_clock.h"
#include "tests/unit/controller/engine/fake_watch_store.h"
#include "tests/unit/controller/engine/poll.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::ObjectKey;
using testing_internal::FakeWatchStore;
using testing_internal::PollUntil;
using testing_internal::RecordingEnqueuer;

PeriodicResyncOptions Options(std::chrono::milliseconds period, double u) {
  PeriodicResyncOptions options;
  options.period = period;
  options.random = [u] { return u; };
  return options;
}

TEST(PeriodicResyncTest, EnqueuesEveryObjectOncePerPeriod) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.Put(api::MakeObject(Kind::kSandbox, "a"));
  store.Put(api::MakeObject(Kind::kAgentWorker, "w"));
  RecordingEnqueuer out;
  PeriodicResync resync(store, clock, Options(60s, 0.5));
  std::jthread runner([&](std::stop_token stop) { resync.Run(out, stop); });

  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(59s);
  EXPECT_EQ(resync.passes(), 0);
  clock.Advance(1s);
  ASSERT_TRUE(PollUntil([&] { return resync.passes() == 1; }));
  EXPECT_EQ(out.keys().size(), 2u);
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(60s);
  ASSERT_TRUE(PollUntil([&] { return resync.passes() == 2; }));
  EXPECT_EQ(out.keys().size(), 4u);
}

TEST(PeriodicResyncTest, PeriodIsJitteredByTenPercent) {
  testing::FakeClock clock;
  FakeWatchStore store;
  RecordingEnqueuer out;
  PeriodicResync resync(store, clock, Options(100s, 0.0));
  std::jthread runner([&](std::stop_token stop) { resync.Run(out, stop); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(90s);  // 100 s · (1 - 0.1)
  ASSERT_TRUE(PollUntil([&] { return resync.passes() == 1; }));
}

TEST(PeriodicResyncTest, AFailedPassIsReportedAndRetriedNextPeriod) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.Put(api::MakeObject(Kind::kSandbox, "a"));
  store.FailWith(api::UnavailableError("locked"));
  std::atomic<int> errors{0};
  RecordingEnqueuer out;
  PeriodicResync resync(store, clock,
                        {.period = 10s,
                         .on_error = [&](std::string_view, const Status&) { ++errors; },
                         .random = [] { return 0.5; }});
  std::jthread runner([&](std::stop_token stop) { resync.Run(out, stop); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(10s);
  ASSERT_TRUE(PollUntil([&] { return resync.passes() == 1; }));
  EXPECT_EQ(errors.load(), 1);
  store.FailWith(api::OkStatus());
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(10s);
  ASSERT_TRUE(PollUntil([&] { return resync.passes() == 2; }));
  EXPECT_EQ(out.keys().size(), 1u);
}

}  // namespace
}  // namespace sbx::controller
