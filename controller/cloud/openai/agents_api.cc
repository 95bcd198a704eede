#include "controller/cloud/openai/agents_api.h"

#include <array>
#include <set>
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

constexpr std::array<std::pair<ItemType, std::string_view>, 2> kItemTypes{{
    {ItemType::kMessage, "message"},
    {ItemType::kCommandExecution, "command_execution"},
}};

constexpr std::array<std::pair<ItemStatus, std::string_view>, 4> kItemStatuses{{
    {ItemStatus::kInProgress, "in_progress"},
    {ItemStatus::kCompleted, "completed"},
    {ItemStatus::kFailed, "failed"},
    {ItemStatus::kIncomplete, "incomplete"},
}};

// Follows `after = last_id` while has_more, the one cursor loop of every List*All.
// `fetch(after)` returns one ListPage-shaped page whose rows are in `rows(page)`.
template <typename T, typename Page, typename Fetch, typename Rows>
StatusOr<std::vector<T>> FollowCursor(std::string_view what, std::string after, Fetch fetch,
                                      Rows rows) {
  std::vector<T> all;
  std::set<std::string> cursors;
  while (true) {
    StatusOr<Page> page = fetch(after);
    if (!page.ok()) {
      return page.status();
    }
    std::vector<T>& got = rows(*page);
    const bool empty = got.empty();
    for (T& row : got) {
      all.push_back(std::move(row));
    }
    if (!page->has_more) {
      return all;
    }
    // The SDK falls back to the last row's id when last_id is absent.
    std::string next = page->last_id;
    if (next.empty() && !empty) {
      next = all.back().id;
    }
    if (next.empty() || !cursors.insert(next).second) {
      return api::InternalError(std::string(what) +
                                ": the server's cursor does not advance (after=\"" + next + "\")");
    }
    after = std::move(next);
  }
}

}  // namespace

std::string_view SessionStatusName(SessionStatus s) { return NameOf(kSessionStatuses, s); }
std::string_view EnvironmentTypeName(EnvironmentType t) { return NameOf(kEnvironmentTypes, t); }
std::string_view EnvironmentStatusName(EnvironmentStatus s) {
  return NameOf(kEnvironmentStatuses, s);
}
std::string_view TurnStatusName(TurnStatus s) { return NameOf(kTurnStatuses, s); }
std::string_view ItemTypeName(ItemType t) {
  return t == ItemType::kOther ? "other" : NameOf(kItemTypes, t);
}
std::string_view ItemStatusName(ItemStatus s) { return NameOf(kItemStatuses, s); }

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

ItemType ParseItemType(std::string_view raw) { return ValueOf(kItemTypes, raw, ItemType::kOther); }
ItemStatus ParseItemStatus(std::string_view raw) {
  return ValueOf(kItemStatuses, raw, ItemStatus::kUnknown);
}

StatusOr<std::vector<Session>> AgentsApi::ListAllSessions(ListSessionsParams params,
                                                          std::stop_token stop) {
  return FollowCursor<Session, SessionPage>(
      "list sessions", params.after,
      [&](const std::string& after) {
        params.after = after;
        return ListSessions(params, stop);
      },
      [](SessionPage& page) -> std::vector<Session>& { return page.sessions; });
}

StatusOr<std::vector<Item>> AgentsApi::ListAllTurnItems(const std::string& session_id,
                                                        const std::string& turn_id,
                                                        ListParams params, std::stop_token stop) {
  return FollowCursor<Item, ItemPage>(
      "list turn items", params.after,
      [&](const std::string& after) {
        params.after = after;
        return ListTurnItems(session_id, turn_id, params, stop);
      },
      [](ItemPage& page) -> std::vector<Item>& { return page.data; });
}

bool IsRootTurnTerminal(const SessionEvent& event) {
  const bool terminal = event.kind == EventKind::kTurnCompleted ||
                        event.kind == EventKind::kTurnFailed ||
                        event.kind == EventKind::kTurnCancelled;
  return terminal && event.turn.has_value() && !event.turn->subagent_id.has_value();
}

}  // namespace sbx::controller::openai
