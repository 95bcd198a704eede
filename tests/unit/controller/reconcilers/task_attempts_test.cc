// task_attempts.h: what an ended attempt counts as for spec.retryOn, the attempt's key and the
// delay before the next one (DESIGN §8.1).
#include "controller/reconcilers/task_attempts.h"

#include <gtest/gtest.h>

#include <vector>

namespace sbx::controller {
namespace {

using api::RetryOn;
using api::TaskPhase;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(TaskAttemptsTest, TheServicesInfrastructureCodesAndSbxsOwnAreInfrastructureFailures) {
  for (const char* code : {"connection_failed", "server_error", "internal_error",
                           "server_overloaded", "rate_limit_exceeded", "sandbox_error",
                           "request_timeout", "WorkerLost", "InputPostFailed"}) {
    EXPECT_EQ(FailureKind(TaskPhase::kFailed, code), RetryOn::kInfrastructureFailure) << code;
  }
  for (const char* code : {"", "invalid_request", "content_policy", "a_code_from_tomorrow"}) {
    EXPECT_EQ(FailureKind(TaskPhase::kFailed, code), RetryOn::kFailed) << code;
  }
  EXPECT_EQ(FailureKind(TaskPhase::kTimedOut, ""), RetryOn::kTimedOut);
  EXPECT_EQ(FailureKind(TaskPhase::kTimedOut, "InputPostFailed"), RetryOn::kInfrastructureFailure);
  EXPECT_EQ(FailureKind(TaskPhase::kSucceeded, ""), std::nullopt);
  EXPECT_EQ(FailureKind(TaskPhase::kCancelled, "server_error"), std::nullopt);
}

TEST(TaskAttemptsTest, BackoffLimitCountsRetriesNotAttempts) {
  api::AgentTaskSpec spec;
  EXPECT_FALSE(ShouldRetry(spec, 1, TaskPhase::kFailed, "server_error"));  // default 0
  spec.backoff_limit = 1;
  EXPECT_TRUE(ShouldRetry(spec, 1, TaskPhase::kFailed, "server_error"));
  EXPECT_FALSE(ShouldRetry(spec, 2, TaskPhase::kFailed, "server_error"));
  EXPECT_FALSE(ShouldRetry(spec, 1, TaskPhase::kFailed, "bad_prompt"));
  EXPECT_FALSE(ShouldRetry(spec, 1, TaskPhase::kCancelled, ""));
  spec.retry_on = std::vector<RetryOn>{RetryOn::kFailed, RetryOn::kTimedOut};
  EXPECT_TRUE(ShouldRetry(spec, 1, TaskPhase::kFailed, "bad_prompt"));
  EXPECT_TRUE(ShouldRetry(spec, 1, TaskPhase::kTimedOut, ""));
  EXPECT_FALSE(ShouldRetry(spec, 1, TaskPhase::kFailed, "server_error"));
}

TEST(TaskAttemptsTest, TheFirstAttemptKeepsTheUidAsKey) {
  EXPECT_EQ(AttemptKey("u-1", 1), "u-1");
  EXPECT_EQ(AttemptKey("u-1", 2), "u-1-2");
  EXPECT_EQ(AttemptKey("u-1", 11), "u-1-11");
}

TEST(TaskAttemptsTest, TheDelayStartsAtTenSecondsDoublesToAnHourAndHonoursRetryAfter) {
  EXPECT_EQ(RetryDelay(1, milliseconds(0)), seconds(10));
  EXPECT_EQ(RetryDelay(2, milliseconds(0)), seconds(20));
  EXPECT_EQ(RetryDelay(3, milliseconds(0)), seconds(40));
  EXPECT_EQ(RetryDelay(9, milliseconds(0)), seconds(2560));
  EXPECT_EQ(RetryDelay(10, milliseconds(0)), seconds(3600));
  EXPECT_EQ(RetryDelay(100, milliseconds(0)), seconds(3600));
  EXPECT_EQ(RetryDelay(1, seconds(90)), seconds(90));
  EXPECT_EQ(RetryDelay(3, seconds(5)), seconds(40));
}

TEST(TaskAttemptsTest, OnlyAQueuedTaskBeforeItsNextAttemptAwaitsIt) {
  api::Object t = api::MakeObject(api::Kind::kAgentTask, "t");
  const auto now = *ParseRfc3339("2026-12-04T10:00:00Z");
  EXPECT_FALSE(AwaitingRetry(t, now));
  t.agent_task_status().phase = TaskPhase::kQueued;
  t.agent_task_status().next_attempt_at = "2026-12-04T10:00:10Z";
  EXPECT_TRUE(AwaitingRetry(t, now));
  EXPECT_FALSE(AwaitingRetry(t, now + seconds(10)));
  t.agent_task_status().phase = TaskPhase::kSubmitted;
  EXPECT_FALSE(AwaitingRetry(t, now));
}

}  // namespace
}  // namespace sbx::controller
