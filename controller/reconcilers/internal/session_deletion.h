// Deleting an agent session the way the real service allows it (reference/openai-agents-api.md
// §1.6), shared by the AgentWorker finalizer and the garbage collector:
//   * "running execution must be cancelled first": an active turn is cancelled with the input
//     event agent.session.input.cancel before the DELETE;
//   * the service can refuse a DELETE for good: a self-hosted session whose first turn never ran
//     answered 409 conflict_error "session has no durably bound CCA root", also after a cancel —
//     exactly an sbx worker that never got a task. Such a session is retried for a bounded time
//     and then recorded as abandoned (inventory state kAbandoned, Warning event
//     SessionNotDeletable naming the session), so that no finalizer and no GC pass loops on it.
// The time bound is kept in the inventory row (state kDeleting, updated_at = first refusal), so a
// restart of sbxd neither resets nor extends it.
// Stateless functions; thread-safe as the Store and the AgentsApi are.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/event_recorder.h"
#include "controller/store/store.h"

namespace sbx::controller::reconcilers_internal {

struct SessionDeletePolicy {
  // A session still refusing deletion this long after its first refusal is abandoned. Long
  // enough for a cancelled turn to end (observed: ~4 s from cancel to turn.cancelled).
  std::chrono::milliseconds give_up_after{std::chrono::seconds(10)};
  // How soon a refused deletion is tried again (the AgentWorker finalizer's requeue).
  std::chrono::milliseconds retry_after{std::chrono::seconds(2)};
};

struct SessionDeleteResult {
  bool deleted = false;    // gone now (deleted, or already absent)
  bool cancelled = false;  // an active turn was cancelled first
  std::string refusal;     // when not deleted: the server's message for its 409
};

// GET the session (404 → deleted); when it has an active turn (status in_progress or
// requires_action) send agent.session.input.cancel; then DELETE (OK or 404 → deleted). A 409
// (kAborted) is not an error but a refusal: {deleted=false, refusal=message}. Any other error of
// the GET, the cancel or the DELETE is returned as is (the caller retries it like any error).
api::StatusOr<SessionDeleteResult> CancelThenDeleteSession(openai::AgentsApi& agents,
                                                           const std::string& session_id,
                                                           std::stop_token stop);

// After `session_id` was refused (`refusal` is the server's message): `row` is its inventory
// record (another state, e.g. an intent's, is replaced by a row for `session_id`). The first
// refusal marks the row kDeleting at `now` and returns false (retry later); a refusal
// `policy.give_up_after` or more after that marks it kAbandoned, records a Warning
// SessionNotDeletable on the row's owner, and returns true. Store errors are returned.
api::StatusOr<bool> RecordSessionRefusal(Store& store, EventRecorder& events,
                                         Store::InventoryRecord row, const std::string& session_id,
                                         const std::string& refusal, Clock::WallTime now,
                                         const SessionDeletePolicy& policy);

// Marks `row` (as the row of `session_id`) kAbandoned at `now` and records a Warning
// SessionNotDeletable on its owner naming the session and `refusal`. For a session whose
// refusal is not worth retrying (one that is lost anyway). Store errors are returned.
api::Status AbandonSession(Store& store, EventRecorder& events, Store::InventoryRecord row,
                           const std::string& session_id, const std::string& refusal,
                           Clock::WallTime now);

}  // namespace sbx::controller::reconcilers_internal
