// HttpCloudClients: the real CloudClients. For each Workspace it resolves credentials under the
// rule that a credential is only ever sent to the host it belongs to (SECURITY.md): a Workspace's
// own secret references (only from the sources SecretPolicy allows), or else the controller's own
// credentials (environment → ~/.databrickscfg, the way the Databricks SDKs do) and only for
// their own host / base URL; anything else is kFailedPrecondition with reason
// "CredentialsMissing" and nothing is sent. It builds
// one HttpSandboxApi with its own request pacing (spec.limits.requestsPerSecond, default
// 15/s like the Go SDK), and one HttpAgentsApi with its own (openai_requests_per_second), and
// rebuilds them when the Workspace's generation or a resolved secret changes. Both adapt per
// endpoint class (AIMD, endpoint_pacing.h) between their start rate and their maximum. Secrets are
// resolved at most every `secret_ttl` and held in memory only.
//
// A Workspace named "default" that does not exist uses the controller's environment alone.
// Thread-safe. Clients are never destroyed before the HttpCloudClients (returned pointers stay
// valid); a rebuilt client replaces the old one for new callers only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/base/clock.h"
#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/databricks/http_sandbox_api.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/openai/http_agents_api.h"
#include "controller/cloud/secret_resolver.h"
#include "controller/engine/workspace_leases.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct HttpCloudClientsOptions {
  double default_requests_per_second = 15;
  // The Databricks pacing never rises above this (nor above the Workspace's own
  // limits.requestsPerSecond, whichever is higher); 0: the start rate, so a stated limit is
  // only ever cut by a 429 and recovers up to it.
  double databricks_max_requests_per_second = 0;
  // The OpenAI pacing starts here and rises (AIMD) up to the maximum while calls wait for it.
  double openai_requests_per_second = 10;
  double openai_max_requests_per_second = 100;
  double burst = 10;
  std::chrono::milliseconds secret_ttl{std::chrono::seconds(30)};
  http::RetryPolicy retry = databricks::DefaultRetryPolicy();  // of the Sandbox API
  // The secret sources manifests may name (sbxd --secret-env-prefix, --secrets-dir).
  SecretPolicy secrets;
  // Told every secret value once resolved (sbxd registers them with the log redactor).
  std::function<void(const std::string&)> on_secret;
  // When replicas split the workspaces: every workspace's Sandbox and Agents API requests go
  // through a FencedTransport (fenced_transport.h) on it. nullptr: requests go out as they are.
  WorkspaceFence* fence = nullptr;
};

class HttpCloudClients final : public CloudClients {
 public:
  HttpCloudClients(Store& store, Clock& clock, http::HttpTransport& transport,
                   http::StreamingTransport& streaming, databricks::Env env,
                   HttpCloudClientsOptions options = {});
  ~HttpCloudClients() override;

  api::StatusOr<databricks::SandboxApi*> Sandboxes(const std::string& namespace_,
                                                   const std::string& workspace_ref) override;
  api::StatusOr<openai::AgentsApi*> Agents(const std::string& namespace_,
                                           const std::string& workspace_ref) override;
  api::StatusOr<std::string> Secret(const std::string& namespace_, const api::SecretRef& ref,
                                    std::string_view field) override;
  api::StatusOr<std::string> ExecutorKey(const std::string& namespace_,
                                         const std::string& workspace_ref,
                                         const api::SecretRef& ref,
                                         std::string_view field) override;

  // The current pacing of every workspace's clients (for sbxd's metrics).
  struct Pacing {
    std::string api;        // "databricks" | "openai"
    std::string workspace;  // WorkspaceId: "<namespace>/<name>"
    double rate = 0;        // the workspace's requests per second now
    double max_rate = 0;
    int64_t cuts = 0;           // throttles that cut a class's rate
    double waited_seconds = 0;  // what needed calls waited for their tokens, summed
    // Waits given back to the work queue instead (EndpointPacing::TakeOrDefer), and their sum.
    int64_t deferrals = 0;
    double deferred_seconds = 0;
    // Each endpoint class's rate now (EndpointClassName order: read, create, command, write).
    std::array<double, kEndpointClasses> class_rates{};
  };
  std::vector<Pacing> PacingRates();

 private:
  struct Client {
    std::string fingerprint;  // generation + resolved config; memory only
    Clock::SteadyTime resolved_at;
    std::unique_ptr<databricks::CredentialsProvider> credentials;
    std::unique_ptr<EndpointPacing> pacing;
    std::unique_ptr<http::HttpTransport> fenced;  // when options_.fence is set
    std::unique_ptr<databricks::HttpSandboxApi> api;
  };
  struct AgentsClient {
    std::string fingerprint;
    Clock::SteadyTime resolved_at;
    std::unique_ptr<EndpointPacing> pacing;
    std::unique_ptr<http::HttpTransport> fenced;                 // when options_.fence is set
    std::unique_ptr<http::StreamingTransport> fenced_streaming;  // when options_.fence is set
    std::unique_ptr<openai::HttpAgentsApi> api;
  };
  struct Resolved {
    databricks::DatabricksConfig config;
    double requests_per_second = 0;
    std::string fingerprint;
    bool controller_credentials = false;  // the controller's own, not the Workspace's
  };
  struct ResolvedOpenAi {
    std::string base_url;
    std::string api_key;
    std::string fingerprint;
    bool controller_credentials = false;
  };
  // The Workspace object, NotFound for the env-backed default (nullopt), or an error.
  api::StatusOr<std::optional<api::Object>> FindWorkspace(const std::string& namespace_,
                                                          const std::string& workspace_ref);
  api::StatusOr<Resolved> Resolve(const std::string& namespace_, const std::string& workspace_ref);
  api::StatusOr<ResolvedOpenAi> ResolveOpenAi(const std::string& namespace_,
                                              const std::string& workspace_ref);

  // The client of workspace `id` in `cache`: reused within secret_ttl; after it, `resolve()` runs
  // again and `build(resolved)` makes a new client only when the resolution's fingerprint
  // changed (the old one moves to `retired`, since callers may hold it). Requires mu_.
  template <typename C, typename ResolveFn, typename BuildFn>
  api::StatusOr<C*> Cached(std::map<std::string, std::unique_ptr<C>>& cache,
                           std::vector<std::unique_ptr<C>>& retired, const std::string& id,
                           ResolveFn resolve, BuildFn build);

  // The transport of workspace `id`'s API clients: transport_, or a FencedTransport over it
  // (stored in `fenced`) when options_.fence is set.
  http::HttpTransport& TransportFor(const std::string& id,
                                    std::unique_ptr<http::HttpTransport>& fenced);
  http::StreamingTransport& StreamingFor(const std::string& id,
                                         std::unique_ptr<http::StreamingTransport>& fenced);

  // OPENAI_BASE_URL, else the public API: where the controller's OpenAI keys belong.
  std::string ControllerOpenAiUrl() const;
  // kInvalidArgument unless `url` is https:// (http:// only for a loopback host).
  static api::Status CheckServiceUrl(const std::string& field, const std::string& url);

  static constexpr std::string_view kDefaultOpenAiBaseUrl = "https://api.openai.com/v1";

  Store& store_;
  Clock& clock_;
  http::HttpTransport& transport_;
  http::StreamingTransport& streaming_;
  const databricks::Env env_;
  const EnvLookup lookup_;  // env_ as the secret resolver takes it
  const HttpCloudClientsOptions options_;

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Client>> clients_;       // Guarded by mu_. By WorkspaceId.
  std::vector<std::unique_ptr<Client>> retired_;                 // Guarded by mu_. Kept alive.
  std::map<std::string, std::unique_ptr<AgentsClient>> agents_;  // Guarded by mu_.
  std::vector<std::unique_ptr<AgentsClient>> retired_agents_;    // Guarded by mu_.
};

}  // namespace sbx::controller
