#include "controller/server/reconcile_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "controller/base/classify_error.h"
#include "controller/server/log.h"

namespace sbx::controller {
namespace {

using ::testing::HasSubstr;

ReconcileRecord Record(api::Kind kind, std::string name, api::Status status,
                       std::optional<ReconcileResult> result, std::chrono::milliseconds d) {
  ReconcileRecord r;
  r.key = {kind, "default", std::move(name)};
  r.status = status;
  r.result = result;
  if (!status.ok()) {
    r.error = ClassifyError(status);
  }
  r.duration = d;
  return r;
}

class ReconcileMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::InitWithSink(log::Format::kText, log::Level::kDebug, [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    });
  }
  void TearDown() override { log::Init(log::Format::kText, log::Level::kInfo); }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

  Metrics metrics_;
  ReconcileMetrics observer_{metrics_};

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(ReconcileMetricsTest, CountsByKindAndResult) {
  using std::chrono::milliseconds;
  observer_.OnReconciled(
      Record(api::Kind::kSandbox, "a", api::OkStatus(), ReconcileResult::Done(), milliseconds(12)));
  observer_.OnReconciled(Record(api::Kind::kSandbox, "a", api::OkStatus(),
                                ReconcileResult::RequeueAfter(milliseconds(2000)),
                                milliseconds(3)));
  observer_.OnReconciled(Record(api::Kind::kSandbox, "b", api::UnavailableError("503 from server"),
                                std::nullopt, milliseconds(700)));
  observer_.OnReconciled(Record(api::Kind::kAgentWorker, "w",
                                api::FailedPreconditionError("image is immutable"), std::nullopt,
                                milliseconds(1)));
  observer_.OnReconciled(Record(api::Kind::kAgentTask, "t",
                                RetryScheduled(api::UnavailableError("503"), milliseconds(1000)),
                                std::nullopt, milliseconds(1)));
  observer_.OnReconciled(Record(api::Kind::kAgentTask, "t",
                                PacingDeferred("paced", milliseconds(300)), std::nullopt,
                                milliseconds(1)));

  auto count = [this](const char* kind, const char* result) {
    return metrics_.counter("sbx_reconciles_total", "", {{"kind", kind}, {"result", result}})
        .Value();
  };
  EXPECT_EQ(count("Sandbox", "done"), 1);
  EXPECT_EQ(count("Sandbox", "requeue"), 1);
  EXPECT_EQ(count("Sandbox", "transient_error"), 1);
  EXPECT_EQ(count("Sandbox", "terminal_error"), 0);
  EXPECT_EQ(count("AgentWorker", "terminal_error"), 1);
  EXPECT_EQ(count("AgentTask", "retry_scheduled"), 1);
  EXPECT_EQ(count("AgentTask", "paced"), 1) << "a pacing wait handed back is no error";
  EXPECT_EQ(count("AgentTask", "transient_error"), 0);

  const Histogram::Snapshot h = metrics_
                                    .histogram("sbx_reconcile_duration_seconds", "",
                                               DefaultDurationBuckets(), {{"kind", "Sandbox"}})
                                    .Read();
  EXPECT_EQ(h.count, 3u);
  EXPECT_DOUBLE_EQ(h.sum, 0.715);
  EXPECT_NE(metrics_.Render().find("# TYPE sbx_reconcile_duration_seconds histogram"),
            std::string::npos);
}

TEST_F(ReconcileMetricsTest, LogsSuccessAtDebugAndErrorsAtWarnWithTheReason) {
  using std::chrono::milliseconds;
  observer_.OnReconciled(
      Record(api::Kind::kSandbox, "a", api::OkStatus(), ReconcileResult::Done(), milliseconds(12)));
  observer_.OnReconciled(Record(api::Kind::kSandbox, "b",
                                api::ResourceExhaustedError("429 slow down"), std::nullopt,
                                milliseconds(5)));
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(
      lines[0],
      HasSubstr(" DEBUG reconciled kind=Sandbox name=default/a result=done duration_ms=12"));
  EXPECT_THAT(lines[1], HasSubstr(" WARN reconciled kind=Sandbox name=default/b "
                                  "result=transient_error reason=RateLimited "
                                  "error=\"RESOURCE_EXHAUSTED: 429 slow down\""));
}

}  // namespace
}  // namespace sbx::controller
