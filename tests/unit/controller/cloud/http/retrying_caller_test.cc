#include "controller/cloud/http/retrying_caller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <vector>

#include "controller/base/classify_error.h"
#include "controller/base/inline_wait.h"
#include "controller/cloud/http/retry_after.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/cloud/http/fake_transport.h"

namespace sbx::controller::http {
namespace {

using namespace std::chrono_literals;
using api::StatusCode;
using testing::FakeTransport;
using testing::HeaderOf;
using testing::Reply;

constexpr char kKey[] = "sk-secret-key-1234";

// An error table for the tests: the HTTP statuses in `retryable` may be retried (idempotent
// calls only), everything else is terminal; Retry-After is read as every API reads it.
class FakeErrors final : public ErrorTable {
 public:
  explicit FakeErrors(std::set<int> retryable) : retryable_(std::move(retryable)) {}
  AttemptFailure FromResponse(const HttpResponse& r, Clock::WallTime now) const override {
    AttemptFailure f;
    f.http_status = r.status;
    const StatusCode code = r.status == 429   ? StatusCode::kResourceExhausted
                            : r.status == 401 ? StatusCode::kUnauthenticated
                            : r.status >= 500 ? StatusCode::kUnavailable
                                              : StatusCode::kInvalidArgument;
    f.status = api::Status(code, "HTTP " + std::to_string(r.status) + ": " + r.body);
    if (const std::string* header = r.Header("retry-after")) {
      if (auto delay = ParseRetryAfter(*header, now)) {
        f.status = f.status.WithRetryAfter(*delay);
      }
    }
    return f;
  }
  bool Retryable(const AttemptFailure& f, Idempotency idempotency) const override {
    return idempotency == Idempotency::kIdempotent && retryable_.contains(f.http_status);
  }

 private:
  const std::set<int> retryable_;
};

class CountingCredentials final : public Credentials {
 public:
  api::StatusOr<std::string> Authorization(std::stop_token) override {
    return std::string("Bearer ") + kKey;
  }
  void Invalidate() override { ++invalidated; }
  std::atomic<int> invalidated = 0;
};

// Runs `fn` on another thread, advancing the fake clock in 10 ms steps while it sleeps.
template <typename Fn>
auto RunAdvancing(sbx::testing::FakeClock& clock, Fn fn) {
  auto future = std::async(std::launch::async, fn);
  while (future.wait_for(1ms) != std::future_status::ready) {
    if (clock.sleepers() > 0) {
      clock.Advance(10ms);
    }
  }
  return future.get();
}

class RetryingCallerTest : public ::testing::Test {
 protected:
  RetryingCallerTest()
      : transport_([this](const HttpRequest& r, std::stop_token) {
          std::lock_guard lock(mu_);
          times_.push_back(clock_.Steady());
          const HttpResult reply = replies_.empty() ? Reply(200, "ok") : replies_.front();
          if (!replies_.empty()) {
            replies_.erase(replies_.begin());
          }
          if (echo_) {
            return Reply(reply.response.status, "bad header " + HeaderOf(r, "Authorization"));
          }
          return reply;
        }),
        bucket_(clock_, 1000, 1000) {}

  RetryingCaller MakeCaller(const ErrorTable& errors, RetryPolicy policy = Policy()) {
    return RetryingCaller(RetryingCallerOptions{.log_name = "test",
                                                .credentials_noun = "the test key was",
                                                .retry = policy,
                                                .jitter = [] { return 0.5; }},
                          errors, credentials_, bucket_, clock_, transport_);
  }
  static RetryPolicy Policy() {
    return RetryPolicy{
        .max_attempts = 4, .backoff = {100ms, 1s, 0.5}, .budget = 60s, .max_retry_after = 30s};
  }
  static Call Get() {
    Call call;
    call.request.method = "GET";
    call.request.url = "https://h.example/x";
    call.what = "GET /x";
    return call;
  }
  std::vector<Clock::SteadyTime> Times() {
    std::lock_guard lock(mu_);
    return times_;
  }

  sbx::testing::FakeClock clock_;
  std::mutex mu_;
  std::vector<HttpResult> replies_;       // Guarded by mu_.
  std::vector<Clock::SteadyTime> times_;  // Guarded by mu_.
  bool echo_ = false;
  FakeTransport transport_;
  CountingCredentials credentials_;
  EndpointPacing bucket_;
};

TEST_F(RetryingCallerTest, RetriesWhatTheTableCallsRetryableWithTheEngineBackoff) {
  FakeErrors errors({503});
  replies_ = {Reply(503, "busy"), Reply(503, "busy"), Reply(200, "done")};
  RetryingCaller caller = MakeCaller(errors);
  auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "done");
  const std::vector<Clock::SteadyTime> times = Times();
  ASSERT_EQ(times.size(), 3u);
  // The delays are the engine's Backoff under the policy (jitter pinned at 0.5: no spread).
  const Backoff backoff(Policy().backoff, [] { return 0.5; });
  EXPECT_GE(times[1] - times[0], backoff.Delay(1));
  EXPECT_LE(times[1] - times[0], backoff.Delay(1) + 20ms);  // the clock moves in 10 ms steps
  EXPECT_GE(times[2] - times[1], backoff.Delay(2));
  EXPECT_LE(times[2] - times[1], backoff.Delay(2) + 20ms);
  EXPECT_EQ(HeaderOf(transport_.requests().at(0), "Authorization"), std::string("Bearer ") + kKey);
}

TEST_F(RetryingCallerTest, TheTableDecidesWhatIsTerminal) {
  replies_ = {Reply(503, "busy"), Reply(200, "done")};
  FakeErrors nothing_retryable({});
  RetryingCaller caller = MakeCaller(nothing_retryable);
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "GET /x: HTTP 503: busy");
  EXPECT_EQ(transport_.count(), 1u);

  FakeErrors only_429({429});
  RetryingCaller other = MakeCaller(only_429);
  replies_ = {Reply(400, "bad"), Reply(200, "done")};
  EXPECT_EQ(other.Send(Get(), {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_.count(), 2u);
}

TEST_F(RetryingCallerTest, GivesUpAfterMaxAttempts) {
  FakeErrors errors({503});
  replies_.assign(10, Reply(503, "busy"));
  RetryingCaller caller = MakeCaller(errors);
  auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport_.count(), static_cast<size_t>(Policy().max_attempts));
}

TEST_F(RetryingCallerTest, RetryAfterIsHonouredInsteadOfTheBackoff) {
  FakeErrors errors({429});
  replies_ = {Reply(429, "slow down", {{"retry-after", "2"}}), Reply(200, "done")};
  RetryingCaller caller = MakeCaller(errors);
  auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<Clock::SteadyTime> times = Times();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_GE(times[1] - times[0], 2s);
  EXPECT_LE(times[1] - times[0], 2s + 20ms);
}

TEST_F(RetryingCallerTest, A429HoldsItsEndpointClassAndStaysOnTheFinalError) {
  FakeErrors errors({429});
  replies_ = {Reply(429, "slow down", {{"retry-after", "5"}})};
  RetryPolicy once = Policy();
  once.max_attempts = 1;
  RetryingCaller caller = MakeCaller(errors, once);
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().retry_after(), std::optional<std::chrono::milliseconds>(5s));
  EXPECT_FALSE(bucket_.TryAcquire(EndpointClass::kRead)) << "every reader of the workspace waits";
  EXPECT_TRUE(bucket_.Starving()) << "a needed call's 429: routine calls of every class give way";
  EXPECT_FALSE(bucket_.TryAcquire(EndpointClass::kCreate));
  EXPECT_TRUE(bucket_.Take(EndpointClass::kCreate).has_value()) << "another class goes on";
  EXPECT_TRUE(bucket_.Take(EndpointClass::kCommand).has_value());
  clock_.Advance(5s + 10ms);
  EXPECT_TRUE(bucket_.Take(EndpointClass::kRead).has_value());
}

TEST_F(RetryingCallerTest, A503WithRetryAfterHoldsOnlyItsOwnRetry) {
  FakeErrors errors({503});
  replies_ = {Reply(503, "unavailable", {{"retry-after", "5"}})};
  RetryPolicy once = Policy();
  once.max_attempts = 1;
  RetryingCaller caller = MakeCaller(errors, once);
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().retry_after(), std::optional<std::chrono::milliseconds>(5s));
  EXPECT_TRUE(bucket_.TryAcquire(EndpointClass::kRead)) << "a server error holds no other caller";
  EXPECT_EQ(bucket_.cuts(), 0);
}

// Issue #25: a cloud with 10% 503s (each with Retry-After: 1) once halved the workspace's rate
// on every failure, down to its 0.5/s floor, so sbx crawled 27x slower. A server error is not
// congestion: after 200 calls, 20 of them 503s, the pacing is where it was.
TEST_F(RetryingCallerTest, TenPercentServerErrorsLeaveTheRateWhereItWas) {
  FakeErrors errors({503});
  EndpointPacing paced(clock_, 20, 1);
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, paced, clock_, transport_);
  int failures = 0;
  for (int i = 0; i < 200; ++i) {
    replies_ = i % 10 == 0
                   ? std::vector<HttpResult>{Reply(503, "unavailable", {{"retry-after", "1"}}),
                                             Reply(200, "ok")}
                   : std::vector<HttpResult>{Reply(200, "ok")};
    auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
    ASSERT_TRUE(r.ok()) << r.status();
    failures += i % 10 == 0;
  }
  ASSERT_EQ(failures, 20);
  EXPECT_EQ(paced.cuts(), 0);
  for (int c = 0; c < kEndpointClasses; ++c) {
    EXPECT_DOUBLE_EQ(paced.rate(static_cast<EndpointClass>(c)), 20)
        << EndpointClassName(static_cast<EndpointClass>(c));
  }
  EXPECT_DOUBLE_EQ(paced.rate(), 20);
}

// Issue #25: a routine look (a probe on its cadence) never queues for a token and is never
// retried, so under throttling the class's few tokens go to the calls that bring objects up.
TEST_F(RetryingCallerTest, ARoutineCallIsNotSentWithoutASpareTokenAndNeverWaits) {
  FakeErrors errors({429, 503});
  EndpointPacing paced(clock_, 1, 1);
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, paced, clock_, transport_);
  Call routine = Get();
  routine.routine = true;
  ASSERT_TRUE(caller.Send(routine, {}).ok()) << "the one token of the burst was spare";
  auto skipped = caller.Send(routine, {});  // the same instant: no token
  EXPECT_EQ(skipped.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(skipped.status().message().find("not sent"), std::string::npos) << skipped.status();
  EXPECT_EQ(Times().size(), 1u) << "nothing was sent, and the call did not wait (fake clock)";
  EXPECT_EQ(clock_.sleepers(), 0);

  // A failure is not retried: one attempt, whatever the table allows.
  clock_.Advance(1s);
  replies_ = {Reply(503, "unavailable", {{"retry-after", "1"}}), Reply(200, "ok")};
  auto failed = caller.Send(routine, {});
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Times().size(), 2u);

  // A routine success raises no rate: it never waited, so it says nothing of demand.
  clock_.Advance(1s);
  ASSERT_TRUE(caller.Send(routine, {}).ok());
  EXPECT_DOUBLE_EQ(paced.rate(EndpointClass::kRead), 1);
}

TEST_F(RetryingCallerTest, ARetryWaitLongerThanTheThreadAllowsIsGivenBackToTheCaller) {
  FakeErrors errors({503});
  replies_ = {Reply(503, "unavailable", {{"retry-after", "1"}}), Reply(200, "done")};
  RetryingCaller caller = MakeCaller(errors);
  const ScopedInlineWaitLimit reconcile_thread(0ms);
  // No RunAdvancing: a sleep on the fake clock would hang here; the call must not sleep.
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(r.status().retry_after().has_value());
  EXPECT_GE(*r.status().retry_after(), 1s) << "requeued no earlier than the server asked";
  EXPECT_EQ(transport_.count(), 1u) << "the retry is the requeued reconcile's";
  EXPECT_EQ(clock_.sleepers(), 0);
}

// Issue #30: a needed call on a reconcile thread whose pacing token is not due gives the wait
// back unsent (the same RetryScheduled the retries use, reason Paced), and the requeued
// reconcile's call is sent when it comes back at its place in line.
TEST_F(RetryingCallerTest, APacedCallOnAReconcileThreadIsHandedBackUnsentAndSentWhenItComesBack) {
  FakeErrors errors({503});
  EndpointPacing paced(clock_, /*rate=*/2, /*burst=*/1);
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, paced, clock_, transport_);
  replies_ = {Reply(200, "one"), Reply(200, "two")};
  {
    const ScopedInlineWaitLimit pass(0ms, "Sandbox/default/a");
    ASSERT_TRUE(caller.Send(Get(), {}).ok());
  }
  {
    const ScopedInlineWaitLimit pass(0ms, "Sandbox/default/a");
    auto r = caller.Send(Get(), {});
    EXPECT_TRUE(IsPacingDeferred(r.status())) << r.status();
    EXPECT_TRUE(IsRetryScheduled(r.status()));
    EXPECT_EQ(ClassifyError(r.status()).transient(), true);
    EXPECT_EQ(r.status().retry_after(), std::optional(500ms));
    EXPECT_EQ(transport_.count(), 1u) << "not sent";
    EXPECT_EQ(clock_.sleepers(), 0);
  }
  clock_.Advance(500ms);
  {
    const ScopedInlineWaitLimit pass(0ms, "Sandbox/default/a");
    auto r = caller.Send(Get(), {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(transport_.count(), 2u);
  }
}

TEST_F(RetryingCallerTest, AShortRetryWaitWithinTheThreadsLimitStaysInline) {
  FakeErrors errors({503});
  replies_ = {Reply(503, "busy"), Reply(200, "done")};  // backoff 100 ms ±50%
  RetryingCaller caller = MakeCaller(errors);
  auto r = RunAdvancing(clock_, [&] {
    const ScopedInlineWaitLimit reconcile_thread(1s);
    return caller.Send(Get(), {});
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(transport_.count(), 2u);
}

TEST_F(RetryingCallerTest, PacingAdaptsA429CutsTheRateAndAnswersRaiseIt) {
  FakeErrors errors({429});
  EndpointPacing paced(clock_, 10, 1, AimdPolicy{.max_rate = 50, .increase = 10});
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, paced, clock_, transport_);
  // Saturated: each call waits for its token, and each answer (a 404 too) raises the rate.
  replies_ = {Reply(404, "gone")};
  for (int i = 0; i < 30; ++i) {
    auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
    ASSERT_TRUE(r.ok() || r.status().code() == StatusCode::kInvalidArgument) << r.status();
  }
  const double raised = paced.rate();
  const double raised_class = paced.rate(EndpointClass::kRead);
  const double raised_create = paced.rate(EndpointClass::kCreate);
  EXPECT_GT(raised, 20);
  EXPECT_GT(raised_class, 20);
  // The server's limit: a 429 with Retry-After cuts it by the share of calls throttled (one of
  // the last ~30: a little, never more than half) and holds the bucket; the retry after the hold
  // succeeds.
  replies_ = {Reply(429, "slow down", {{"retry-after", "1"}}), Reply(200, "done")};
  auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(paced.rate(EndpointClass::kRead), raised_class * 0.99);
  EXPECT_GT(paced.rate(EndpointClass::kRead), raised_class * 0.9);
  EXPECT_DOUBLE_EQ(paced.rate(EndpointClass::kCreate), raised_create) << "only its class is cut";
  EXPECT_GE(paced.rate(), raised) << "nor the workspace's (its retry, answered, may raise it)";
  EXPECT_EQ(paced.cuts(), 1);
  const std::vector<Clock::SteadyTime> times = Times();
  EXPECT_GE(times.back() - times[times.size() - 2], 1s);
}

TEST_F(RetryingCallerTest, A503WithoutAHintDoesNotCutTheRate) {
  FakeErrors errors({503});
  EndpointPacing paced(clock_, 10, 1, AimdPolicy{.max_rate = 50});
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, paced, clock_, transport_);
  replies_ = {Reply(503, "busy"), Reply(200, "done")};
  auto r = RunAdvancing(clock_, [&] { return caller.Send(Get(), {}); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(paced.cuts(), 0);
  EXPECT_GE(paced.rate(), 10);
}

TEST_F(RetryingCallerTest, ARetryAfterLongerThanTheLimitEndsTheCallAtOnce) {
  FakeErrors errors({429});
  replies_ = {Reply(429, "slow down", {{"retry-after", "600"}}), Reply(200, "done")};
  RetryingCaller caller = MakeCaller(errors);
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().retry_after(), std::optional<std::chrono::milliseconds>(600s));
  EXPECT_EQ(transport_.count(), 1u);
}

TEST_F(RetryingCallerTest, A401InvalidatesTheCredentialsAndOpensTheBreaker) {
  FakeErrors errors({503});
  replies_ = {Reply(401, "who are you")};
  RetryingCaller caller = MakeCaller(errors);
  EXPECT_EQ(caller.Send(Get(), {}).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(credentials_.invalidated.load(), 1);
  auto blocked = caller.Send(Get(), {});
  EXPECT_EQ(blocked.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(blocked.status().message().find("not sent, the test key was rejected recently"),
            std::string::npos)
      << blocked.status();
  EXPECT_EQ(transport_.count(), 1u) << "the breaker answers without a request";
}

TEST_F(RetryingCallerTest, ErrorsNeverContainTheCredential) {
  FakeErrors errors({});
  echo_ = true;
  replies_ = {Reply(400, "")};
  RetryingCaller caller = MakeCaller(errors);
  auto r = caller.Send(Get(), {});
  EXPECT_EQ(r.status().message().find(kKey), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("***"), std::string::npos) << r.status();
}

TEST_F(RetryingCallerTest, StopDuringBackoffCancels) {
  FakeErrors errors({503});
  replies_.assign(10, Reply(503, "busy"));
  RetryingCaller caller = MakeCaller(errors);
  std::stop_source stop;
  auto future =
      std::async(std::launch::async, [&] { return caller.Send(Get(), stop.get_token()); });
  ASSERT_TRUE(clock_.WaitForSleepers(1));
  stop.request_stop();
  EXPECT_EQ(future.get().status().code(), StatusCode::kCancelled);
}

// A stream is retried until it opens, never after.
class ScriptedStreaming final : public StreamingTransport {
 public:
  HttpResult Stream(const HttpRequest&, const StreamHandlers& handlers, std::stop_token) override {
    ++calls;
    if (calls == 1) {
      return Reply(503, "busy");
    }
    HttpResult r = Reply(200, "");
    handlers.on_open(r.response);
    handlers.on_data("data: 1\n\n");
    r.status = api::UnavailableError("stream broken");
    return r;
  }
  int calls = 0;
};

TEST_F(RetryingCallerTest, AStreamIsRetriedUntilItOpensAndNeverAfter) {
  FakeErrors errors({503});
  ScriptedStreaming streaming;
  RetryingCaller caller(RetryingCallerOptions{.log_name = "test",
                                              .credentials_noun = "the test key was",
                                              .retry = Policy(),
                                              .jitter = [] { return 0.5; }},
                        errors, credentials_, bucket_, clock_, transport_, &streaming);
  std::string data;
  const RetryingCaller::StreamEnd end = RunAdvancing(clock_, [&] {
    return caller.Stream(Get(),
                         StreamHandlers{.on_open = [](const HttpResponse&) {},
                                        .on_data =
                                            [&](std::string_view chunk) {
                                              data += chunk;
                                              return true;
                                            }},
                         {});
  });
  EXPECT_EQ(end.status.code(), StatusCode::kUnavailable) << end.status;
  EXPECT_TRUE(end.opened);
  EXPECT_EQ(streaming.calls, 2);
  EXPECT_EQ(data, "data: 1\n\n");
}

}  // namespace
}  // namespace sbx::controller::http
