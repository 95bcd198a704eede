#include "controller/reconcilers/sandbox_usage.h"

#include <algorithm>
#include <chrono>

#include "api/rfc3339.h"

namespace sbx::controller {
namespace {

std::optional<int64_t> OpenSince(const api::SandboxUsage& usage) {
  const std::optional<Clock::WallTime> since = ParseRfc3339(usage.running_since);
  if (!since) {
    return std::nullopt;
  }
  return api::UnixMillis(*since);
}

}  // namespace

std::optional<RunningPiece> CountRunning(api::SandboxUsage& usage, bool running,
                                         Clock::WallTime now, bool flush,
                                         std::optional<Clock::WallTime> began) {
  const int64_t now_ms = api::UnixMillis(now);
  const std::optional<int64_t> since = OpenSince(usage);
  if (!since) {
    // Nothing open (or a value sbx did not write, which it cannot count from): open one.
    const int64_t from_ms = began ? std::min(api::UnixMillis(*began), now_ms) : now_ms;
    usage.running_since = running ? api::FormatRfc3339Millis(api::FromUnixMillis(from_ms)) : "";
    return std::nullopt;
  }
  if (running && !flush) {
    return std::nullopt;
  }
  // A clock that stepped back counts nothing rather than a negative time.
  const RunningPiece piece{*since, std::max(*since, now_ms)};
  usage.running_millis += piece.millis();
  usage.running_since = running ? api::FormatRfc3339Millis(api::FromUnixMillis(piece.to_ms)) : "";
  if (piece.millis() == 0) {
    return std::nullopt;
  }
  return piece;
}

std::optional<Clock::WallTime> RunningBegan(const std::string& update_time,
                                            std::optional<Clock::WallTime> not_running_seen,
                                            Clock::WallTime now) {
  const std::optional<Clock::WallTime> updated = ParseRfc3339(update_time);
  if (!updated || !not_running_seen || *updated <= *not_running_seen || *updated > now) {
    return std::nullopt;  // no evidence the transition happened in between
  }
  return updated;
}

bool CheckpointDue(const api::SandboxUsage& usage, Clock::WallTime now,
                   std::chrono::milliseconds checkpoint) {
  const std::optional<int64_t> since = OpenSince(usage);
  return since && api::UnixMillis(now) - *since >= checkpoint.count();
}

}  // namespace sbx::controller
