#include "controller/reconcilers/executor_schedule.h"

#include <algorithm>

#include "api/conditions.h"
#include "controller/reconcilers/executor_control.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using std::chrono::milliseconds;

std::optional<Clock::WallTime> Time(const std::string& rfc3339) {
  return rfc3339.empty() ? std::nullopt : ParseRfc3339(rfc3339);
}

// Time left from `now` until `at`, never negative.
template <typename TimePoint>
milliseconds Until(TimePoint at, TimePoint now) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(at - now));
}

// Absent, or False because the sandbox is stopped or not running: nothing launched since it
// started.
ExecutorPhase PhaseOf(const api::Condition* running) {
  if (running == nullptr || running->reason == reason::kSandboxStopped ||
      running->reason == reason::kSandboxNotRunning) {
    return ExecutorPhase::kNone;
  }
  switch (running->status) {
    case ConditionStatus::kTrue:
      return ExecutorPhase::kRunning;
    case ConditionStatus::kUnknown:
      return ExecutorPhase::kLaunched;
    case ConditionStatus::kFalse:
      break;
  }
  return ExecutorPhase::kDown;
}

}  // namespace

ExecutorFacts ExecutorFactsOf(const api::AgentWorkerStatus& status, const std::string& sandbox_boot,
                              std::optional<Clock::SteadyTime> last_check,
                              std::optional<Clock::SteadyTime> launched) {
  ExecutorFacts f;
  f.phase = PhaseOf(api::FindCondition(status.conditions, condition::kExecutorRunning));
  const api::Condition* connected =
      api::FindCondition(status.conditions, condition::kExecutorConnected);
  f.connected = connected != nullptr && connected->status == ConditionStatus::kTrue;
  f.disconnected = connected != nullptr && connected->status == ConditionStatus::kFalse &&
                   connected->reason == reason::kDisconnected;
  f.rebooted = status.executor.probed_boot_id != sandbox_boot;
  f.launched_at = Time(status.executor.launched_at);
  f.last_probe_at = Time(status.executor.last_probe_at);
  f.last_check = last_check;
  f.launched = launched;
  return f;
}

ExecutorSchedule::ExecutorSchedule(ExecutorScheduleOptions options)
    : options_(options),
      crash_backoff_(BackoffPolicy{options.crash_backoff_base, options.crash_backoff_cap,
                                   /*jitter=*/0.0}) {}

bool ExecutorSchedule::InDoubt(const ExecutorFacts& f) {
  return f.phase == ExecutorPhase::kLaunched || f.phase == ExecutorPhase::kDown ||
         (f.phase == ExecutorPhase::kRunning && f.disconnected);
}

milliseconds ExecutorSchedule::UntilStatusCheck(const ExecutorFacts& f,
                                                Clock::SteadyTime now) const {
  if (f.rebooted || !f.last_check) {
    return milliseconds(0);
  }
  const milliseconds cadence = InDoubt(f) ? DoubtCadence(f) : NextLook(f.connected);
  return Until(*f.last_check + cadence, now);
}

milliseconds ExecutorSchedule::DoubtCadence(const ExecutorFacts& f) const {
  if (f.phase != ExecutorPhase::kLaunched || !f.launched || !f.last_check ||
      *f.last_check < *f.launched) {
    return options_.verify_after_launch;
  }
  const auto since_launch = std::chrono::duration_cast<milliseconds>(*f.last_check - *f.launched);
  return std::clamp(since_launch, options_.verify_first, options_.verify_after_launch);
}

bool ExecutorSchedule::InConnectGrace(const ExecutorFacts& f, bool connected,
                                      Clock::WallTime now) const {
  return !connected && f.phase == ExecutorPhase::kLaunched && f.launched_at &&
         now - *f.launched_at < options_.connect_grace;
}

bool ExecutorSchedule::ProbeDue(const ExecutorFacts& f, bool connected, Clock::WallTime now) const {
  return (InDoubt(f) && !connected) || f.rebooted || !f.last_probe_at ||
         now - *f.last_probe_at >= options_.probe_interval;
}

bool ExecutorSchedule::RoutineProbe(const ExecutorFacts& f, bool connected) {
  return !(InDoubt(f) && !connected) && !f.rebooted && f.last_probe_at.has_value();
}

milliseconds ExecutorSchedule::CrashLoopDelay(const std::string& exit_reason, bool ran,
                                              int restarts) const {
  if (IsAuthReason(exit_reason)) {
    return options_.auth_backoff;
  }
  if (ran) {
    return milliseconds(0);
  }
  return crash_backoff_.Delay(restarts);
}

milliseconds ExecutorSchedule::UntilLaunchAllowed(const api::ExecutorStatus& executor,
                                                  Clock::WallTime now) {
  const std::optional<Clock::WallTime> allowed = Time(executor.next_launch_after);
  return allowed ? Until(*allowed, now) : milliseconds(0);
}

}  // namespace sbx::controller
