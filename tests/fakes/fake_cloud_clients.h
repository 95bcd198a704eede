// FakeCloudClients: CloudClients that hands out one FakeSandboxApi per workspace id, and can be
// told that a workspace is missing or misconfigured. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "controller/cloud/cloud_clients.h"
#include "tests/fakes/fake_agents_api.h"
#include "tests/fakes/fake_sandbox_api.h"

namespace sbx::testing {

class FakeCloudClients final : public controller::CloudClients {
 public:
  api::StatusOr<controller::databricks::SandboxApi*> Sandboxes(
      const std::string& namespace_, const std::string& workspace_ref) override {
    std::lock_guard lock(mu_);
    const std::string id = controller::WorkspaceId(namespace_, workspace_ref);
    RETURN_IF_ERROR(Resolve(id));
    return &Get(apis_, id);
  }

  api::StatusOr<controller::openai::AgentsApi*> Agents(const std::string& namespace_,
                                                       const std::string& workspace_ref) override {
    std::lock_guard lock(mu_);
    const std::string id = controller::WorkspaceId(namespace_, workspace_ref);
    RETURN_IF_ERROR(Resolve(id));
    return &Get(agents_, id);
  }
  // "secret:<env or file name>" — or SecretNotAllowed for names without SBX_SECRET_. The
  // namespace scoping is the resolver's (secret_resolver_test.cc); the last one asked is kept.
  api::StatusOr<std::string> Secret(const std::string& namespace_, const api::SecretRef& ref,
                                    std::string_view field) override {
    {
      std::lock_guard lock(mu_);
      last_secret_namespace_ = namespace_;
    }
    if (!ref.env.empty() && !ref.env.starts_with("SBX_SECRET_")) {
      return api::InvalidArgumentError(std::string(field) + ": not allowed")
          .WithReason("SecretNotAllowed");
    }
    return "secret:" + ref.env + ref.file;
  }
  api::StatusOr<std::string> ExecutorKey(const std::string& /*namespace_*/,
                                         const std::string& /*workspace_ref*/,
                                         const api::SecretRef& ref,
                                         std::string_view field) override {
    std::lock_guard lock(mu_);
    if (executor_key_.empty()) {
      return api::FailedPreconditionError(std::string(field) + ": not set");
    }
    return ref.env.empty() ? executor_key_ : executor_key_ + "-" + ref.env;
  }

  FakeAgentsApi& agents(const std::string& workspace_id = "default/default") {
    std::lock_guard lock(mu_);
    return Get(agents_, workspace_id);
  }
  void SetExecutorKey(std::string key) {
    std::lock_guard lock(mu_);
    executor_key_ = std::move(key);
  }

  FakeSandboxApi& api(const std::string& workspace_id = "default/default") {
    std::lock_guard lock(mu_);
    return Get(apis_, workspace_id);
  }
  void SetMissing(const std::string& workspace_id) {
    std::lock_guard lock(mu_);
    missing_.insert(workspace_id);
  }
  // Sandboxes() and Agents() of `workspace_id` fail with `error`, as when its credentials cannot
  // be resolved (e.g. reason CredentialsMissing); an OK status clears it.
  void SetResolveError(const std::string& workspace_id, api::Status error) {
    std::lock_guard lock(mu_);
    if (error.ok()) {
      resolve_errors_.erase(workspace_id);
    } else {
      resolve_errors_[workspace_id] = std::move(error);
    }
  }

  // The namespace the last Secret() was asked for.
  std::string last_secret_namespace() {
    std::lock_guard lock(mu_);
    return last_secret_namespace_;
  }

 private:
  // The error of a workspace that is missing or cannot be resolved, else OK. Requires mu_.
  api::Status Resolve(const std::string& id) const {
    if (missing_.count(id) != 0) {
      return api::NotFoundError("Workspace " + id + " not found");
    }
    if (auto error = resolve_errors_.find(id); error != resolve_errors_.end()) {
      return error->second;
    }
    return api::OkStatus();
  }

  // The fake of `id`, made on first use. Requires mu_.
  template <typename Fake>
  static Fake& Get(std::map<std::string, std::unique_ptr<Fake>>& fakes, const std::string& id) {
    std::unique_ptr<Fake>& fake = fakes[id];
    if (!fake) {
      fake = std::make_unique<Fake>();
    }
    return *fake;
  }

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<FakeSandboxApi>> apis_;   // Guarded by mu_.
  std::set<std::string> missing_;                                 // Guarded by mu_.
  std::map<std::string, api::Status> resolve_errors_;             // Guarded by mu_.
  std::map<std::string, std::unique_ptr<FakeAgentsApi>> agents_;  // Guarded by mu_.
  std::string executor_key_ = "sk-executor-test";                 // Guarded by mu_.
  std::string last_secret_namespace_;                             // Guarded by mu_.
};

}  // namespace sbx::testing
