#include "controller/server/metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>
#include <vector>

namespace sbx::controller {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInTheTextFormat) {
  Metrics m;
  m.counter("sbx_reconciles_total", "Reconciles by kind and result.",
            {{"kind", "Sandbox"}, {"result", "done"}})
      .Inc(3);
  m.counter("sbx_reconciles_total", "ignored: the first help wins",
            {{"kind", "AgentWorker"}, {"result", "requeue"}})
      .Inc();
  m.gauge("sbx_leader", "1 while this process holds the lease.").Set(1);
  m.gauge("sbx_sandboxes", "Sandboxes by state.\nSecond \\ line.", {{"state", "we\"ird\\va\nlue"}})
      .Set(2.5);
  Histogram& h = m.histogram("sbx_reconcile_duration_seconds", "Reconcile time.", {0.25, 1, 10},
                             {{"kind", "Sandbox"}});
  h.Observe(0.125);
  h.Observe(0.25);  // on the bound: counts in le="0.25"
  h.Observe(3);
  h.Observe(100);

  EXPECT_EQ(m.Render(),
            "# HELP sbx_leader 1 while this process holds the lease.\n"
            "# TYPE sbx_leader gauge\n"
            "sbx_leader 1\n"
            "# HELP sbx_reconcile_duration_seconds Reconcile time.\n"
            "# TYPE sbx_reconcile_duration_seconds histogram\n"
            "sbx_reconcile_duration_seconds_bucket{kind=\"Sandbox\",le=\"0.25\"} 2\n"
            "sbx_reconcile_duration_seconds_bucket{kind=\"Sandbox\",le=\"1\"} 2\n"
            "sbx_reconcile_duration_seconds_bucket{kind=\"Sandbox\",le=\"10\"} 3\n"
            "sbx_reconcile_duration_seconds_bucket{kind=\"Sandbox\",le=\"+Inf\"} 4\n"
            "sbx_reconcile_duration_seconds_sum{kind=\"Sandbox\"} 103.375\n"
            "sbx_reconcile_duration_seconds_count{kind=\"Sandbox\"} 4\n"
            "# HELP sbx_reconciles_total Reconciles by kind and result.\n"
            "# TYPE sbx_reconciles_total counter\n"
            "sbx_reconciles_total{kind=\"AgentWorker\",result=\"requeue\"} 1\n"
            "sbx_reconciles_total{kind=\"Sandbox\",result=\"done\"} 3\n"
            "# HELP sbx_sandboxes Sandboxes by state.\\nSecond \\\\ line.\n"
            "# TYPE sbx_sandboxes gauge\n"
            "sbx_sandboxes{state=\"we\\\"ird\\\\va\\nlue\"} 2.5\n");
}

TEST(MetricsTest, HistogramWithoutLabelsRendersOnlyLe) {
  Metrics m;
  m.histogram("x_seconds", "x", {1}).Observe(0.5);
  EXPECT_EQ(m.Render(),
            "# HELP x_seconds x\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"1\"} 1\n"
            "x_seconds_bucket{le=\"+Inf\"} 1\n"
            "x_seconds_sum 0.5\n"
            "x_seconds_count 1\n");
}

TEST(MetricsTest, ReturnsTheSameSeriesForTheSameLabels) {
  Metrics m;
  Counter& a = m.counter("c_total", "c", {{"k", "v"}});
  Counter& b = m.counter("c_total", "c", {{"k", "v"}});
  Counter& other = m.counter("c_total", "c", {{"k", "w"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
}

TEST(MetricsTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(MetricsTest, CollectorsRefreshGaugesBeforeEachRender) {
  Metrics m;
  int depth = 7;
  m.AddCollector([&depth](Metrics& metrics) {
    metrics.gauge("sbx_queue_depth", "Keys ready in the work queue.").Set(depth);
  });
  EXPECT_NE(m.Render().find("sbx_queue_depth 7\n"), std::string::npos);
  depth = 3;
  EXPECT_NE(m.Render().find("sbx_queue_depth 3\n"), std::string::npos);
}

TEST(MetricsTest, ResetGaugesZeroesABreakdownThatLostAMember) {
  Metrics m;
  std::map<std::string, int> by_state = {{"RUNNING", 2}, {"STOPPED", 1}};
  m.AddCollector([&by_state](Metrics& metrics) {
    metrics.ResetGauges("sbx_sandboxes");
    for (const auto& [state, n] : by_state) {
      metrics.gauge("sbx_sandboxes", "Sandboxes by state.", {{"state", state}}).Set(n);
    }
  });
  m.Render();
  by_state = {{"RUNNING", 3}};
  const std::string out = m.Render();
  EXPECT_NE(out.find("sbx_sandboxes{state=\"RUNNING\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("sbx_sandboxes{state=\"STOPPED\"} 0\n"), std::string::npos) << out;
}

TEST(MetricsTest, CountsExactlyUnderConcurrentUpdates) {
  Metrics m;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&m, t] {
        for (int i = 0; i < kPerThread; ++i) {
          m.counter("hits_total", "h", {{"t", std::to_string(t % 2)}}).Inc();
          m.histogram("lat_seconds", "l", {1}).Observe(0.5);
        }
      });
    }
    std::thread render([&m] {
      for (int i = 0; i < 20; ++i) {
        (void)m.Render();
      }
    });
    render.join();
  }
  EXPECT_EQ(m.counter("hits_total", "h", {{"t", "0"}}).Value(), 2 * kPerThread);
  EXPECT_EQ(m.counter("hits_total", "h", {{"t", "1"}}).Value(), 2 * kPerThread);
  EXPECT_EQ(m.histogram("lat_seconds", "l", {1}).Read().count, kThreads * kPerThread);
}

TEST(MetricsTest, RaiseToCopiesAGrowingTotalAndNeverGoesDown) {
  Metrics m;
  Counter& sweeps = m.counter("sbx_sweeps_total", "Completed LIST sweeps");
  sweeps.RaiseTo(3);
  EXPECT_EQ(sweeps.Value(), 3);
  sweeps.RaiseTo(5);
  EXPECT_EQ(sweeps.Value(), 5);
  sweeps.RaiseTo(4);
  EXPECT_EQ(sweeps.Value(), 5);
  EXPECT_EQ(m.Render(),
            "# HELP sbx_sweeps_total Completed LIST sweeps\n"
            "# TYPE sbx_sweeps_total counter\n"
            "sbx_sweeps_total 5\n");
}

TEST(MetricsDeathTest, RejectsNamesAgainstPrometheusConventions) {
  Metrics m;
  EXPECT_DEATH(m.counter("sbx_sweeps", "x"), "must end in _total");
  EXPECT_DEATH(m.gauge("sbx_depth_total", "x"), "not a counter");
  EXPECT_DEATH(m.histogram("sbx_latency_total", "x", {1}), "not a counter");
}

TEST(MetricsDeathTest, RejectsAMetricReusedWithAnotherType) {
  Metrics m;
  m.counter("x_total", "x");
  EXPECT_DEATH(m.gauge("x_total", "x"), "two types");
}

TEST(MetricsDeathTest, RejectsInvalidNames) {
  Metrics m;
  EXPECT_DEATH(m.counter("bad-name", "x"), "invalid metric name");
  EXPECT_DEATH(m.counter("ok_total", "x", {{"bad-label", "v"}}), "invalid label name");
  EXPECT_DEATH(m.histogram("h", "x", {1, 1}), "strictly increasing");
}

}  // namespace
}  // namespace sbx::controller
