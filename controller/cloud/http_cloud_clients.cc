#include "controller/cloud/http_cloud_clients.h"

#include <functional>

#include "api/validation.h"
#include "controller/cloud/fenced_transport.h"

namespace sbx::controller {

HttpCloudClients::HttpCloudClients(Store& store, Clock& clock, http::HttpTransport& transport,
                                   http::StreamingTransport& streaming, databricks::Env env,
                                   HttpCloudClientsOptions options)
    : store_(store),
      clock_(clock),
      transport_(transport),
      streaming_(streaming),
      env_(std::move(env)),
      lookup_([this](std::string_view name) { return env_(name); }),
      options_(std::move(options)) {}

std::string HttpCloudClients::ControllerOpenAiUrl() const {
  std::optional<std::string> url = env_("OPENAI_BASE_URL");
  return url && !url->empty() ? *url : std::string(kDefaultOpenAiBaseUrl);
}

api::Status HttpCloudClients::CheckServiceUrl(const std::string& field, const std::string& url) {
  if (url.empty()) {
    return api::OkStatus();
  }
  // sbxctl checked this when the Workspace was applied; the database may be older than that.
  if (std::string problem = api::ValidateServiceUrl(databricks::NormalizeHost(url));
      !problem.empty()) {
    return api::InvalidArgumentError(field + ": " + problem);
  }
  return api::OkStatus();
}

HttpCloudClients::~HttpCloudClients() = default;

api::StatusOr<std::optional<api::Object>> HttpCloudClients::FindWorkspace(
    const std::string& namespace_, const std::string& workspace_ref) {
  api::StatusOr<api::Object> workspace =
      store_.Get({api::Kind::kWorkspace, namespace_, workspace_ref});
  if (workspace.ok()) {
    return std::optional<api::Object>(*std::move(workspace));
  }
  if (workspace.status().code() != api::StatusCode::kNotFound) {
    return workspace.status();
  }
  if (workspace_ref == api::kDefaultWorkspaceRef) {
    return std::optional<api::Object>();  // the controller's own environment, as the SDKs do
  }
  return api::NotFoundError("Workspace " + WorkspaceId(namespace_, workspace_ref) +
                            " not found (create it, or use workspaceRef: default to use the "
                            "controller's environment)");
}

api::StatusOr<HttpCloudClients::Resolved> HttpCloudClients::Resolve(
    const std::string& namespace_, const std::string& workspace_ref) {
  Resolved r;
  ASSIGN_OR_RETURN(std::optional<api::Object> workspace, FindWorkspace(namespace_, workspace_ref));
  api::StatusOr<databricks::DatabricksConfig> config = api::InternalError("unset");
  if (workspace) {
    const api::WorkspaceSpec& spec = workspace->workspace_spec();
    const std::string where = "Workspace " + workspace_ref + " spec.databricks";
    databricks::DatabricksConfig stated;
    stated.host = spec.databricks.host;
    stated.profile = spec.databricks.profile;
    stated.workspace_id = spec.databricks.workspace_id;
    RETURN_IF_ERROR(CheckServiceUrl(where + ".host", stated.host));
    const struct {
      const api::SecretRef& ref;
      std::string& value;
      const char* field;
    } secrets[] = {
        {spec.databricks.token_from, stated.token, ".tokenFrom"},
        {spec.databricks.client_id_from, stated.client_id, ".clientIdFrom"},
        {spec.databricks.client_secret_from, stated.client_secret, ".clientSecretFrom"},
    };
    for (const auto& secret : secrets) {
      if (!secret.ref.empty()) {
        ASSIGN_OR_RETURN(secret.value, ResolveSecret(secret.ref, lookup_, where + secret.field,
                                                     options_.secrets, namespace_));
      }
    }
    r.controller_credentials =
        stated.token.empty() && stated.client_id.empty() && stated.client_secret.empty();
    config = databricks::ResolveWorkspaceConfig(stated, env_);
    r.requests_per_second = spec.limits.requests_per_second;
    r.fingerprint =
        "gen=" + std::to_string(workspace->metadata.generation) + ";uid=" + workspace->metadata.uid;
  } else {
    config = databricks::ResolveConfig(databricks::DatabricksConfig{}, env_);
    r.controller_credentials = true;
    r.fingerprint = "env";
  }
  if (!config.ok()) {
    return api::Status(api::StatusCode::kFailedPrecondition,
                       "Workspace " + WorkspaceId(namespace_, workspace_ref) + ": " +
                           config.status().message())
        .WithReason(config.status().reason());
  }
  r.config = *std::move(config);
  if (options_.on_secret) {
    for (const std::string* secret : {&r.config.token, &r.config.client_secret}) {
      if (!secret->empty()) {
        options_.on_secret(*secret);
      }
    }
  }
  if (r.requests_per_second <= 0) {
    r.requests_per_second = options_.default_requests_per_second;
  }
  // Secrets enter the fingerprint only as a hash, in memory, to notice a rotation.
  const size_t secrets = std::hash<std::string>{}(r.config.token + '\n' + r.config.client_id +
                                                  '\n' + r.config.client_secret);
  r.fingerprint += ";host=" + r.config.host + ";ws=" + r.config.workspace_id +
                   ";rps=" + std::to_string(r.requests_per_second) + ";auth=" + r.config.auth_type +
                   ";s=" + std::to_string(secrets);
  return r;
}

template <typename C, typename ResolveFn, typename BuildFn>
api::StatusOr<C*> HttpCloudClients::Cached(std::map<std::string, std::unique_ptr<C>>& cache,
                                           std::vector<std::unique_ptr<C>>& retired,
                                           const std::string& id, ResolveFn resolve,
                                           BuildFn build) {
  auto it = cache.find(id);
  const Clock::SteadyTime now = clock_.Steady();
  if (it != cache.end() && now - it->second->resolved_at < options_.secret_ttl) {
    return it->second.get();
  }
  auto resolved = resolve();
  if (!resolved.ok()) {
    return resolved.status();
  }
  if (it != cache.end() && it->second->fingerprint == resolved->fingerprint) {
    it->second->resolved_at = now;
    return it->second.get();
  }
  api::StatusOr<std::unique_ptr<C>> built = build(*resolved);
  if (!built.ok()) {
    return built.status();
  }
  std::unique_ptr<C> client = *std::move(built);
  client->fingerprint = resolved->fingerprint;
  client->resolved_at = now;
  C* out = client.get();
  if (it != cache.end()) {
    retired.push_back(std::move(it->second));  // callers may still hold the old one
    it->second = std::move(client);
  } else {
    cache.emplace(id, std::move(client));
  }
  return out;
}

http::HttpTransport& HttpCloudClients::TransportFor(const std::string& id,
                                                    std::unique_ptr<http::HttpTransport>& fenced) {
  if (options_.fence == nullptr) {
    return transport_;
  }
  fenced = std::make_unique<FencedTransport>(transport_, *options_.fence, id);
  return *fenced;
}

http::StreamingTransport& HttpCloudClients::StreamingFor(
    const std::string& id, std::unique_ptr<http::StreamingTransport>& fenced) {
  if (options_.fence == nullptr) {
    return streaming_;
  }
  fenced = std::make_unique<FencedStreamingTransport>(streaming_, *options_.fence, id);
  return *fenced;
}

api::StatusOr<databricks::SandboxApi*> HttpCloudClients::Sandboxes(
    const std::string& namespace_, const std::string& workspace_ref) {
  std::lock_guard lock(mu_);
  const std::string id = WorkspaceId(namespace_, workspace_ref);
  auto build = [&](const Resolved& resolved) -> api::StatusOr<std::unique_ptr<Client>> {
    auto client = std::make_unique<Client>();
    ASSIGN_OR_RETURN(client->credentials,
                     databricks::MakeCredentialsProvider(resolved.config, transport_, clock_));
    AimdPolicy aimd;
    aimd.max_rate = options_.databricks_max_requests_per_second;
    client->pacing = std::make_unique<EndpointPacing>(clock_, resolved.requests_per_second,
                                                      std::max(1.0, options_.burst), aimd);
    databricks::HttpSandboxApiOptions api_options;
    api_options.host = resolved.config.host;
    api_options.workspace_id = resolved.config.workspace_id;
    api_options.retry = options_.retry;
    client->api = std::make_unique<databricks::HttpSandboxApi>(api_options, *client->credentials,
                                                               *client->pacing, clock_,
                                                               TransportFor(id, client->fenced));
    return client;
  };
  ASSIGN_OR_RETURN(Client * client, Cached(
                                        clients_, retired_, id,
                                        [&] { return Resolve(namespace_, workspace_ref); }, build));
  return static_cast<databricks::SandboxApi*>(client->api.get());
}

api::StatusOr<HttpCloudClients::ResolvedOpenAi> HttpCloudClients::ResolveOpenAi(
    const std::string& namespace_, const std::string& workspace_ref) {
  ResolvedOpenAi r;
  ASSIGN_OR_RETURN(std::optional<api::Object> workspace, FindWorkspace(namespace_, workspace_ref));
  const std::string controller_url = ControllerOpenAiUrl();
  r.base_url = controller_url;
  r.controller_credentials = true;
  if (workspace) {
    const api::OpenAiConnection& openai = workspace->workspace_spec().openai;
    const std::string where = "Workspace " + workspace_ref + " spec.openai";
    RETURN_IF_ERROR(CheckServiceUrl(where + ".baseUrl", openai.base_url));
    if (!openai.base_url.empty()) {
      r.base_url = openai.base_url;
    }
    if (!openai.api_key_from.empty()) {
      ASSIGN_OR_RETURN(r.api_key, ResolveSecret(openai.api_key_from, lookup_, where + ".apiKeyFrom",
                                                options_.secrets, namespace_));
      r.controller_credentials = false;
    } else if (!databricks::SameHost(r.base_url, controller_url)) {
      return api::FailedPreconditionError(
                 "Workspace " + WorkspaceId(namespace_, workspace_ref) + ": OpenAI base URL " +
                 r.base_url +
                 " needs a key of its own: set spec.openai.apiKeyFrom; the controller's "
                 "OPENAI_API_KEY belongs to " +
                 controller_url + " and is never sent to another host")
          .WithReason("CredentialsMissing");
    }
    r.fingerprint = "gen=" + std::to_string(workspace->metadata.generation);
  } else {
    r.fingerprint = "env";
  }
  if (r.controller_credentials) {
    ASSIGN_OR_RETURN(r.api_key, ResolveControllerEnv("OPENAI_API_KEY", lookup_,
                                                     "Workspace " + workspace_ref + " OpenAI key"));
  }
  if (options_.on_secret) {
    options_.on_secret(r.api_key);
  }
  r.fingerprint +=
      ";url=" + r.base_url + ";k=" + std::to_string(std::hash<std::string>{}(r.api_key));
  return r;
}

api::StatusOr<openai::AgentsApi*> HttpCloudClients::Agents(const std::string& namespace_,
                                                           const std::string& workspace_ref) {
  std::lock_guard lock(mu_);
  const std::string id = WorkspaceId(namespace_, workspace_ref);
  auto build = [&](const ResolvedOpenAi& resolved) -> api::StatusOr<std::unique_ptr<AgentsClient>> {
    auto client = std::make_unique<AgentsClient>();
    AimdPolicy aimd;
    aimd.max_rate = options_.openai_max_requests_per_second;
    client->pacing = std::make_unique<EndpointPacing>(clock_, options_.openai_requests_per_second,
                                                      std::max(1.0, options_.burst), aimd);
    openai::HttpAgentsApiOptions api_options;
    api_options.base_url = resolved.base_url;
    client->api = std::make_unique<openai::HttpAgentsApi>(
        api_options, resolved.api_key, *client->pacing, clock_, TransportFor(id, client->fenced),
        StreamingFor(id, client->fenced_streaming));
    return client;
  };
  ASSIGN_OR_RETURN(AgentsClient * client,
                   Cached(
                       agents_, retired_agents_, id,
                       [&] { return ResolveOpenAi(namespace_, workspace_ref); }, build));
  return static_cast<openai::AgentsApi*>(client->api.get());
}

std::vector<HttpCloudClients::Pacing> HttpCloudClients::PacingRates() {
  std::lock_guard lock(mu_);
  std::vector<Pacing> out;
  auto add = [&](std::string api, const std::string& workspace, const EndpointPacing& pacing) {
    Pacing p{std::move(api),
             workspace,
             pacing.rate(),
             pacing.max_rate(),
             pacing.cuts(),
             static_cast<double>(pacing.waited().count()) / 1000,
             pacing.deferrals(),
             static_cast<double>(pacing.deferred().count()) / 1000,
             {}};
    for (int c = 0; c < kEndpointClasses; ++c) {
      p.class_rates[static_cast<size_t>(c)] = pacing.rate(static_cast<EndpointClass>(c));
    }
    out.push_back(std::move(p));
  };
  for (const auto& [workspace, client] : clients_) {
    add("databricks", workspace, *client->pacing);
  }
  for (const auto& [workspace, client] : agents_) {
    add("openai", workspace, *client->pacing);
  }
  return out;
}

api::StatusOr<std::string> HttpCloudClients::Secret(const std::string& namespace_,
                                                    const api::SecretRef& ref,
                                                    std::string_view field) {
  api::StatusOr<std::string> value =
      ResolveSecret(ref, lookup_, field, options_.secrets, namespace_);
  if (value.ok() && options_.on_secret) {
    options_.on_secret(*value);
  }
  return value;
}

api::StatusOr<std::string> HttpCloudClients::ExecutorKey(const std::string& namespace_,
                                                         const std::string& workspace_ref,
                                                         const api::SecretRef& ref,
                                                         std::string_view field) {
  api::StatusOr<std::string> key = api::InternalError("unset");
  if (!ref.empty()) {
    key = ResolveSecret(ref, lookup_, field, options_.secrets, namespace_);
  } else {
    // The controller's executor key goes only where the controller's own credentials go.
    ASSIGN_OR_RETURN(Resolved databricks, Resolve(namespace_, workspace_ref));
    ASSIGN_OR_RETURN(ResolvedOpenAi openai, ResolveOpenAi(namespace_, workspace_ref));
    if (!databricks.controller_credentials || !openai.controller_credentials) {
      return api::FailedPreconditionError(
                 std::string(field) + " is unset, and Workspace " +
                 WorkspaceId(namespace_, workspace_ref) +
                 " does not use the controller's own credentials: the controller's "
                 "OPENAI_EXECUTOR_API_KEY goes only into sandboxes of workspaces that do; set "
                 "spec.executor.apiKeyFrom")
          .WithReason("CredentialsMissing");
    }
    key = ResolveControllerEnv(
        "OPENAI_EXECUTOR_API_KEY", lookup_,
        std::string(field) + " (unset, so the controller's OPENAI_EXECUTOR_API_KEY)");
  }
  if (key.ok() && options_.on_secret) {
    options_.on_secret(*key);
  }
  return key;
}

}  // namespace sbx::controller
