// A sandbox's RUNNING time (DESIGN §8.2, issue #28): Sandbox.status.usage.runningSeconds, the
// compute the workspace pays for, counted from the state transitions the Sandbox reconciler
// observes, and what a task's attempt used of it.
//
// The count is `usage.running_millis` up to `usage.running_since`; from there the interval is
// open while the sandbox runs. Each pass that writes the status anyway, sees the sandbox leave
// RUNNING, or finds the open interval older than a checkpoint interval closes it as a piece:
// the piece goes into the usage ledger (Store::RecordUsage, keyed by the sandbox uid and the
// piece's start, so a pass retried after a crash or a conflict records it once) BEFORE the
// status that counts it, and the status write is a compare-and-swap, so no replica counts a
// piece twice. running_since lives in the status: a restart of sbxd (even kill -9) continues
// the open interval, and the downtime is counted if the sandbox kept running.
//
// What sbx did not see it cannot time exactly. A RUNNING that began between two observations
// counts from the sandbox's update_time when that lies between the last observation of it not
// running and this one (a service that moves update_time on each transition: the reference's
// question 10 leaves it open), else from the first observation of RUNNING. A stop behind sbx's
// back counts until sbx observes it; a stop sbx asks for closes the interval when the call
// returns.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/resources.h"
#include "api/usage.h"
#include "controller/base/clock.h"

namespace sbx::controller {

// One counted piece of RUNNING time, [from_ms, to_ms) in Unix milliseconds.
struct RunningPiece {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int64_t millis() const { return to_ms - from_ms; }
};

// Brings `usage` up to `now` for a sandbox that is (`running`) or is not RUNNING as of this
// pass. A RUNNING sandbox with nothing open starts an interval at `began` (when it is known to
// have become RUNNING; not after `now`), else at `now`. An open interval is
// closed into a piece when the sandbox no longer runs, or when `flush` (the status is written
// anyway, or the checkpoint is due); a running sandbox opens the next interval at the piece's
// end. Returns the piece to record, if any (never an empty one).
std::optional<RunningPiece> CountRunning(api::SandboxUsage& usage, bool running,
                                         Clock::WallTime now, bool flush,
                                         std::optional<Clock::WallTime> began = std::nullopt);

// When the RUNNING sandbox observed `now` became RUNNING, if its `update_time` says so: only a
// time after `not_running_seen` (the last observation of it not running) and not after `now`.
std::optional<Clock::WallTime> RunningBegan(const std::string& update_time,
                                            std::optional<Clock::WallTime> not_running_seen,
                                            Clock::WallTime now);

// Whether the open interval of `usage` began `checkpoint` or longer before `now`.
bool CheckpointDue(const api::SandboxUsage& usage, Clock::WallTime now,
                   std::chrono::milliseconds checkpoint);

}  // namespace sbx::controller
