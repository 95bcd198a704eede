// SessionLifecycle: the agent sessions sbx creates, from create to delete, for the AgentWorker
// reconciler (one session per worker) and the garbage collector (sessions of workers that are
// gone). Every session is recorded in inventory (resource type "session", owner = the worker and
// its uid) and carries the worker's uid in its metadata (sbx.dev/uid):
//   * Ensure: a session whose create may have happened but was never recorded is found again
//     before creating another — an `intent` row (written before every create, keyed
//     "pending:<uid>") is resolved by the uid in the sessions' metadata, a live row whose id never
//     reached the worker's status by a GET — otherwise one is created behind an intent;
//   * Verify: a recorded session that is gone or failed is forgotten;
//   * Delete: an active turn is cancelled first, and a session the service refuses to delete is
//     abandoned after a bounded time (internal/session_deletion.h); an intent's sessions are
//     found by uid.
// Thread-safety: stateless apart from its collaborators; safe for concurrent use on different
// owners as the Store and AgentsApi are. Collaborators must outlive it.
#pragma once

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/event_recorder.h"
#include "controller/reconcilers/internal/session_deletion.h"
#include "controller/reconcilers/internal/unsent_creates.h"
#include "controller/store/store.h"

namespace sbx::controller {

inline constexpr char kInventorySession[] = "session";

// Who a session belongs to, and the inventory workspace it is recorded in. The session's
// metadata names them: sbx.dev/uid the owner's uid, sbx.dev/worker the worker it runs on (the
// owner, or a task's `worker` under session: PerTask) and, for a task, sbx.dev/task.
struct SessionOwner {
  api::ObjectKey key;
  std::string uid;
  std::string workspace;  // WorkspaceId(namespace, workspaceRef)
  std::string worker;     // a task's session: the name of the worker it runs on
};

// The create request of a session for an agent's settings (model, instructions) in
// `workspace_directory`: a worker's standing session, or a PerTask task's own.
openai::CreateSessionRequest SessionRequestOf(const api::AgentSpec& agent,
                                              std::string workspace_directory);

// The ids of the sessions in `all` whose metadata names `uid` (sbx.dev/uid).
std::vector<std::string> SessionsOfUid(const std::vector<openai::Session>& all,
                                       const std::string& uid);

class SessionLifecycle {
 public:
  SessionLifecycle(Store& store, EventRecorder& events, Clock& clock);

  // The owner's session: one found again (Normal event SessionAdopted) or created with `request`
  // behind an intent (SessionCreated); `request.metadata` gets the owner's name and uid. The
  // inventory row is live afterwards. Errors: the Store's and the AgentsApi's.
  api::StatusOr<openai::Session> Ensure(const SessionOwner& owner, openai::AgentsApi& agents,
                                        openai::CreateSessionRequest request, std::stop_token stop);

  // Whether session `id` still exists and has not failed; one that is gone or failed is
  // forgotten (its inventory row removed; Warning SessionLost). Errors of the GET other than
  // kNotFound are returned.
  api::StatusOr<bool> Verify(const SessionOwner& owner, openai::AgentsApi& agents,
                             const std::string& id, std::stop_token stop);

  // Deletes session `id`, of no use any more (its environment expired or failed, or the spec
  // needs a new one), and forgets it; one the service refuses to delete is abandoned at once
  // (retrying would only hold up its replacement).
  api::Status DeleteLost(const SessionOwner& owner, openai::AgentsApi& agents,
                         const std::string& id, std::stop_token stop);

  // The inventory rows of `uid`'s sessions in `workspace` that are not abandoned.
  api::StatusOr<std::vector<Store::InventoryRecord>> Recorded(const std::string& workspace,
                                                              const std::string& uid);

  // What deleting the sessions of one inventory row did.
  struct RowDeletion {
    int attempts = 0;     // sessions tried (each costs calls)
    int deleted = 0;      // of which deleted (or already gone)
    bool settled = true;  // no refusal is still being retried (each is deleted or abandoned)
  };
  // Deletes the sessions `row` records: its own, or for an intent those found by uid in
  // `listed` (listed once, lazily, and shared across rows). A refusal is recorded per
  // `policy`; the row is removed unless it now records a refusal. `on_result` is called with
  // each session's id and what deleting it did (for events).
  using OnResult =
      std::function<void(const std::string&, const reconcilers_internal::SessionDeleteResult&)>;
  api::StatusOr<RowDeletion> DeleteRecorded(const Store::InventoryRecord& row,
                                            openai::AgentsApi& agents,
                                            std::optional<std::vector<openai::Session>>& listed,
                                            const reconcilers_internal::SessionDeletePolicy& policy,
                                            std::stop_token stop, const OnResult& on_result);

 private:
  api::StatusOr<std::optional<openai::Session>> FindUnrecorded(const SessionOwner& owner,
                                                               openai::AgentsApi& agents,
                                                               bool intent, std::stop_token stop);
  Store::InventoryRecord Row(const SessionOwner& owner) const;

  Store& store_;
  EventRecorder& events_;
  Clock& clock_;
  reconcilers_internal::UnsentCreates unsent_creates_;  // by pending id
};

}  // namespace sbx::controller
