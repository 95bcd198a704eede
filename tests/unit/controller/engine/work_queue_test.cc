#include "controller/engine/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/fake_clock.h"
#include "tests/unit/controller/engine/poll.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::ObjectKey;
using testing_internal::PollUntil;

ObjectKey Sb(const std::string& name) { return ObjectKey{Kind::kSandbox, "default", name}; }

// Factor 1: delays are exactly 1 s, 2 s, 4 s, …
Backoff NoJitter() {
  return Backoff(BackoffPolicy{}, [] { return 0.5; });
}

class WorkQueueTest : public ::testing::Test {
 protected:
  // Waits until the delay thread has moved `n` keys into the ready queue.
  bool WaitForLen(int n) {
    return PollUntil([&] { return queue_.Len() >= n; });
  }

  testing::FakeClock clock_;
  WorkQueue queue_{clock_, NoJitter()};
};

TEST_F(WorkQueueTest, AddDeduplicatesQueuedKeys) {
  queue_.Add(Sb("a"));
  queue_.Add(Sb("a"));
  queue_.Add(Sb("b"));
  queue_.Add(Sb("a"));
  EXPECT_EQ(queue_.Len(), 2);
  EXPECT_EQ(queue_.Get(), Sb("a"));
  EXPECT_EQ(queue_.Get(), Sb("b"));
  EXPECT_EQ(queue_.Len(), 0);
  EXPECT_EQ(queue_.Stats().adds_total, 2);
  EXPECT_EQ(queue_.Stats().gets_total, 2);
  EXPECT_EQ(queue_.Stats().processing, 2);
}

TEST_F(WorkQueueTest, DoesNotHandOutAKeyThatIsBeingProcessed) {
  queue_.Add(Sb("a"));
  ASSERT_EQ(queue_.Get(), Sb("a"));
  queue_.Add(Sb("a"));
  queue_.Add(Sb("a"));
  queue_.Add(Sb("b"));
  EXPECT_EQ(queue_.Len(), 1);  // only b: a is dirty, not queued
  EXPECT_EQ(queue_.Get(), Sb("b"));
  EXPECT_EQ(queue_.Len(), 0);
}

TEST_F(WorkQueueTest, ReAddedWhileProcessingIsQueuedOnceWhenDone) {
  queue_.Add(Sb("a"));
  ASSERT_EQ(queue_.Get(), Sb("a"));
  queue_.Add(Sb("a"));
  queue_.Add(Sb("a"));
  queue_.Done(Sb("a"));
  EXPECT_EQ(queue_.Len(), 1);
  EXPECT_EQ(queue_.Get(), Sb("a"));
  queue_.Done(Sb("a"));
  EXPECT_EQ(queue_.Len(), 0);  // not dirty any more: Done does not re-queue
}

TEST_F(WorkQueueTest, NeverHandsOneKeyToTwoWorkersUnderStress) {
  constexpr int kKeys = 7;
  constexpr int kAdds = 1000;
  std::mutex mu;
  std::map<ObjectKey, int> in_flight;  // Guarded by mu.
  std::map<ObjectKey, int> handled;    // Guarded by mu.
  int max_concurrent = 0;              // Guarded by mu.
  std::atomic<int> gets{0};

  std::vector<std::jthread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&](std::stop_token stop) {
      while (auto key = queue_.Get(stop)) {
        {
          std::lock_guard lock(mu);
          max_concurrent = std::max(max_concurrent, ++in_flight[*key]);
          ++handled[*key];
        }
        std::this_thread::yield();  // widen the window in which a second worker could enter
        {
          std::lock_guard lock(mu);
          --in_flight[*key];
        }
        ++gets;
        queue_.Done(*key);
      }
    });
  }
  std::jthread adder([&] {
    for (int i = 0; i < kAdds; ++i) {
      queue_.Add(Sb("k" + std::to_string(i % kKeys)));
      if (i % 50 == 0) {
        std::this_thread::yield();
      }
    }
  });
  adder.join();
  ASSERT_TRUE(PollUntil([&] {
    const WorkQueueStats s = queue_.Stats();
    return s.depth == 0 && s.processing == 0;
  }));
  queue_.ShutDown();
  workers.clear();

  std::lock_guard lock(mu);
  EXPECT_EQ(max_concurrent, 1);
  EXPECT_EQ(handled.size(), static_cast<size_t>(kKeys));
  EXPECT_LE(gets.load(), kAdds);
  EXPECT_GE(gets.load(), kKeys);
}

TEST_F(WorkQueueTest, AddAfterHandsOutInDueOrder) {
  queue_.AddAfter(Sb("late"), 5s);
  queue_.AddAfter(Sb("early"), 2s);
  EXPECT_EQ(queue_.Len(), 0);
  EXPECT_EQ(queue_.Stats().waiting, 2);
  const auto t0 = clock_.Steady();
  EXPECT_EQ(queue_.ReadyAt(Sb("early")), t0 + 2s);

  clock_.Advance(1999ms);
  EXPECT_EQ(queue_.Stats().waiting, 2);
  clock_.Advance(1ms);
  ASSERT_TRUE(WaitForLen(1));
  EXPECT_EQ(queue_.Get(), Sb("early"));
  EXPECT_EQ(queue_.Stats().waiting, 1);
  clock_.Advance(3s);
  ASSERT_TRUE(WaitForLen(1));
  EXPECT_EQ(queue_.Get(), Sb("late"));
  EXPECT_EQ(queue_.Stats().waiting, 0);
}

TEST_F(WorkQueueTest, AddAfterTwiceKeepsTheEarlierTime) {
  const auto t0 = clock_.Steady();
  queue_.AddAfter(Sb("a"), 10s);
  queue_.AddAfter(Sb("a"), 1s);
  EXPECT_EQ(queue_.ReadyAt(Sb("a")), t0 + 1s);
  queue_.AddAfter(Sb("a"), 30s);
  EXPECT_EQ(queue_.ReadyAt(Sb("a")), t0 + 1s);
  EXPECT_EQ(queue_.Stats().waiting, 1);

  clock_.Advance(1s);
  ASSERT_TRUE(WaitForLen(1));
  EXPECT_EQ(queue_.Get(), Sb("a"));
  EXPECT_EQ(queue_.Stats().waiting, 0);  // the later times were dropped, not kept
}

TEST_F(WorkQueueTest, EarlierKeyWakesADelayThreadSleepingOnALaterOne) {
  queue_.AddAfter(Sb("late"), 1h);
  ASSERT_TRUE(clock_.WaitForSleepers(1));  // the delay thread sleeps until +1h
  queue_.AddAfter(Sb("soon"), 1s);
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForLen(1));
  EXPECT_EQ(queue_.Get(), Sb("soon"));
}

TEST_F(WorkQueueTest, AddAfterWithoutDelayIsAdd) {
  queue_.AddAfter(Sb("a"), 0ms);
  EXPECT_EQ(queue_.Len(), 1);
}

TEST_F(WorkQueueTest, RateLimitedBackoffDoublesAndForgetResets) {
  const ObjectKey a = Sb("a");
  for (int i = 0; i < 4; ++i) {
    const auto now = clock_.Steady();
    queue_.AddRateLimited(a);
    EXPECT_EQ(queue_.NumRequeues(a), i + 1);
    EXPECT_EQ(queue_.ReadyAt(a), now + std::chrono::seconds(1 << i));
    clock_.Advance(std::chrono::seconds(1 << i));
    ASSERT_TRUE(WaitForLen(1));
    ASSERT_EQ(queue_.Get(), a);
    queue_.Done(a);
  }
  queue_.Forget(a);
  EXPECT_EQ(queue_.NumRequeues(a), 0);
  const auto now = clock_.Steady();
  queue_.AddRateLimited(a);
  EXPECT_EQ(queue_.ReadyAt(a), now + 1s);
  EXPECT_EQ(queue_.Stats().retries_total, 5);
}

TEST_F(WorkQueueTest, RateLimitedBackoffIsCappedAtFiveMinutes) {
  const ObjectKey a = Sb("a");
  for (int i = 0; i < 20; ++i) {
    queue_.AddRateLimited(a);
  }
  // Earliest wins keeps the first (1 s) entry; the cap shows on a fresh wait.
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForLen(1));
  const auto now = clock_.Steady();
  queue_.AddRateLimited(a);
  EXPECT_EQ(queue_.ReadyAt(a), now + 5min);
}

TEST_F(WorkQueueTest, RateLimitedHonoursAMinimumDelay) {
  const auto now = clock_.Steady();
  queue_.AddRateLimited(Sb("a"), 20s);
  EXPECT_EQ(queue_.ReadyAt(Sb("a")), now + 20s);
  queue_.AddRateLimited(Sb("b"), 200ms);  // backoff (1 s) is longer: it wins
  EXPECT_EQ(queue_.ReadyAt(Sb("b")), now + 1s);
  queue_.AddRateLimited(Sb("c"), 200ms, WorkQueue::RetryWait::kAsGiven);  // a 5xx's wait
  EXPECT_EQ(queue_.ReadyAt(Sb("c")), now + 200ms);
}

// #25: a failing server's Retry-After (or a scheduled retry's time) is the delay for the first
// three failures in a row: random 503s on a flaky cloud do not grow into minutes of backoff. From
// the fourth on the backoff grows (1 s, 2 s, …), never below the server's wait, so a server that
// keeps failing is not called at its own pace for ever; a success (Forget) starts over.
TEST_F(WorkQueueTest, AServersWaitIsTheDelayForTheFirstFailuresThenTheBackoffGrows) {
  const ObjectKey a = Sb("a");
  const std::chrono::milliseconds expected[] = {500ms, 500ms, 500ms, 1s, 2s, 4s};
  for (const std::chrono::milliseconds want : expected) {
    const auto now = clock_.Steady();
    queue_.AddRateLimited(a, 500ms, WorkQueue::RetryWait::kAsGiven);
    EXPECT_EQ(queue_.ReadyAt(a), now + want) << queue_.NumRequeues(a);
    clock_.Advance(want);
    ASSERT_TRUE(WaitForLen(1));
    ASSERT_EQ(queue_.Get(), a);
    queue_.Done(a);
  }
  queue_.Forget(a);
  const auto now = clock_.Steady();
  queue_.AddRateLimited(a, 500ms, WorkQueue::RetryWait::kAsGiven);
  EXPECT_EQ(queue_.ReadyAt(a), now + 500ms);
}

// #30: a pass that ends early on purpose (ReconcileResult::Continue) comes back at once, even
// after failures (which it neither counts nor forgets); a run of continues in a row backs off
// after the first kFreeContinues, so a reconciler that continues by mistake cannot hot-loop.
TEST_F(WorkQueueTest, AContinueIsAtOnceWhateverTheFailuresButARunOfThemBacksOff) {
  const ObjectKey a = Sb("a");
  queue_.AddRateLimited(a);
  queue_.AddRateLimited(a);  // two failures: the next rate-limited add would wait 4 s
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForLen(1));
  for (int i = 0; i < WorkQueue::kFreeContinues; ++i) {
    ASSERT_EQ(queue_.Get(), a);
    queue_.AddContinue(a);  // while processing, as the Manager does before Done
    queue_.Done(a);
    EXPECT_EQ(queue_.Len(), 1) << "continue " << i + 1 << " waits";
    EXPECT_EQ(queue_.NumRequeues(a), 2);
  }
  ASSERT_EQ(queue_.Get(), a);
  const auto now = clock_.Steady();
  queue_.AddContinue(a);  // the fourth in a row
  queue_.Done(a);
  EXPECT_EQ(queue_.Len(), 0);
  EXPECT_EQ(queue_.ReadyAt(a), now + 1s);
  clock_.Advance(1s);
  ASSERT_TRUE(WaitForLen(1));
  ASSERT_EQ(queue_.Get(), a);
  queue_.AddContinue(a);
  queue_.Done(a);
  EXPECT_EQ(queue_.ReadyAt(a), clock_.Steady() + 2s);
  queue_.Forget(a);  // a pass that settled: both counts start over
  EXPECT_EQ(queue_.NumRequeues(a), 0);
  clock_.Advance(2s);
  ASSERT_TRUE(WaitForLen(1));
  ASSERT_EQ(queue_.Get(), a);
  queue_.AddContinue(a);
  queue_.Done(a);
  EXPECT_EQ(queue_.Len(), 1);
}

// #30: a key that comes back for its place in line goes before the keys that are merely ready
// (its token is due now, and a late comer loses it), also when it was being processed as it
// fell due; one already queued keeps its place.
TEST_F(WorkQueueTest, AKeyBackForItsPlaceInLineGoesBeforeTheReadyOnes) {
  queue_.AddAtItsPlace(Sb("placed"), 100ms);
  queue_.Add(Sb("a"));
  queue_.Add(Sb("b"));
  clock_.Advance(100ms);
  ASSERT_TRUE(WaitForLen(3));
  EXPECT_EQ(queue_.Get(), Sb("placed"));
  queue_.AddAtItsPlace(Sb("placed"), 100ms);  // while processing: given back again
  clock_.Advance(100ms);
  ASSERT_TRUE(PollUntil([&] { return !queue_.ReadyAt(Sb("placed")).has_value(); }));
  queue_.Done(Sb("placed"));
  EXPECT_EQ(queue_.Get(), Sb("placed")) << "first when Done";
  queue_.Done(Sb("placed"));
  queue_.AddAtItsPlace(Sb("a"), 0ms);  // queued already: where it was
  EXPECT_EQ(queue_.Get(), Sb("a"));
  EXPECT_EQ(queue_.Get(), Sb("b"));
  EXPECT_EQ(queue_.Len(), 0);
}

TEST_F(WorkQueueTest, JitteredBackoffStaysWithinBounds) {
  testing::FakeClock clock;
  WorkQueue queue(clock);  // default random source
  for (int i = 0; i < 200; ++i) {
    const ObjectKey k = Sb("k" + std::to_string(i));
    queue.AddRateLimited(k);
    const auto d = *queue.ReadyAt(k) - clock.Steady();
    EXPECT_GE(d, 900ms);
    EXPECT_LE(d, 1100ms);
  }
}

TEST_F(WorkQueueTest, GetReturnsNothingWhenStopped) {
  std::optional<std::optional<ObjectKey>> got;
  std::atomic<bool> returned{false};
  std::jthread getter([&](std::stop_token stop) {
    got = queue_.Get(stop);
    returned = true;
  });
  EXPECT_FALSE(returned.load());
  getter.request_stop();
  ASSERT_TRUE(PollUntil([&] { return returned.load(); }));
  getter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
}

TEST_F(WorkQueueTest, ShutDownWakesGettersAndIgnoresNewAdds) {
  std::atomic<int> returned{0};
  std::vector<std::jthread> getters;
  for (int i = 0; i < 3; ++i) {
    getters.emplace_back([&] {
      EXPECT_FALSE(queue_.Get().has_value());
      ++returned;
    });
  }
  queue_.ShutDown();
  ASSERT_TRUE(PollUntil([&] { return returned.load() == 3; }));
  queue_.Add(Sb("a"));
  queue_.AddAfter(Sb("b"), 1s);
  queue_.AddRateLimited(Sb("c"));
  EXPECT_EQ(queue_.Len(), 0);
  EXPECT_EQ(queue_.Stats().waiting, 0);
  EXPECT_TRUE(queue_.ShuttingDown());
}

TEST_F(WorkQueueTest, ShutDownWithDrainWaitsForInFlightKeys) {
  queue_.Add(Sb("a"));
  queue_.Add(Sb("b"));
  ASSERT_EQ(queue_.Get(), Sb("a"));
  std::atomic<bool> drained{false};
  std::jthread stopper([&] {
    EXPECT_TRUE(queue_.ShutDownWithDrain());
    drained = true;
  });
  ASSERT_TRUE(PollUntil([&] { return queue_.ShuttingDown(); }));
  EXPECT_FALSE(queue_.Get().has_value());  // b is not handed out after shutdown
  EXPECT_FALSE(drained.load());            // a is still in flight
  queue_.Add(Sb("a"));                     // ignored: no re-queue on Done after shutdown
  queue_.Done(Sb("a"));
  ASSERT_TRUE(PollUntil([&] { return drained.load(); }));
  EXPECT_EQ(queue_.Stats().processing, 0);
}

TEST_F(WorkQueueTest, ShutDownWithDrainGivesUpWhenStopped) {
  queue_.Add(Sb("a"));
  ASSERT_EQ(queue_.Get(), Sb("a"));
  std::stop_source cancel;
  std::atomic<int> result{-1};
  std::jthread stopper([&] { result = queue_.ShutDownWithDrain(cancel.get_token()) ? 1 : 0; });
  ASSERT_TRUE(PollUntil([&] { return queue_.ShuttingDown(); }));
  EXPECT_EQ(result.load(), -1);
  cancel.request_stop();
  ASSERT_TRUE(PollUntil([&] { return result.load() == 0; }));
}

}  // namespace
}  // namespace sbx::controller
