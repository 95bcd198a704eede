// InputSubmitter: a held input POST runs on its own thread, one per task, its outcome is read
// once, the task is enqueued when it ends, and stopping sbxd aborts the wait.
#include "controller/reconcilers/input_submitter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using sbx::testing::RecordingEnqueuer;

using sbx::testing::In;
using sbx::testing::PollUntil;
using State = InputSubmitter::State;
using std::chrono::milliseconds;

// A POST the test holds, as the service holds one while no executor is connected.
class HeldPost {
 public:
  InputSubmitter::Post Make(api::Status answer) {
    return [this, answer](std::stop_token stop) {
      ++calls;
      std::unique_lock lock(mu_);
      if (!cv_.wait(lock, stop, [this] { return released_; })) {
        stopped = true;
        return api::Status(api::StatusCode::kCancelled, "stopped");
      }
      return answer;
    };
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  std::atomic<int> calls{0};
  std::atomic<bool> stopped{false};

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool released_ = false;
};

const api::ObjectKey kTask{api::Kind::kAgentTask, "default", "t1"};

TEST(InputSubmitterTest, AHeldPostRunsOnceInTheBackgroundAndEnqueuesTheTaskWhenItEnds) {
  RecordingEnqueuer enqueuer;
  InputSubmitter submitter(&enqueuer);
  HeldPost post;
  submitter.Start(kTask, "uid-1", post.Make(api::OkStatus()));
  EXPECT_EQ(submitter.Take("uid-1").state, State::kInFlight);   // Start returned while held
  submitter.Start(kTask, "uid-1", post.Make(api::OkStatus()));  // a later pass: no second POST
  EXPECT_EQ(submitter.in_flight(), 1);

  post.Release();
  ASSERT_TRUE(PollUntil([&] { return enqueuer.count() == 1; }, In(milliseconds(10'000))));
  const InputSubmitter::Outcome done = submitter.Take("uid-1");
  EXPECT_EQ(done.state, State::kDone);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(submitter.Take("uid-1").state, State::kNone);  // read once
  EXPECT_EQ(post.calls.load(), 1);
}

TEST(InputSubmitterTest, ARefusalIsTheOutcome) {
  RecordingEnqueuer enqueuer;
  InputSubmitter submitter(&enqueuer);
  HeldPost post;
  post.Release();
  submitter.Start(kTask, "uid-1",
                  post.Make(api::Status(api::StatusCode::kFailedPrecondition, "no executor")));
  ASSERT_TRUE(PollUntil([&] { return enqueuer.count() == 1; }, In(milliseconds(10'000))));
  const InputSubmitter::Outcome done = submitter.Take("uid-1");
  ASSERT_EQ(done.state, State::kDone);
  EXPECT_EQ(done.status.code(), api::StatusCode::kFailedPrecondition);
}

TEST(InputSubmitterTest, WithoutAnEnqueuerThePostIsMadeInTheCaller) {
  InputSubmitter submitter(nullptr);
  HeldPost post;
  post.Release();
  submitter.Start(kTask, "uid-1", post.Make(api::OkStatus()));
  EXPECT_EQ(post.calls.load(), 1);
  EXPECT_EQ(submitter.Take("uid-1").state, State::kDone);
}

TEST(InputSubmitterTest, AForgottenTaskDropsItsOutcomeAndAnotherTaskIsNotHeldUp) {
  RecordingEnqueuer enqueuer;
  InputSubmitter submitter(&enqueuer);
  HeldPost held;
  HeldPost quick;
  quick.Release();
  submitter.Start(kTask, "uid-1", held.Make(api::OkStatus()));
  submitter.Start({api::Kind::kAgentTask, "default", "t2"}, "uid-2", quick.Make(api::OkStatus()));
  ASSERT_TRUE(PollUntil([&] { return submitter.Take("uid-2").state == State::kDone; },
                        In(milliseconds(10'000))));
  submitter.Forget("uid-1");
  held.Release();
  ASSERT_TRUE(PollUntil([&] { return submitter.in_flight() == 0; }, In(milliseconds(10'000))));
  EXPECT_EQ(submitter.Take("uid-1").state, State::kNone);
}

TEST(InputSubmitterTest, DestroyingTheSubmitterStopsAHeldPostAndEnqueuesNothing) {
  RecordingEnqueuer enqueuer;
  HeldPost post;
  {
    InputSubmitter submitter(&enqueuer);
    submitter.Start(kTask, "uid-1", post.Make(api::OkStatus()));
    ASSERT_TRUE(PollUntil([&] { return post.calls.load() == 1; }, In(milliseconds(10'000))));
  }
  EXPECT_TRUE(post.stopped.load());
  EXPECT_EQ(enqueuer.count(), 0u);
}

// A task whose deadline passes while the service holds its input: Cancel cuts the POST at once
// (its stop token fires), returns after the POST's thread ended, and leaves nothing to take or
// enqueue; the other task's POST is untouched and a later Start may post again.
TEST(InputSubmitterTest, CancelCutsAHeldPostAtOnceAndLeavesNothingBehind) {
  RecordingEnqueuer enqueuer;
  InputSubmitter submitter(&enqueuer);
  HeldPost held;
  HeldPost other;
  submitter.Start(kTask, "uid-1", held.Make(api::OkStatus()));
  submitter.Start({api::Kind::kAgentTask, "default", "t2"}, "uid-2", other.Make(api::OkStatus()));
  ASSERT_TRUE(PollUntil([&] { return held.calls.load() == 1 && other.calls.load() == 1; },
                        In(milliseconds(10'000))));

  submitter.Cancel("uid-1");
  EXPECT_TRUE(held.stopped.load()) << "Cancel returns after the POST's thread has ended";
  EXPECT_EQ(submitter.Take("uid-1").state, State::kNone);
  EXPECT_EQ(submitter.Take("uid-2").state, State::kInFlight);
  EXPECT_EQ(submitter.in_flight(), 1);
  EXPECT_EQ(enqueuer.count(), 0u);
  submitter.Cancel("uid-unknown");  // nothing in flight: a no-op

  other.Release();
  ASSERT_TRUE(PollUntil([&] { return enqueuer.count() == 1; }, In(milliseconds(10'000))));
  EXPECT_FALSE(other.stopped.load());
  HeldPost again;
  again.Release();
  submitter.Start(kTask, "uid-1", again.Make(api::OkStatus()));
  ASSERT_TRUE(PollUntil([&] { return submitter.Take("uid-1").state == State::kDone; },
                        In(milliseconds(10'000))));
}

}  // namespace
}  // namespace sbx::controller
