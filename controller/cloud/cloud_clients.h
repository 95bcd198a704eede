// CloudClients: hands out the API clients of one Workspace (DESIGN §2 Workspace, §3).
//
// A Workspace object names a Databricks workspace (host + credentials) and an OpenAI project.
// Reconcilers ask for the client of the workspace a Sandbox refers to; the implementation
// resolves credentials at the moment of use (secret references, never stored), builds one client
// per workspace with its own request token bucket, and rebuilds it when the Workspace changes.
// A Workspace named "default" that does not exist falls back to the controller's environment.
// Thread-safe; returned pointers stay valid for the lifetime of the CloudClients.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/cloud/openai/agents_api.h"

namespace sbx::controller {

// Identity of a workspace in inventory and caches: "<namespace>/<workspaceRef>".
std::string WorkspaceId(const std::string& namespace_, const std::string& workspace_ref);
// The (namespace, workspaceRef) a WorkspaceId names; nullopt when it has no "/".
std::optional<std::pair<std::string, std::string>> ParseWorkspaceId(std::string_view id);

// The API a request to `url` belongs to, for metrics of a transport shared by every client:
// "openai" for paths under /agents/ (the Agents API), "databricks" otherwise (the Sandbox API and
// its OAuth endpoints).
std::string CloudApiOf(std::string_view url);

class CloudClients {
 public:
  virtual ~CloudClients() = default;

  // The Sandbox API of workspace `workspace_ref` in `namespace_`. kNotFound when there is no such
  // Workspace (and it is not the env-backed default); kFailedPrecondition when its credentials
  // cannot be resolved (message names the missing reference, never a secret value).
  virtual api::StatusOr<databricks::SandboxApi*> Sandboxes(const std::string& namespace_,
                                                           const std::string& workspace_ref) = 0;

  // The Agents API of the workspace's OpenAI project (spec.openai; for the env-backed default,
  // OPENAI_BASE_URL and OPENAI_API_KEY). Errors as Sandboxes.
  virtual api::StatusOr<openai::AgentsApi*> Agents(const std::string& namespace_,
                                                   const std::string& workspace_ref) = 0;

  // The executor ("environment") key that enters a sandbox of workspace `workspace_ref` as
  // CODEX_API_KEY: `ref` when set, else the controller's OPENAI_EXECUTOR_API_KEY — but that one
  // only for a workspace that uses the controller's own Databricks and OpenAI credentials (the
  // key goes where they go, never into a sandbox on a host a manifest chose). Held in memory
  // only; kFailedPrecondition naming `field` (or the variable) when it cannot be resolved, with
  // reason "CredentialsMissing" when the controller's key may not be used there.
  // A secret a manifest of namespace `namespace_` names (spec.executor.env[].valueFrom, a
  // GitSource's credentials), under the same rules as every reference (kInvalidArgument, reason
  // SecretNotAllowed, for a source the operator did not allow to that namespace). Held in memory
  // only; scrubbed from whatever sbxd writes.
  virtual api::StatusOr<std::string> Secret(const std::string& namespace_,
                                            const api::SecretRef& ref, std::string_view field) = 0;

  virtual api::StatusOr<std::string> ExecutorKey(const std::string& namespace_,
                                                 const std::string& workspace_ref,
                                                 const api::SecretRef& ref,
                                                 std::string_view field) = 0;
};

}  // namespace sbx::controller
