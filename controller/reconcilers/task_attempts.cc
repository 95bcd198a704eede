#include "controller/reconcilers/task_attempts.h"

#include <algorithm>
#include <array>

namespace sbx::controller {

bool IsInfrastructureCode(std::string_view code) {
  static constexpr std::array<std::string_view, 9> kCodes = {
      // The service's (reference §2.3) …
      "connection_failed", "server_error", "internal_error", "server_overloaded",
      "rate_limit_exceeded", "sandbox_error", "request_timeout",
      // … and sbx's own.
      kWorkerLost, kInputPostFailed};
  return std::find(kCodes.begin(), kCodes.end(), code) != kCodes.end();
}

std::optional<api::RetryOn> FailureKind(api::TaskPhase phase, std::string_view error_code) {
  switch (phase) {
    case api::TaskPhase::kFailed:
      return IsInfrastructureCode(error_code) ? api::RetryOn::kInfrastructureFailure
                                              : api::RetryOn::kFailed;
    case api::TaskPhase::kTimedOut:
      return IsInfrastructureCode(error_code) ? api::RetryOn::kInfrastructureFailure
                                              : api::RetryOn::kTimedOut;
    default:
      return std::nullopt;
  }
}

bool ShouldRetry(const api::AgentTaskSpec& spec, int attempt, api::TaskPhase phase,
                 std::string_view error_code) {
  const std::optional<api::RetryOn> kind = FailureKind(phase, error_code);
  return kind.has_value() && attempt <= spec.backoff_limit && api::RetriesOn(spec, *kind);
}

std::string AttemptKey(const std::string& uid, int attempt) {
  return attempt <= 1 ? uid : uid + "-" + std::to_string(attempt);
}

std::chrono::milliseconds RetryDelay(int retry, std::chrono::milliseconds retry_after) {
  std::chrono::milliseconds delay = api::kFirstRetryDelay;
  for (int i = 1; i < retry && delay < api::kMaxRetryDelay; ++i) {
    delay *= 2;
  }
  delay = std::min<std::chrono::milliseconds>(delay, api::kMaxRetryDelay);
  return std::max(delay, retry_after);
}

std::string RetryMessage(const api::AgentTaskSpec& spec, const api::AgentTaskStatus& status) {
  if (status.attempts.empty()) {
    return "";
  }
  const api::TaskAttempt& last = status.attempts.back();
  std::string out = "attempt " + std::to_string(last.attempt) + " of " +
                    std::to_string(spec.backoff_limit + 1) + " ended " +
                    std::string(api::TaskPhaseName(last.phase));
  if (!last.error.code.empty()) {
    out += " (" + last.error.code + (last.error.message.empty() ? "" : ": " + last.error.message) +
           ")";
  }
  return out + "; attempt " + std::to_string(last.attempt + 1) + " at " + status.next_attempt_at;
}

bool AwaitingRetry(const api::Object& task, Clock::WallTime now) {
  const api::AgentTaskStatus& st = task.agent_task_status();
  if (st.phase != api::TaskPhase::kQueued || st.next_attempt_at.empty()) {
    return false;
  }
  const std::optional<Clock::WallTime> at = ParseRfc3339(st.next_attempt_at);
  return at.has_value() && now < *at;
}

}  // namespace sbx::controller
