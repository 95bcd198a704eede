#include "controller/reconcilers/session_lifecycle.h"

#include <utility>

namespace sbx::controller {
namespace {

using api::StatusCode;
using api::StatusOr;

constexpr char kMetaWorker[] = "sbx.dev/worker";
constexpr char kMetaTask[] = "sbx.dev/task";
constexpr char kMetaUid[] = "sbx.dev/uid";

std::string PendingId(const std::string& uid) { return "pending:" + uid; }

// Every session of the project, in pages as full as the service allows: each page is a call that
// may fail and fail the whole listing (100 sessions in pages of 20 are 5 calls, and 41% of such
// listings failed on a cloud failing 10% of its calls: issue #25's degraded check).
StatusOr<std::vector<openai::Session>> ListAll(openai::AgentsApi& agents, std::stop_token stop) {
  return agents.ListAllSessions(openai::ListSessionsParams{.limit = openai::kMaxPageLimit}, stop);
}

bool OfUid(const openai::Session& s, const std::string& uid) {
  auto it = s.metadata.find(kMetaUid);
  return it != s.metadata.end() && it->second == uid;
}

}  // namespace

openai::CreateSessionRequest SessionRequestOf(const api::AgentSpec& agent,
                                              std::string workspace_directory) {
  openai::CreateSessionRequest request;
  request.model = agent.model;
  if (!agent.instructions.empty()) {
    request.instructions = agent.instructions;
  }
  request.workspace_directory = std::move(workspace_directory);
  return request;
}

std::vector<std::string> SessionsOfUid(const std::vector<openai::Session>& all,
                                       const std::string& uid) {
  std::vector<std::string> ids;
  for (const openai::Session& s : all) {
    if (OfUid(s, uid)) {
      ids.push_back(s.id);
    }
  }
  return ids;
}

SessionLifecycle::SessionLifecycle(Store& store, EventRecorder& events, Clock& clock)
    : store_(store), events_(events), clock_(clock) {}

Store::InventoryRecord SessionLifecycle::Row(const SessionOwner& owner) const {
  Store::InventoryRecord record;
  record.workspace = owner.workspace;
  record.resource_type = kInventorySession;
  record.owner = owner.key;
  record.owner_uid = owner.uid;
  record.created_at = record.updated_at = FormatRfc3339(clock_.Now());
  return record;
}

StatusOr<openai::Session> SessionLifecycle::Ensure(const SessionOwner& owner,
                                                   openai::AgentsApi& agents,
                                                   openai::CreateSessionRequest request,
                                                   std::stop_token stop) {
  // The session id is only known after the create, so the intent is keyed by the owner's uid.
  const std::string pending = PendingId(owner.uid);
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> intent,
                   store_.GetInventory(owner.workspace, kInventorySession, pending));
  // An intent whose create this sbxd never sent (its pacing wait was given back) needs no look.
  const bool unsent = intent && unsent_creates_.Unsent(pending);
  std::optional<openai::Session> session;
  if (!unsent) {
    ASSIGN_OR_RETURN(session, FindUnrecorded(owner, agents, intent.has_value(), stop));
  }
  Store::InventoryRecord record = Row(owner);
  if (!session) {
    record.external_id = pending;
    record.state = Store::InventoryState::kIntent;
    RETURN_IF_ERROR(store_.PutInventory(record));
    const std::string ns = owner.key.namespace_ + "/";
    request.metadata = {{kMetaUid, owner.uid}};
    if (owner.worker.empty()) {
      request.metadata[kMetaWorker] = ns + owner.key.name;
    } else {
      request.metadata[kMetaWorker] = ns + owner.worker;
      request.metadata[kMetaTask] = ns + owner.key.name;
    }
    StatusOr<openai::Session> created = agents.CreateSession(request, stop);
    unsent_creates_.Record(pending, created.status());
    RETURN_IF_ERROR(created.status());
    session = *std::move(created);
    events_.Normal(owner.key, "SessionCreated", "created session " + session->id);
  } else {
    events_.Normal(owner.key, "SessionAdopted", "adopted session " + session->id);
  }
  record.external_id = session->id;
  record.state = Store::InventoryState::kLive;
  RETURN_IF_ERROR(store_.PutInventory(record));
  RETURN_IF_ERROR(store_.DeleteInventory(owner.workspace, kInventorySession, pending));
  return *std::move(session);
}

// A session of this owner that a crash kept out of its status: after a crashed create (an
// intent), the one carrying the owner's uid; else one a live row records (the create finished
// and was recorded, then sbxd died before the id reached the status). Failed ones do not count.
StatusOr<std::optional<openai::Session>> SessionLifecycle::FindUnrecorded(const SessionOwner& owner,
                                                                          openai::AgentsApi& agents,
                                                                          bool intent,
                                                                          std::stop_token stop) {
  if (intent) {
    ASSIGN_OR_RETURN(std::vector<openai::Session> all, ListAll(agents, stop));
    for (openai::Session& s : all) {
      if (s.status != openai::SessionStatus::kFailed && OfUid(s, owner.uid)) {
        return std::optional<openai::Session>(std::move(s));
      }
    }
    return std::optional<openai::Session>();
  }
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records,
                   store_.ListInventory(owner.workspace));
  for (const Store::InventoryRecord& r : records) {
    if (r.resource_type != kInventorySession || r.owner_uid != owner.uid ||
        r.state != Store::InventoryState::kLive) {
      continue;
    }
    StatusOr<openai::Session> s = agents.GetSession(r.external_id, stop);
    if (s.ok() && s->status != openai::SessionStatus::kFailed) {
      return std::optional<openai::Session>(*std::move(s));
    }
    if (!s.ok() && s.status().code() != StatusCode::kNotFound) {
      return s.status();
    }
    RETURN_IF_ERROR(store_.DeleteInventory(owner.workspace, kInventorySession, r.external_id));
  }
  return std::optional<openai::Session>();
}

StatusOr<bool> SessionLifecycle::Verify(const SessionOwner& owner, openai::AgentsApi& agents,
                                        const std::string& id, std::stop_token stop) {
  StatusOr<openai::Session> session = agents.GetSession(id, stop);
  const bool gone = session.status().code() == StatusCode::kNotFound ||
                    (session.ok() && session->status == openai::SessionStatus::kFailed);
  if (!session.ok() && !gone) {
    return session.status();
  }
  if (!gone) {
    return true;
  }
  events_.Warning(owner.key, "SessionLost",
                  "session " + id + " is gone or failed; creating a new one");
  RETURN_IF_ERROR(store_.DeleteInventory(owner.workspace, kInventorySession, id));
  return false;
}

api::Status SessionLifecycle::DeleteLost(const SessionOwner& owner, openai::AgentsApi& agents,
                                         const std::string& id, std::stop_token stop) {
  ASSIGN_OR_RETURN(reconcilers_internal::SessionDeleteResult result,
                   reconcilers_internal::CancelThenDeleteSession(agents, id, stop));
  if (result.deleted) {
    return store_.DeleteInventory(owner.workspace, kInventorySession, id);
  }
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> row,
                   store_.GetInventory(owner.workspace, kInventorySession, id));
  return reconcilers_internal::AbandonSession(store_, events_, row ? *std::move(row) : Row(owner),
                                              id, result.refusal, clock_.Now());
}

StatusOr<std::vector<Store::InventoryRecord>> SessionLifecycle::Recorded(
    const std::string& workspace, const std::string& uid) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(workspace));
  std::erase_if(records, [&](const Store::InventoryRecord& r) {
    return r.resource_type != kInventorySession || r.owner_uid != uid ||
           r.state == Store::InventoryState::kAbandoned;
  });
  return records;
}

StatusOr<SessionLifecycle::RowDeletion> SessionLifecycle::DeleteRecorded(
    const Store::InventoryRecord& row, openai::AgentsApi& agents,
    std::optional<std::vector<openai::Session>>& listed,
    const reconcilers_internal::SessionDeletePolicy& policy, std::stop_token stop,
    const OnResult& on_result) {
  std::vector<std::string> ids;
  if (row.state == Store::InventoryState::kIntent) {
    if (!listed) {
      ASSIGN_OR_RETURN(listed, ListAll(agents, stop));
    }
    ids = SessionsOfUid(*listed, row.owner_uid);
  } else {
    ids.push_back(row.external_id);
  }
  RowDeletion done;
  bool keep_row = false;
  for (const std::string& id : ids) {
    ++done.attempts;
    ASSIGN_OR_RETURN(reconcilers_internal::SessionDeleteResult result,
                     reconcilers_internal::CancelThenDeleteSession(agents, id, stop));
    on_result(id, result);
    if (result.deleted) {
      ++done.deleted;
      continue;
    }
    ASSIGN_OR_RETURN(bool abandoned,
                     reconcilers_internal::RecordSessionRefusal(
                         store_, events_, row, id, result.refusal, clock_.Now(), policy));
    done.settled = done.settled && abandoned;
    keep_row = keep_row || id == row.external_id;  // its row now says deleting or abandoned
  }
  if (!keep_row) {
    RETURN_IF_ERROR(store_.DeleteInventory(row.workspace, kInventorySession, row.external_id));
  }
  return done;
}

}  // namespace sbx::controller
