// HttpCloudClients: the real CloudClients. For each Workspace it resolves credentials the way the
// Databricks SDKs do (Workspace spec → controller environment → ~/.databrickscfg profile), builds
// one HttpSandboxApi with its own request TokenBucket (spec.limits.requestsPerSecond, default
// 15/s like the Go SDK), and rebuilds it when the Workspace's generation or a resolved secret
// changes. Secrets are resolved at most every `secret_ttl` and held in memory only.
//
// A Workspace named "default" that does not exist uses the controller's environment alone.
// Thread-safe. Clients are never destroyed before the HttpCloudClients (returned pointers stay
// valid); a rebuilt client replaces the old one for new callers only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/databricks/http_sandbox_api.h"
#include "controller/cloud/databricks/http_transport.h"
#include "controller/cloud/openai/http_agents_api.h"
#include "controller/cloud/openai/streaming_transport.h"
#include "controller/cloud/secret_resolver.h"
#include "controller/engine/clock.h"
#include "controller/engine/token_bucket.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct HttpCloudClientsOptions {
  double default_requests_per_second = 15;
  double openai_requests_per_second = 10;
  double burst = 10;
  std::chrono::milliseconds secret_ttl{std::chrono::seconds(30)};
  databricks::RetryPolicy retry;
  // Told every secret value once resolved (sbxd registers them with the log redactor).
  std::function<void(const std::string&)> on_secret;
};

class HttpCloudClients final : public CloudClients {
 public:
  HttpCloudClients(Store& store, Clock& clock, databricks::HttpTransport& transport,
                   openai::StreamingTransport& streaming, databricks::Env env,
                   HttpCloudClientsOptions options = {});
  ~HttpCloudClients() override;

  api::StatusOr<databricks::SandboxApi*> Sandboxes(const std::string& namespace_,
                                                   const std::string& workspace_ref) override;
  api::StatusOr<openai::AgentsApi*> Agents(const std::string& namespace_,
                                           const std::string& workspace_ref) override;
  api::StatusOr<std::string> ExecutorKey(const api::SecretRef& ref,
                                         std::string_view field) override;

 private:
  struct Client {
    std::string fingerprint;  // generation + resolved config; memory only
    Clock::SteadyTime resolved_at;
    std::unique_ptr<databricks::CredentialsProvider> credentials;
    std::unique_ptr<TokenBucket> bucket;
    std::unique_ptr<databricks::HttpSandboxApi> api;
  };
  struct AgentsClient {
    std::string fingerprint;
    Clock::SteadyTime resolved_at;
    std::unique_ptr<TokenBucket> bucket;
    std::unique_ptr<openai::HttpAgentsApi> api;
  };
  struct Resolved {
    databricks::DatabricksConfig config;
    double requests_per_second = 0;
    std::string fingerprint;
  };
  struct ResolvedOpenAi {
    std::string base_url;
    std::string api_key;
    std::string fingerprint;
  };
  // The Workspace object, NotFound for the env-backed default (nullopt), or an error.
  api::StatusOr<std::optional<api::Object>> FindWorkspace(const std::string& namespace_,
                                                          const std::string& workspace_ref);
  api::StatusOr<Resolved> Resolve(const std::string& namespace_, const std::string& workspace_ref);
  api::StatusOr<ResolvedOpenAi> ResolveOpenAi(const std::string& namespace_,
                                              const std::string& workspace_ref);

  Store& store_;
  Clock& clock_;
  databricks::HttpTransport& transport_;
  openai::StreamingTransport& streaming_;
  const databricks::Env env_;
  const HttpCloudClientsOptions options_;

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Client>> clients_;       // Guarded by mu_. By WorkspaceId.
  std::vector<std::unique_ptr<Client>> retired_;                 // Guarded by mu_. Kept alive.
  std::map<std::string, std::unique_ptr<AgentsClient>> agents_;  // Guarded by mu_.
  std::vector<std::unique_ptr<AgentsClient>> retired_agents_;    // Guarded by mu_.
};

}  // namespace sbx::controller
