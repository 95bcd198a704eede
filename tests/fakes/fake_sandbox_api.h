// FakeSandboxApi: an in-memory SandboxApi with the documented state rules (create → PENDING,
// start only from STOPPED else kNotFound, 409 on a duplicate id, delete → kNotFound when absent)
// and knobs for tests: move a sandbox's state, delete it behind the controller's back, script
// exec-sync answers, inject the next error of a method, count calls per method. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "controller/cloud/databricks/sandbox_api.h"
#include "tests/fakes/fault_queue.h"

namespace sbx::testing {

namespace db = controller::databricks;

class FakeSandboxApi final : public db::SandboxApi {
 public:
  using ExecHandler = std::function<db::ExecResult(const std::string& id, const db::ExecRequest&)>;

  api::StatusOr<db::Sandbox> Create(const std::string& id, const db::Sandbox& desired,
                                    std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("create"));
    if (sandboxes_.count(id) != 0) {
      return api::AlreadyExistsError("sandbox " + id + " already exists");
    }
    db::Sandbox sb = desired;
    sb.sandbox_id = id;
    sb.name = "sandboxes/" + id;
    sb.state = db::SandboxState::kPending;
    sb.create_time = "2026-09-01T12:00:0" + std::to_string(++creates_ % 10) + "Z";
    sandboxes_[id] = sb;
    return sb;
  }
  api::StatusOr<db::Sandbox> Get(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("get"));
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) {
      return api::NotFoundError("sandbox " + id + " not found");
    }
    return it->second;
  }
  api::StatusOr<db::SandboxPage> List(int page_size, const std::string& token,
                                      std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("list"));
    db::SandboxPage page;
    const int size = page_size > 0 ? page_size : 100;
    auto it = token.empty() ? sandboxes_.begin() : sandboxes_.upper_bound(token);
    for (; it != sandboxes_.end() && static_cast<int>(page.sandboxes.size()) < size; ++it) {
      page.sandboxes.push_back(it->second);
    }
    if (it != sandboxes_.end() && !page.sandboxes.empty()) {
      page.next_page_token = page.sandboxes.back().sandbox_id;
    }
    return page;
  }
  api::StatusOr<std::vector<db::Sandbox>> ListAll(int page_size, std::stop_token stop) override {
    std::vector<db::Sandbox> all;
    std::string token;
    do {
      ASSIGN_OR_RETURN(db::SandboxPage page, List(page_size, token, stop));
      all.insert(all.end(), page.sandboxes.begin(), page.sandboxes.end());
      token = page.next_page_token;
    } while (!token.empty());
    return all;
  }
  api::StatusOr<db::Sandbox> Update(const std::string& id, const db::Sandbox& desired,
                                    const std::vector<std::string>& mask,
                                    std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("update"));
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) {
      return api::NotFoundError("sandbox " + id + " not found");
    }
    last_mask_ = mask;
    for (const std::string& path : mask) {
      if (path == db::kMaskDisplayName) {
        it->second.display_name = desired.display_name;
      } else if (path == db::kMaskInactivityTimeout) {
        it->second.inactivity_timeout = desired.inactivity_timeout;
      } else {
        return api::InvalidArgumentError("bad mask path " + path);
      }
    }
    return it->second;
  }
  api::Status Delete(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("delete"));
    if (sandboxes_.erase(id) == 0) {
      return api::NotFoundError("sandbox " + id + " not found");
    }
    return api::OkStatus();
  }
  api::StatusOr<db::Sandbox> Start(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("start"));
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second.state != db::SandboxState::kStopped) {
      return api::NotFoundError("no stopped sandbox " + id);
    }
    it->second.state = db::SandboxState::kPending;
    it->second.create_time = "2026-09-02T12:00:0" + std::to_string(++creates_ % 10) + "Z";
    return it->second;
  }
  api::StatusOr<db::Sandbox> Stop(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("stop"));
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) {
      return api::NotFoundError("sandbox " + id + " not found");
    }
    if (it->second.state != db::SandboxState::kStopped) {
      it->second.state = db::SandboxState::kStopping;
    }
    return it->second;
  }
  api::StatusOr<db::ExecResult> ExecSync(const std::string& id, const db::ExecRequest& request,
                                         std::stop_token) override {
    ExecHandler handler;
    {
      std::lock_guard lock(mu_);
      RETURN_IF_ERROR(Take("exec"));
      auto it = sandboxes_.find(id);
      if (it == sandboxes_.end() || it->second.state != db::SandboxState::kRunning) {
        return api::FailedPreconditionError("sandbox " + id + " is not running");
      }
      execs_.push_back(request);
      handler = exec_handler_;
    }
    if (handler) {
      return handler(id, request);
    }
    db::ExecResult r;
    r.status = db::ExecStatus::kCompleted;
    r.exit_code = 0;
    r.stdout_text = "boot-" + id + "\n";
    return r;
  }
  api::StatusOr<std::vector<db::Command>> ListCommands(const std::string&,
                                                       std::stop_token) override {
    return std::vector<db::Command>{};
  }

  // ---- test knobs ----
  void SetState(const std::string& id, db::SandboxState state) {
    std::lock_guard lock(mu_);
    sandboxes_.at(id).state = state;
  }
  void Put(const db::Sandbox& sb) {
    std::lock_guard lock(mu_);
    sandboxes_[sb.sandbox_id] = sb;
  }
  void Remove(const std::string& id) {
    std::lock_guard lock(mu_);
    sandboxes_.erase(id);
  }
  std::optional<db::Sandbox> Peek(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    return it == sandboxes_.end() ? std::nullopt : std::optional<db::Sandbox>(it->second);
  }
  int Calls(const std::string& method) const {
    std::lock_guard lock(mu_);
    return faults_.Calls(method);
  }
  int MutatingCalls() const {
    return Calls("create") + Calls("update") + Calls("delete") + Calls("start") + Calls("stop");
  }
  void FailNext(const std::string& method, api::Status status) {
    std::lock_guard lock(mu_);
    faults_.FailNext(method, std::move(status));
  }
  // What PacingBacklog reports (as EndpointPacing::Backlog would with callers in line).
  void SetPacingBacklog(std::chrono::milliseconds backlog) { backlog_ms_ = backlog.count(); }
  std::chrono::milliseconds PacingBacklog() const override {
    return std::chrono::milliseconds(backlog_ms_.load());
  }
  void SetExecHandler(ExecHandler handler) {
    std::lock_guard lock(mu_);
    exec_handler_ = std::move(handler);
  }
  std::vector<std::string> last_mask() const {
    std::lock_guard lock(mu_);
    return last_mask_;
  }
  std::vector<db::ExecRequest> execs() const {
    std::lock_guard lock(mu_);
    return execs_;
  }

 private:
  api::Status Take(const std::string& method) { return faults_.Take(method); }  // requires mu_

  std::atomic<int64_t> backlog_ms_{0};
  mutable std::mutex mu_;
  std::map<std::string, db::Sandbox> sandboxes_;  // Guarded by mu_.
  FaultQueue faults_;                             // Guarded by mu_.
  std::vector<std::string> last_mask_;            // Guarded by mu_.
  std::vector<db::ExecRequest> execs_;            // Guarded by mu_.
  ExecHandler exec_handler_;                      // Guarded by mu_.
  int creates_ = 0;                               // Guarded by mu_.
};

}  // namespace sbx::testing
