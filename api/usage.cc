#include "api/usage.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "api/rfc3339.h"

namespace sbx::api {
namespace {

constexpr int64_t kMicrosPerUnit = 1'000'000;
constexpr int kPlaces = 6;

std::string WithPlaces(Micros amount, bool trim) {
  std::string whole = std::to_string(amount / kMicrosPerUnit);
  std::string fraction = std::to_string(amount % kMicrosPerUnit);
  fraction.insert(0, kPlaces - fraction.size(), '0');
  if (trim) {
    while (!fraction.empty() && fraction.back() == '0') {
      fraction.pop_back();
    }
    if (fraction.empty()) {
      return whole;
    }
  }
  return whole + "." + fraction;
}

std::string Two(unsigned v) { return (v < 10 ? "0" : "") + std::to_string(v); }

}  // namespace

StatusOr<Micros> ParseDecimal(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("\"" + std::string(text) + "\" is not a decimal amount (" +
                                std::string(why) + ")");
  };
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && fraction.empty())) {
    return bad("expected digits like 12 or 1.25");
  }
  if (fraction.size() > kPlaces) {
    return bad("at most 6 decimal places");
  }
  Micros value = 0;
  for (const std::string_view digits : {whole, fraction}) {
    for (const char c : digits) {
      if (c < '0' || c > '9') {
        return bad("expected digits like 12 or 1.25, without a sign or an exponent");
      }
    }
  }
  for (const char c : whole) {
    value = value * 10 + (c - '0');
    if (value > kMaxMicros / kMicrosPerUnit) {
      return bad("more than 10^12");
    }
  }
  value *= kMicrosPerUnit;
  Micros scale = kMicrosPerUnit;
  for (const char c : fraction) {
    scale /= 10;
    value += (c - '0') * scale;
  }
  return value;
}

std::string FormatDecimal(Micros amount) { return WithPlaces(amount, /*trim=*/true); }

std::string FormatCost(Micros amount) { return WithPlaces(amount, /*trim=*/false); }

Micros CostOf(const WorkspacePricing& pricing, const UsageSum& usage) {
  // Exact in 1/18'000'000 of a micro-unit (the least common multiple of the token prices'
  // 1'000'000 tokens and the compute price's 3'600'000 ms per hour), rounded once at the end.
  // A price is at most kMaxMicros (< 2^60) and real counts are far below 2^60: the products fit
  // in 128 bits. (__extension__: GCC's and Clang's 128-bit integer, which -Wpedantic names.)
  __extension__ typedef __int128 Wide;  // NOLINT(modernize-use-using): __extension__ needs typedef
  constexpr Wide kTokenScale = 18;      // 18'000'000 / 1'000'000
  constexpr Wide kComputeScale = 5;     // 18'000'000 / 3'600'000
  constexpr Wide kDenominator = 18'000'000;
  const Micros input = pricing.input_tokens_per_million.value_or(0);
  const Micros cached = pricing.cached_input_tokens_per_million.value_or(input);
  const Micros output = pricing.output_tokens_per_million.value_or(0);
  const Micros compute = pricing.compute_per_hour.value_or(0);
  const int64_t uncached = std::max<int64_t>(0, usage.input_tokens - usage.cached_input_tokens);
  const Wide scaled =
      kTokenScale * (Wide{uncached} * input + Wide{usage.cached_input_tokens} * cached +
                     Wide{usage.output_tokens} * output) +
      kComputeScale * Wide{usage.compute_millis} * compute;
  const Wide rounded = (scaled + kDenominator / 2) / kDenominator;
  return rounded > Wide{INT64_MAX} ? INT64_MAX : static_cast<Micros>(rounded);
}

BudgetPeriodBounds PeriodAt(BudgetPeriod period, std::chrono::system_clock::time_point now) {
  using namespace std::chrono;
  const year_month_day day{floor<days>(now)};
  BudgetPeriodBounds bounds;
  const std::string month_name =
      std::to_string(static_cast<int>(day.year())) + "-" + Two(unsigned(day.month()));
  if (period == BudgetPeriod::kDay) {
    bounds.name = month_name + "-" + Two(unsigned(day.day()));
    bounds.start = sys_days(day);
    bounds.end = bounds.start + days(1);
  } else {
    const year_month first = day.year() / day.month();
    bounds.name = month_name;
    bounds.start = sys_days(first / 1);
    bounds.end = sys_days((first + months(1)) / 1);
  }
  return bounds;
}

BudgetPeriod UsagePeriod(const WorkspaceSpec& spec) {
  return spec.budget ? spec.budget->period : BudgetPeriod::kMonth;
}

std::string FormatSeconds(int64_t millis) {
  std::string out = std::to_string(millis / 1000);
  if (const int64_t frac = millis % 1000; frac != 0) {
    std::string digits = std::to_string(1000 + frac).substr(1);
    while (digits.back() == '0') {
      digits.pop_back();
    }
    out += "." + digits;
  }
  return out;
}

int64_t RunningMillisAt(const SandboxUsage& usage, std::chrono::system_clock::time_point now) {
  const std::optional<std::chrono::system_clock::time_point> since =
      ParseRfc3339(usage.running_since);
  if (!since) {
    return usage.running_millis;
  }
  const auto open = std::chrono::floor<std::chrono::milliseconds>(now) -
                    std::chrono::floor<std::chrono::milliseconds>(*since);
  return usage.running_millis + std::max<int64_t>(0, open.count());
}

std::optional<std::string> BudgetReached(const WorkspaceBudget& budget,
                                         const std::optional<WorkspacePricing>& pricing,
                                         const UsageSum& used, const BudgetPeriodBounds& period) {
  const std::string when =
      std::string(budget.period == BudgetPeriod::kDay ? " today (" : " this month (") +
      period.name + ")";
  if (budget.tokens) {
    const int64_t tokens = used.input_tokens + used.output_tokens;
    if (tokens >= *budget.tokens) {
      return "tokens: " + std::to_string(tokens) + " used of " + std::to_string(*budget.tokens) +
             when;
    }
  }
  if (budget.compute_hours) {
    // Hours in micro-units against milliseconds: 1 h = 3,600,000 ms = 1,000,000 µh, so
    // ms × 10 against µh × 36 (in 128 bits: a budget may be up to kMaxMicros).
    __extension__ typedef __int128 Wide;  // NOLINT(modernize-use-using): as in CostOf
    if (Wide{used.compute_millis} * 10 >= Wide{*budget.compute_hours} * 36) {
      return "computeHours: " + FormatSeconds(used.compute_millis) + " s used of " +
             FormatDecimal(*budget.compute_hours) + " h" + when;
    }
  }
  if (budget.cost && pricing) {
    const Micros cost = CostOf(*pricing, used);
    if (cost >= *budget.cost) {
      return "cost: " + FormatCost(cost) + " used of " + FormatDecimal(*budget.cost) + when;
    }
  }
  return std::nullopt;
}

}  // namespace sbx::api
