#include "controller/cloud/openai/agents_api.h"

#include <array>
#include <utility>

namespace sbx::controller::openai {
namespace {

template <typename E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [e, name] : table) {
    if (e == value) {
      return name;
    }
  }
  return "unknown";
}

template <typename E, size_t N>
E ValueOf(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view raw,
          E unknown) {
  for (const auto& [e, name] : table) {
    if (name == raw) {
      return e;
    }
  }
  return unknown;
}

constexpr std::array<std::pair<SessionStatus, std::string_view>, 4> kSessionStatuses{{
    {SessionStatus::kIdle, "idle"},
    {SessionStatus::kInProgress, "in_progress"},
    {SessionStatus::kRequiresAction, "requires_action"},
    {SessionStatus::kFailed, "failed"},
}};

constexpr std::array<std::pair<EnvironmentType, std::string_view>, 3> kEnvironmentTypes{{
    {EnvironmentType::kNone, "none"},
    {EnvironmentType::kOpenAiHosted, "openai_hosted"},
    {EnvironmentType::kSelfHosted, "self_hosted"},
}};

constexpr std::array<std::pair<EnvironmentStatus, std::string_view>, 7> kEnvironmentStatuses{{
    {EnvironmentStatus::kPending, "pending"},
    {EnvironmentStatus::kReady, "ready"},
    {EnvironmentStatus::kConnected, "connected"},
    {EnvironmentStatus::kDisconnected, "disconnected"},
    {EnvironmentStatus::kSuspended, "suspended"},
    {EnvironmentStatus::kExpired, "expired"},
    {EnvironmentStatus::kFailed, "failed"},
}};

constexpr std::array<std::pair<TurnStatus, std::string_view>, 6> kTurnStatuses{{
    {TurnStatus::kQueued, "queued"},
    {TurnStatus::kInProgress, "in_progress"},
    {TurnStatus::kWaiting, "waiting"},
    {TurnStatus::kCompleted, "completed"},
    {TurnStatus::kFailed, "failed"},
    {TurnStatus::kCancelled, "cancelled"},
}};

}  // namespace

std::string_view SessionStatusName(SessionStatus s) { return NameOf(kSessionStatuses, s); }
std::string_view EnvironmentTypeName(EnvironmentType t) { return NameOf(kEnvironmentTypes, t); }
std::string_view EnvironmentStatusName(EnvironmentStatus s) {
  return NameOf(kEnvironmentStatuses, s);
}
std::string_view TurnStatusName(TurnStatus s) { return NameOf(kTurnStatuses, s); }

SessionStatus ParseSessionStatus(std::string_view raw) {
  return ValueOf(kSessionStatuses, raw, SessionStatus::kUnknown);
}
EnvironmentType ParseEnvironmentType(std::string_view raw) {
  return ValueOf(kEnvironmentTypes, raw, EnvironmentType::kUnknown);
}
EnvironmentStatus ParseEnvironmentStatus(std::string_view raw) {
  return ValueOf(kEnvironmentStatuses, raw, EnvironmentStatus::kUnknown);
}
TurnStatus ParseTurnStatus(std::string_view raw) {
  return ValueOf(kTurnStatuses, raw, TurnStatus::kUnknown);
}

bool IsRootTurnTerminal(const SessionEvent& event) {
  const bool terminal = event.kind == EventKind::kTurnCompleted ||
                        event.kind == EventKind::kTurnFailed ||
                        event.kind == EventKind::kTurnCancelled;
  return terminal && event.turn.has_value() && !event.turn->subagent_id.has_value();
}

}  // namespace sbx::controller::openai
