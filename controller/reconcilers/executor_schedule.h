// ExecutorSchedule: when the AgentWorker reconciler spends a call on its executor. Three looks
// cost differently: the launch and the probe are an exec-sync inside the sandbox each, the
// environment status check is one cheap GET to the OpenAI API. The schedule says
//   * launch at once when nothing of ours can be running (none launched since the sandbox
//     started), and after a diagnosed exit only once the crash-loop delay has passed (engine
//     Backoff: crash_backoff_base·2^(restarts-1) up to crash_backoff_cap; auth failures wait
//     auth_backoff; an executor that ran before it died is relaunched at once);
//   * check the environment every `status_interval` while connected, every `connect_poll` while
//     not, every `verify_after_launch` while the executor is in doubt (launched and not yet seen
//     running, found down, or reported disconnected), and at once after a new boot; right after
//     a launch of this sbxd's, sooner: `verify_first` after it, then each look as long after the
//     launch again as the last one was (0.25, 0.5, 1, 2, 3 … s), because an executor usually
//     connects within a fraction of a second and every look it waits for is time to Ready;
//   * probe when the connection is in doubt (but not within `connect_grace` of a launch), after a
//     new boot, and every `probe_interval`.
// Everything it decides from comes from the worker's status (conditions and status.executor, so
// a restart of sbxd keeps the schedule), except the time of the last status check, a cache
// whose loss costs one early GET. Pure functions of their arguments; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "api/resources.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"

namespace sbx::controller {

struct ExecutorScheduleOptions {
  // Connected: look at the environment this often; and probe inside the sandbox this often.
  std::chrono::milliseconds status_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds probe_interval{std::chrono::minutes(5)};
  // After a launch: look at the environment this often until it is connected ...
  std::chrono::milliseconds verify_after_launch{std::chrono::seconds(1)};
  // ... the first look this soon after a launch, the next ones doubling up to the above.
  std::chrono::milliseconds verify_first{250};
  // ... or until this long has passed; then probe the executor inside the sandbox (an executor
  // that exits on start is diagnosed then). A connected executor needs no probe.
  std::chrono::milliseconds connect_grace{std::chrono::seconds(5)};
  // Running but not connected: look at the environment this often.
  std::chrono::milliseconds connect_poll{std::chrono::seconds(5)};
  // Crash-loop backoff: base·2^(restarts-1), capped; auth failures wait auth_backoff.
  std::chrono::milliseconds crash_backoff_base{std::chrono::seconds(10)};
  std::chrono::milliseconds crash_backoff_cap{std::chrono::minutes(5)};
  std::chrono::milliseconds auth_backoff{std::chrono::minutes(10)};
};

// Where the executor stands, as the ExecutorRunning condition records it.
enum class ExecutorPhase {
  kNone,      // nothing launched since the sandbox (re)started: condition absent, or False
              // because the sandbox is stopped or not running
  kLaunched,  // launched, not yet seen running (Unknown, Launching)
  kRunning,   // seen running by a probe, or vouched for by the connection (True)
  kDown,      // found missing or exited (False, any other reason): to be launched again
};

// What the schedule decides from.
struct ExecutorFacts {
  ExecutorPhase phase = ExecutorPhase::kNone;
  bool connected = false;     // ExecutorConnected=True
  bool disconnected = false;  // ExecutorConnected=False because the environment disconnected
  bool rebooted = false;      // the sandbox booted since the last probe or launch
  std::optional<Clock::WallTime> launched_at;    // status.executor.launchedAt
  std::optional<Clock::WallTime> last_probe_at;  // status.executor.lastProbeAt
  std::optional<Clock::SteadyTime> last_check;   // cache: the last environment status GET
  std::optional<Clock::SteadyTime> launched;     // cache: when this sbxd launched it
};

// The facts the worker's status records. `sandbox_boot` is the Sandbox's status.bootId.
ExecutorFacts ExecutorFactsOf(const api::AgentWorkerStatus& status, const std::string& sandbox_boot,
                              std::optional<Clock::SteadyTime> last_check,
                              std::optional<Clock::SteadyTime> launched = std::nullopt);

class ExecutorSchedule {
 public:
  explicit ExecutorSchedule(ExecutorScheduleOptions options);

  // Nothing of ours can be running: launch without a probe (the launch script is idempotent).
  static bool LaunchNow(const ExecutorFacts& f) { return f.phase == ExecutorPhase::kNone; }
  // The executor's state is in doubt: looked at often, and probed when it is not connected.
  static bool InDoubt(const ExecutorFacts& f);

  // How often to look at the environment while the executor is in doubt: verify_after_launch,
  // or, launched by this sbxd and not yet seen running, the time from the launch to the last
  // look, within [verify_first, verify_after_launch].
  std::chrono::milliseconds DoubtCadence(const ExecutorFacts& f) const;
  // How long until the environment status is due; zero when it is due now.
  std::chrono::milliseconds UntilStatusCheck(const ExecutorFacts& f, Clock::SteadyTime now) const;
  // After a status check that found it not connected: launched less than connect_grace ago, so
  // give it time to connect instead of probing.
  bool InConnectGrace(const ExecutorFacts& f, bool connected, Clock::WallTime now) const;
  // Whether to look inside the sandbox now, given what the status check just found.
  bool ProbeDue(const ExecutorFacts& f, bool connected, Clock::WallTime now) const;
  // A due probe is routine when only the cadence asks for it (not a doubt, a new boot or a
  // first look): it may be skipped when the cloud paces its calls, and made on a later pass.
  static bool RoutineProbe(const ExecutorFacts& f, bool connected);
  // The environment status check is routine when the last one, by this sbxd, found it connected
  // and nothing puts the executor in doubt: a skipped look leaves the connection as last seen.
  static bool RoutineStatusCheck(const ExecutorFacts& f) {
    return f.connected && !InDoubt(f) && !f.rebooted && f.last_check.has_value();
  }

  // The delay before launching again after an exit diagnosed as `reason`; `ran`: it had been
  // seen running (it died later, not on start); `restarts`: status.executor.restarts.
  std::chrono::milliseconds CrashLoopDelay(const std::string& reason, bool ran, int restarts) const;
  // How long the crash-loop delay (status.executor.nextLaunchAfter) still holds the next launch
  // back; zero when it may go.
  static std::chrono::milliseconds UntilLaunchAllowed(const api::ExecutorStatus& executor,
                                                      Clock::WallTime now);

  // When to look again after a pass that found it connected or not.
  std::chrono::milliseconds NextLook(bool connected) const {
    return connected ? options_.status_interval : options_.connect_poll;
  }
  const ExecutorScheduleOptions& options() const { return options_; }

 private:
  ExecutorScheduleOptions options_;
  Backoff crash_backoff_;
};

}  // namespace sbx::controller
