#include "controller/reconcilers/internal/session_deletion.h"

#include <utility>

namespace sbx::controller::reconcilers_internal {

using api::StatusCode;

api::StatusOr<SessionDeleteResult> CancelThenDeleteSession(openai::AgentsApi& agents,
                                                           const std::string& session_id,
                                                           std::stop_token stop) {
  SessionDeleteResult result;
  api::StatusOr<openai::Session> session = agents.GetSession(session_id, stop);
  if (session.status().code() == StatusCode::kNotFound) {
    result.deleted = true;
    return result;
  }
  RETURN_IF_ERROR(session.status());
  // Only an active turn is cancelled: a cancel costs a call, and whether the service holds a
  // cancel for a disconnected executor (as it holds input) is not documented.
  if (session->status == openai::SessionStatus::kInProgress ||
      session->status == openai::SessionStatus::kRequiresAction) {
    api::Status cancelled =
        agents.SendEvents(session_id, {openai::InputEvent::Cancel()}, /*idempotency_key=*/"", stop);
    if (cancelled.code() == StatusCode::kNotFound) {
      result.deleted = true;
      return result;
    }
    // A 409 here (e.g. the session failed meanwhile) is no reason not to try the DELETE.
    if (!cancelled.ok() && cancelled.code() != StatusCode::kAborted) {
      return cancelled;
    }
    result.cancelled = cancelled.ok();
  }
  api::Status deleted = agents.DeleteSession(session_id, stop);
  if (deleted.ok() || deleted.code() == StatusCode::kNotFound) {
    result.deleted = true;
    return result;
  }
  if (deleted.code() != StatusCode::kAborted) {
    return deleted;
  }
  result.refusal = deleted.message();
  return result;
}

api::StatusOr<bool> RecordSessionRefusal(Store& store, EventRecorder& events,
                                         Store::InventoryRecord row, const std::string& session_id,
                                         const std::string& refusal, Clock::WallTime now,
                                         const SessionDeletePolicy& policy) {
  const bool first = row.external_id != session_id || row.state != Store::InventoryState::kDeleting;
  const std::optional<Clock::WallTime> since = ParseRfc3339(row.updated_at);
  row.external_id = session_id;
  if (first || !since) {
    row.state = Store::InventoryState::kDeleting;
    row.updated_at = FormatRfc3339(now);
    RETURN_IF_ERROR(store.PutInventory(row));
    events.Warning(row.owner, "SessionDeleteRefused",
                   "session " + session_id + " refused deletion, will retry: " + refusal);
    return false;
  }
  if (now - *since < policy.give_up_after) {
    return false;  // keep updated_at: it is the first refusal, the start of the time bound
  }
  RETURN_IF_ERROR(AbandonSession(store, events, std::move(row), session_id, refusal, now));
  return true;
}

api::Status AbandonSession(Store& store, EventRecorder& events, Store::InventoryRecord row,
                           const std::string& session_id, const std::string& refusal,
                           Clock::WallTime now) {
  row.external_id = session_id;
  row.state = Store::InventoryState::kAbandoned;
  row.updated_at = FormatRfc3339(now);
  RETURN_IF_ERROR(store.PutInventory(row));
  events.Warning(row.owner, "SessionNotDeletable",
                 "session " + session_id + " in workspace " + row.workspace +
                     " refuses deletion; abandoned (listed by `sbxctl get abandoned`; delete it "
                     "in OpenAI yourself): " +
                     refusal);
  return api::OkStatus();
}

}  // namespace sbx::controller::reconcilers_internal
