// Metrics: a small Prometheus registry for sbxd's /metrics (text exposition format 0.0.4).
//
// A metric family is a name, a help text and a type (counter, gauge, histogram); a series is a
// family plus a label set. counter()/gauge()/histogram() return the series for a label set,
// creating it on first use; the returned reference stays valid for the registry's lifetime, so
// hot paths may look a series up once and keep it. Render() writes every family in name order
// and every series in label order (deterministic, golden-testable).
//
// Collectors refresh values that are cheaper to read at scrape time than to track (queue depth,
// sandboxes by state, leader status): AddCollector(fn) registers fn(Metrics&), and Render() runs
// every collector first, in registration order, serialised against other Render() calls.
//
// Names follow Prometheus' conventions (https://prometheus.io/docs/practices/naming/): a counter
// is a cumulative count whose name ends in `_total` (written as is on the TYPE line and the
// samples, as client_golang does), a gauge's name does not, units are base units in the name
// (`_seconds`). Names and label names are code constants: an invalid one, a counter without
// `_total` or a gauge with it, a name reused with another type, or histogram buckets that are not
// strictly increasing are bugs and abort with a message.
//
// Thread-safety: every method may be called from any thread. Counter/Gauge/Histogram updates are
// lock-free (counters, gauges) or take a per-series mutex (histograms). A collector must not
// call Render(). Ownership: the registry owns every series; collectors are owned by value.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sbx::controller {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  // `v` must be >= 0 (a negative increment is a bug and aborts).
  void Inc(double v = 1);
  // Raises the counter to `total`, a cumulative count another component keeps (a collector
  // copying it at scrape time). A lower `total` leaves the value as it is: a counter never goes
  // down, and the components whose totals are exported only count up.
  void RaiseTo(double total);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1);
  void Dec(double v = 1) { Inc(-v); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `buckets`: upper bounds, strictly increasing, without +Inf (added implicitly).
  explicit Histogram(std::vector<double> buckets);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;        // as given (no +Inf)
    std::vector<uint64_t> cumulative;  // per bound, then one more for +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // Guarded by mu_. Non-cumulative; last is the +Inf overflow.
  double sum_ = 0;                // Guarded by mu_.
  uint64_t count_ = 0;            // Guarded by mu_.
};

// Default buckets for durations in seconds: 5 ms … 60 s.
std::vector<double> DefaultDurationBuckets();

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The series of family `name` with `labels`, created on first use. `help` is kept from the
  // first call for the family. For histograms, `buckets` must be the same for every call on one
  // family (they are taken from the first call).
  Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& histogram(std::string_view name, std::string_view help,
                       const std::vector<double>& buckets, const Labels& labels = {});

  // Sets every existing series of gauge family `name` to 0 (no-op if there is none). For
  // collectors publishing a breakdown (sandboxes by state): zero, then set what is present, so
  // a state that disappeared reads 0 instead of its last value.
  void ResetGauges(std::string_view name);

  void AddCollector(std::function<void(Metrics&)> collector);

  // Runs the collectors, then renders every family. Logically const: collectors only refresh
  // values; everything they touch is internally synchronised (declared mutable).
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family;

  Family& GetFamily(std::string_view name, std::string_view help, Type type,
                    const std::vector<double>* buckets) const;

  mutable std::mutex mu_;
  // Guarded by mu_. Families are never removed; a std::map keeps them in name order.
  mutable std::map<std::string, std::unique_ptr<Family>, std::less<>> families_;

  mutable std::mutex render_mu_;  // Serialises Render(): collectors run one scrape at a time.
  mutable std::mutex collectors_mu_;
  std::vector<std::function<void(Metrics&)>> collectors_;  // Guarded by collectors_mu_.
};

// Prometheus escaping, exposed for tests: label values escape '\\', '"' and newline; help text
// escapes '\\' and newline.
std::string EscapeLabelValue(std::string_view v);
std::string EscapeHelp(std::string_view v);
// A sample value as Prometheus writes it: integers without a fraction, "+Inf", "-Inf", "NaN",
// otherwise the shortest round-tripping decimal.
std::string FormatValue(double v);

}  // namespace sbx::controller
