// Usage, prices and budgets (DESIGN §8.2, issue #28): the arithmetic, in one place.
//
// Money is integer micro-units (api::Micros): "1.25" is 1'250'000. A cost is computed from the
// summed tokens (never by adding rounded per-task costs) and rounded once, half up, to the
// micro-unit:
//   (input − cached) × input price + cached × cached price (default: the input price)
//   + output × output price (reasoning tokens are part of output) + compute hours × compute price
// with token prices per million tokens. Periods are UTC calendar days or months.
//
// Pure functions; no I/O; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::api {

// The largest amount a decimal may give (10^12 units, in micro-units): far above any price or
// budget, and small enough that a price times a token count cannot overflow the arithmetic.
inline constexpr Micros kMaxMicros = int64_t{1'000'000'000'000} * 1'000'000;

// "12", "1.25", "0.000001": a non-negative decimal with at most 6 places. kInvalidArgument
// otherwise (a sign, an exponent, a 7th place, more than kMaxMicros).
StatusOr<Micros> ParseDecimal(std::string_view text);
// Shortest form: 1250000 → "1.25", 2000000 → "2".
std::string FormatDecimal(Micros amount);
// Six places, as costs are shown: 1250 → "0.001250".
std::string FormatCost(Micros amount);

// Milliseconds as seconds, shortest form: 300 → "0.3", 61000 → "61", 1234 → "1.234".
std::string FormatSeconds(int64_t millis);

// A sandbox's RUNNING milliseconds as of `now` (Sandbox.status.usage): the count plus the
// interval open since runningSince (controller/reconcilers/sandbox_usage.h keeps them).
int64_t RunningMillisAt(const SandboxUsage& usage, std::chrono::system_clock::time_point now);

// Token and compute counts to price or to hold against a budget.
struct UsageSum {
  int64_t input_tokens = 0;
  int64_t cached_input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;
  int64_t compute_millis = 0;
  int64_t tasks = 0;
  friend bool operator==(const UsageSum&, const UsageSum&) = default;
};

// The cost of `usage` at `pricing`, rounded half up to the micro-unit.
Micros CostOf(const WorkspacePricing& pricing, const UsageSum& usage);

// One budget period: its name ("2026-12-04" or "2026-12") and its UTC bounds [start, end).
struct BudgetPeriodBounds {
  std::string name;
  std::chrono::system_clock::time_point start;
  std::chrono::system_clock::time_point end;
};
BudgetPeriodBounds PeriodAt(BudgetPeriod period, std::chrono::system_clock::time_point now);

// The period a Workspace's usage is kept for: its budget's, else the month.
BudgetPeriod UsagePeriod(const WorkspaceSpec& spec);

// The first limit of `budget` that `used` reached, as a sentence ("tokens: 1200 used of 1000
// this Day (2026-12-04)"); nullopt while every limit has room. `cost` is only compared with
// `pricing` set (validation requires it with budget.cost).
std::optional<std::string> BudgetReached(const WorkspaceBudget& budget,
                                         const std::optional<WorkspacePricing>& pricing,
                                         const UsageSum& used, const BudgetPeriodBounds& period);

}  // namespace sbx::api
