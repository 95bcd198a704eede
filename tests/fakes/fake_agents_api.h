// FakeAgentsApi: an in-memory AgentsApi. Sessions get ids sess_N and self-hosted environments
// ccarenv_N (status pending until the test says otherwise); knobs to fail the next call of a
// method, mark a session failed or gone, set an environment's status, run a turn, and count
// calls. DELETE follows the real service (reference §1.6, like the emulator's
// --strict-session-delete): a session whose turn is running → kAborted (409, cancel first);
// a session none of whose turns ever ran → kAborted "session has no durably bound CCA root",
// also after a cancel (SetStrictDelete(false) turns that rule off). SendEvents supports the
// cancel event only: it ends the active turn (unless SetCancelEndsTurn(false)).
// Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "controller/cloud/openai/agents_api.h"
#include "tests/fakes/fault_queue.h"

namespace sbx::testing {

namespace oa = controller::openai;

class FakeAgentsApi final : public oa::AgentsApi {
 public:
  api::StatusOr<oa::Session> CreateSession(const oa::CreateSessionRequest& request,
                                           std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("create"));
    oa::Session s;
    s.id = "sess_" + std::to_string(++next_);
    s.status = oa::SessionStatus::kIdle;
    s.environment.type = oa::EnvironmentType::kSelfHosted;
    s.environment.id = "ccarenv_" + std::to_string(next_);
    s.environment.remote_url = "http://127.0.0.1:9/v1";
    s.environment.workspace_directory = request.workspace_directory;
    s.agent.model = request.model;
    s.agent.instructions = request.instructions;
    s.metadata = request.metadata;
    sessions_[s.id] = s;
    environments_[s.environment.id] = oa::EnvironmentStatus::kPending;
    return s;
  }
  api::StatusOr<oa::Session> GetSession(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("get"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    return it->second;
  }
  api::StatusOr<oa::Session> UpdateSessionAgent(const std::string& id, const std::string& model,
                                                const std::string& instructions,
                                                std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("update"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    it->second.agent.model = model;
    it->second.agent.instructions = instructions;
    return it->second;
  }
  api::StatusOr<oa::SessionPage> ListSessions(const oa::ListSessionsParams&,
                                              std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("list"));
    oa::SessionPage page;
    for (const auto& [id, s] : sessions_) {
      page.sessions.push_back(s);
    }
    return page;
  }
  api::StatusOr<std::vector<oa::Session>> ListAllSessions(oa::ListSessionsParams params,
                                                          std::stop_token stop) override {
    ASSIGN_OR_RETURN(oa::SessionPage page, ListSessions(params, stop));
    return page.sessions;
  }
  api::Status DeleteSession(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("delete"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    if (it->second.status == oa::SessionStatus::kInProgress) {
      return api::AbortedError("HTTP 409 conflict_error: Session " + id +
                               " has a running turn; cancel it first");
    }
    if (strict_delete_ && bound_.count(id) == 0) {
      return api::AbortedError("HTTP 409 conflict_error: session has no durably bound CCA root");
    }
    sessions_.erase(it);
    return api::OkStatus();
  }
  api::Status SendEvents(const std::string& id, const std::vector<oa::InputEvent>& events,
                         const std::string&, std::stop_token) override {
    std::lock_guard lock(mu_);
    for (const oa::InputEvent& e : events) {
      if (e.kind != oa::InputEvent::Kind::kCancel) {
        return api::UnimplementedError("the fake accepts only cancel events");
      }
    }
    RETURN_IF_ERROR(Take("cancel"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    if (cancel_ends_turn_ && it->second.status == oa::SessionStatus::kInProgress) {
      it->second.status = oa::SessionStatus::kIdle;
    }
    return api::OkStatus();
  }
  api::StatusOr<oa::Environment> GetEnvironment(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("environment"));
    auto it = environments_.find(id);
    if (it == environments_.end()) {
      return api::NotFoundError("environment " + id + " not found");
    }
    oa::Environment e;
    e.id = id;
    e.type = oa::EnvironmentType::kSelfHosted;
    e.status = it->second;
    e.status_raw = std::string(oa::EnvironmentStatusName(it->second));
    return e;
  }
  api::Status StreamEvents(const std::string&, const oa::StreamCallbacks&,
                           std::stop_token) override {
    return api::UnimplementedError("not used by the reconciler");
  }

  // ---- test knobs ----
  void SetEnvironmentStatus(const std::string& env_id, oa::EnvironmentStatus status) {
    std::lock_guard lock(mu_);
    environments_[env_id] = status;
  }
  void FailSession(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.at(id).status = oa::SessionStatus::kFailed;
  }
  // A turn starts running (status in_progress); the session's root is bound from now on.
  void StartTurn(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.at(id).status = oa::SessionStatus::kInProgress;
    bound_.insert(id);
  }
  // The running turn ends by itself (status idle).
  void FinishTurn(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.at(id).status = oa::SessionStatus::kIdle;
  }
  void SetStrictDelete(bool strict) {
    std::lock_guard lock(mu_);
    strict_delete_ = strict;
  }
  void SetCancelEndsTurn(bool ends) {
    std::lock_guard lock(mu_);
    cancel_ends_turn_ = ends;
  }
  void ForgetSession(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }
  bool HasSession(const std::string& id) const {
    std::lock_guard lock(mu_);
    return sessions_.count(id) != 0;
  }
  int SessionCount() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(sessions_.size());
  }
  int Calls(const std::string& method) const {
    std::lock_guard lock(mu_);
    return faults_.Calls(method);
  }
  void FailNext(const std::string& method, api::Status status) {
    std::lock_guard lock(mu_);
    faults_.FailNext(method, std::move(status));
  }

 private:
  api::Status Take(const std::string& method) { return faults_.Take(method); }  // requires mu_

  mutable std::mutex mu_;
  int next_ = 0;                                               // Guarded by mu_.
  std::map<std::string, oa::Session> sessions_;                // Guarded by mu_.
  std::map<std::string, oa::EnvironmentStatus> environments_;  // Guarded by mu_.
  FaultQueue faults_;                                          // Guarded by mu_.
  std::set<std::string> bound_;   // sessions a turn has run in. Guarded by mu_.
  bool strict_delete_ = true;     // Guarded by mu_.
  bool cancel_ends_turn_ = true;  // Guarded by mu_.
};

}  // namespace sbx::testing
