// GitFetchPool: fetches run on at most `workers` threads of their own, the rest wait in order;
// each outcome is taken once and only for the object and generation that asked for it; the
// GitSource is enqueued when its fetch ends; Forget stops a running fetch and waits for it.
#include "controller/reconcilers/git_fetch_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::RecordingEnqueuer;
using State = GitFetchPool::State;
using std::chrono::seconds;

api::ObjectKey Key(const std::string& name) { return {api::Kind::kGitSource, "default", name}; }

// Fetches the test holds, as a repository that does not answer holds git.
class Held {
 public:
  GitFetchPool::Job Make(std::string commit) {
    return [this, commit](std::stop_token stop) {
      GitFetchResult r;
      std::unique_lock lock(mu_);
      if (!cv_.wait(lock, stop, [this] { return released_; })) {
        ++stopped;
        r.commit = api::CancelledError("stopped");
        return r;
      }
      r.commit = commit;
      r.files = std::vector<gitops::GitFile>{};
      return r;
    };
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  std::atomic<int> stopped{0};

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool released_ = false;
};

TEST(GitFetchPoolTest, RunsAtMostItsWorkersAtOnceAndWakesEachSourceWhenItsFetchEnds) {
  RecordingEnqueuer enqueuer;
  Held held;
  GitFetchPool pool(&enqueuer, 2);
  for (int i = 0; i < 5; ++i) {
    pool.Start(Key("s" + std::to_string(i)), "uid" + std::to_string(i), 1,
               held.Make("c" + std::to_string(i)));
  }
  pool.Start(Key("s0"), "uid0", 1, held.Make("again"));  // already queued: not twice
  ASSERT_TRUE(PollUntil([&] { return pool.running() == 2; }, In(seconds(5))));
  EXPECT_EQ(pool.queued(), 3u);
  EXPECT_EQ(pool.Take(Key("s4"), "uid4", 1).state, State::kPending);
  held.Release();
  ASSERT_TRUE(PollUntil([&] { return enqueuer.count() == 5; }, In(seconds(5))));
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(enqueuer.Count("s" + n), 1);
    GitFetchPool::Outcome o = pool.Take(Key("s" + n), "uid" + n, 1);
    ASSERT_EQ(o.state, State::kDone);
    EXPECT_EQ(*o.result->commit, "c" + n);
    EXPECT_EQ(pool.Take(Key("s" + n), "uid" + n, 1).state, State::kNone);  // taken once
  }
}

// An outcome for another uid (the name was re-created) or generation (the spec changed) is not
// handed over: the caller fetches the spec as it is now.
TEST(GitFetchPoolTest, AnOutcomeGoesOnlyToTheObjectAndGenerationThatAskedForIt) {
  GitFetchPool pool(nullptr, 1);  // synchronous
  Held held;
  held.Release();
  pool.Start(Key("a"), "uid-a", 1, held.Make("c1"));
  GitFetchPool::Outcome stale = pool.Take(Key("a"), "uid-a", 2);
  EXPECT_EQ(stale.state, State::kNone);
  EXPECT_TRUE(stale.stale);
  pool.Start(Key("a"), "uid-a", 1, held.Make("c1"));
  EXPECT_EQ(pool.Take(Key("a"), "uid-other", 1).state, State::kNone);
  EXPECT_FALSE(pool.Take(Key("a"), "uid-a", 1).stale);  // nothing there: not stale
  pool.Start(Key("a"), "uid-a", 2, held.Make("c2"));
  GitFetchPool::Outcome o = pool.Take(Key("a"), "uid-a", 2);
  ASSERT_EQ(o.state, State::kDone);
  EXPECT_EQ(*o.result->commit, "c2");
}

// Forget (the GitSource is gone) stops a running fetch and returns once it has ended, so that the
// caller can remove the cache; a queued one never runs; neither wakes anything.
TEST(GitFetchPoolTest, ForgetStopsARunningFetchWaitsForItAndDropsAQueuedOne) {
  RecordingEnqueuer enqueuer;
  Held held;
  GitFetchPool pool(&enqueuer, 1);
  pool.Start(Key("running"), "u1", 1, held.Make("c"));
  pool.Start(Key("queued"), "u2", 1, held.Make("c"));
  ASSERT_TRUE(PollUntil([&] { return pool.running() == 1; }, In(seconds(5))));
  pool.Forget(Key("queued"));
  pool.Forget(Key("running"));
  EXPECT_EQ(held.stopped.load(), 1);
  EXPECT_EQ(pool.running(), 0u);
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_EQ(pool.Take(Key("running"), "u1", 1).state, State::kNone);
  EXPECT_EQ(enqueuer.count(), 0u);
}

}  // namespace
}  // namespace sbx::controller
