#include "controller/server/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace sbx::controller {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "metrics: %s\n", message.c_str());
  std::abort();
}

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) {
    return false;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) {
      return false;
    }
  }
  return true;
}

void CheckLabels(std::string_view family, const Labels& labels, bool histogram) {
  for (const auto& [key, value] : labels) {
    if (!ValidName(key, /*allow_colon=*/false) || key.rfind("__", 0) == 0) {
      Die("invalid label name '" + key + "' on " + std::string(family));
    }
    if (histogram && key == "le") {
      Die("label 'le' is reserved on histogram " + std::string(family));
    }
  }
}

// {k="v",…} with `extra` (already rendered, e.g. le="0.1") appended; "" when there is nothing.
std::string RenderLabels(const Labels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) {
    return "";
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : labels) {
    if (!first) {
      out += ',';
    }
    first = false;
    out += key + "=\"" + EscapeLabelValue(value) + "\"";
  }
  if (!extra.empty()) {
    if (!first) {
      out += ',';
    }
    out += extra;
  }
  out += '}';
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  if (std::isinf(v)) {
    return v > 0 ? "+Inf" : "-Inf";
  }
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) {
    Die("cannot format a double");
  }
  return std::string(buf, end);
}

void Counter::Inc(double v) {
  if (!(v >= 0)) {
    Die("counter decremented by " + FormatValue(v));
  }
  value_.fetch_add(v, std::memory_order_relaxed);
}

void Counter::RaiseTo(double total) {
  double current = value_.load(std::memory_order_relaxed);
  while (total > current &&
         !value_.compare_exchange_weak(current, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Inc(double v) { value_.fetch_add(v, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> buckets)
    : bounds_(std::move(buckets)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (std::isnan(bounds_[i]) || std::isinf(bounds_[i]) ||
        (i > 0 && !(bounds_[i - 1] < bounds_[i]))) {
      Die("histogram buckets must be finite and strictly increasing");
    }
  }
}

void Histogram::Observe(double v) {
  // First bucket whose upper bound is >= v (Prometheus buckets are "less than or equal").
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) {
    ++i;
  }
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t running = 0;
  for (const uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> DefaultDurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

struct Metrics::Family {
  std::string name;
  std::string help;
  Type type;
  std::vector<double> buckets;  // histograms only
  // Guarded by Metrics::mu_ (the maps; the series synchronise themselves).
  std::map<Labels, std::unique_ptr<Counter>> counters;
  std::map<Labels, std::unique_ptr<Gauge>> gauges;
  std::map<Labels, std::unique_ptr<Histogram>> histograms;
};

Metrics::Metrics() = default;
Metrics::~Metrics() = default;

Metrics::Family& Metrics::GetFamily(std::string_view name, std::string_view help, Type type,
                                    const std::vector<double>* buckets) const {
  // Called with mu_ held.
  auto it = families_.find(name);
  if (it == families_.end()) {
    if (!ValidName(name, /*allow_colon=*/true)) {
      Die("invalid metric name '" + std::string(name) + "'");
    }
    const bool total = name.ends_with("_total");
    if (type == Type::kCounter && !total) {
      Die("counter '" + std::string(name) + "' must end in _total");
    }
    if (type != Type::kCounter && total) {
      Die("'" + std::string(name) + "' ends in _total but is not a counter");
    }
    auto family = std::make_unique<Family>();
    family->name = std::string(name);
    family->help = std::string(help);
    family->type = type;
    if (buckets != nullptr) {
      family->buckets = *buckets;
    }
    it = families_.emplace(std::string(name), std::move(family)).first;
  } else if (it->second->type != type) {
    Die("metric '" + std::string(name) + "' registered with two types");
  }
  return *it->second;
}

Counter& Metrics::counter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mu_);
  Family& f = GetFamily(name, help, Type::kCounter, nullptr);
  auto& slot = f.counters[labels];
  if (!slot) {
    CheckLabels(name, labels, false);
    slot = std::make_unique<Counter>();
  }
  return *slot;
}

Gauge& Metrics::gauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mu_);
  Family& f = GetFamily(name, help, Type::kGauge, nullptr);
  auto& slot = f.gauges[labels];
  if (!slot) {
    CheckLabels(name, labels, false);
    slot = std::make_unique<Gauge>();
  }
  return *slot;
}

Histogram& Metrics::histogram(std::string_view name, std::string_view help,
                              const std::vector<double>& buckets, const Labels& labels) {
  std::lock_guard lock(mu_);
  Family& f = GetFamily(name, help, Type::kHistogram, &buckets);
  auto& slot = f.histograms[labels];
  if (!slot) {
    CheckLabels(name, labels, true);
    slot = std::make_unique<Histogram>(f.buckets);
  }
  return *slot;
}

void Metrics::ResetGauges(std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    return;
  }
  for (auto& [labels, gauge] : it->second->gauges) {
    gauge->Set(0);
  }
}

void Metrics::AddCollector(std::function<void(Metrics&)> collector) {
  std::lock_guard lock(collectors_mu_);
  collectors_.push_back(std::move(collector));
}

std::string Metrics::Render() const {
  std::lock_guard render_lock(render_mu_);
  std::vector<std::function<void(Metrics&)>> collectors;
  {
    std::lock_guard lock(collectors_mu_);
    collectors = collectors_;
  }
  // Every member a collector reaches through Metrics& is mutable and synchronised, so running
  // it from this const method is well-defined even on a const registry.
  for (const auto& collect : collectors) {
    collect(const_cast<Metrics&>(*this));
  }

  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, family] : families_) {
    const char* type = family->type == Type::kCounter ? "counter"
                       : family->type == Type::kGauge ? "gauge"
                                                      : "histogram";
    out += "# HELP " + name + " " + EscapeHelp(family->help) + "\n";
    out += "# TYPE " + name + " " + type + "\n";
    for (const auto& [labels, c] : family->counters) {
      out += name + RenderLabels(labels) + " " + FormatValue(c->Value()) + "\n";
    }
    for (const auto& [labels, g] : family->gauges) {
      out += name + RenderLabels(labels) + " " + FormatValue(g->Value()) + "\n";
    }
    for (const auto& [labels, h] : family->histograms) {
      const Histogram::Snapshot s = h->Read();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        const std::string le = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
        out += name + "_bucket" + RenderLabels(labels, "le=\"" + le + "\"") + " " +
               std::to_string(s.cumulative[i]) + "\n";
      }
      out += name + "_sum" + RenderLabels(labels) + " " + FormatValue(s.sum) + "\n";
      out += name + "_count" + RenderLabels(labels) + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

}  // namespace sbx::controller
