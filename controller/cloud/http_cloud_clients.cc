#include "controller/cloud/http_cloud_clients.h"

#include <functional>

namespace sbx::controller {

HttpCloudClients::HttpCloudClients(Store& store, Clock& clock, databricks::HttpTransport& transport,
                                   openai::StreamingTransport& streaming, databricks::Env env,
                                   HttpCloudClientsOptions options)
    : store_(store),
      clock_(clock),
      transport_(transport),
      streaming_(streaming),
      env_(std::move(env)),
      options_(std::move(options)) {}

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
  databricks::DatabricksConfig explicit_values;
  ASSIGN_OR_RETURN(std::optional<api::Object> workspace, FindWorkspace(namespace_, workspace_ref));
  if (workspace) {
    const api::WorkspaceSpec& spec = workspace->workspace_spec();
    const EnvLookup lookup = [this](std::string_view name) { return env_(name); };
    explicit_values.host = spec.databricks.host;
    explicit_values.profile = spec.databricks.profile;
    explicit_values.workspace_id = spec.databricks.workspace_id;
    if (!spec.databricks.token_from.empty()) {
      ASSIGN_OR_RETURN(explicit_values.token,
                       ResolveSecret(spec.databricks.token_from, lookup,
                                     "Workspace " + workspace_ref + " spec.databricks.tokenFrom"));
    }
    if (!spec.databricks.client_id_from.empty()) {
      ASSIGN_OR_RETURN(
          explicit_values.client_id,
          ResolveSecret(spec.databricks.client_id_from, lookup,
                        "Workspace " + workspace_ref + " spec.databricks.clientIdFrom"));
    }
    if (!spec.databricks.client_secret_from.empty()) {
      ASSIGN_OR_RETURN(
          explicit_values.client_secret,
          ResolveSecret(spec.databricks.client_secret_from, lookup,
                        "Workspace " + workspace_ref + " spec.databricks.clientSecretFrom"));
    }
    r.requests_per_second = spec.limits.requests_per_second;
    r.fingerprint =
        "gen=" + std::to_string(workspace->metadata.generation) + ";uid=" + workspace->metadata.uid;
  } else {
    r.fingerprint = "env";
  }
  api::StatusOr<databricks::DatabricksConfig> config =
      databricks::ResolveConfig(explicit_values, env_);
  if (!config.ok()) {
    return api::FailedPreconditionError("Workspace " + WorkspaceId(namespace_, workspace_ref) +
                                        ": " + config.status().message());
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

api::StatusOr<databricks::SandboxApi*> HttpCloudClients::Sandboxes(
    const std::string& namespace_, const std::string& workspace_ref) {
  const std::string id = WorkspaceId(namespace_, workspace_ref);
  std::lock_guard lock(mu_);
  auto it = clients_.find(id);
  const Clock::SteadyTime now = clock_.Steady();
  if (it != clients_.end() && now - it->second->resolved_at < options_.secret_ttl) {
    return static_cast<databricks::SandboxApi*>(it->second->api.get());
  }
  ASSIGN_OR_RETURN(Resolved resolved, Resolve(namespace_, workspace_ref));
  if (it != clients_.end() && it->second->fingerprint == resolved.fingerprint) {
    it->second->resolved_at = now;
    return static_cast<databricks::SandboxApi*>(it->second->api.get());
  }
  auto client = std::make_unique<Client>();
  client->fingerprint = resolved.fingerprint;
  client->resolved_at = now;
  ASSIGN_OR_RETURN(client->credentials,
                   databricks::MakeCredentialsProvider(resolved.config, transport_, clock_));
  client->bucket = std::make_unique<TokenBucket>(clock_, resolved.requests_per_second,
                                                 std::max(1.0, options_.burst));
  databricks::HttpSandboxApiOptions api_options;
  api_options.host = resolved.config.host;
  api_options.workspace_id = resolved.config.workspace_id;
  api_options.retry = options_.retry;
  client->api = std::make_unique<databricks::HttpSandboxApi>(api_options, *client->credentials,
                                                             *client->bucket, clock_, transport_);
  databricks::SandboxApi* api = client->api.get();
  if (it != clients_.end()) {
    retired_.push_back(std::move(it->second));
    it->second = std::move(client);
  } else {
    clients_.emplace(id, std::move(client));
  }
  return api;
}

api::StatusOr<HttpCloudClients::ResolvedOpenAi> HttpCloudClients::ResolveOpenAi(
    const std::string& namespace_, const std::string& workspace_ref) {
  ResolvedOpenAi r;
  const EnvLookup lookup = [this](std::string_view name) { return env_(name); };
  ASSIGN_OR_RETURN(std::optional<api::Object> workspace, FindWorkspace(namespace_, workspace_ref));
  api::SecretRef key_ref{.env = "OPENAI_API_KEY"};
  std::string field = "environment variable OPENAI_API_KEY";
  if (workspace) {
    const api::OpenAiConnection& openai = workspace->workspace_spec().openai;
    r.base_url = openai.base_url;
    if (!openai.api_key_from.empty()) {
      key_ref = openai.api_key_from;
      field = "Workspace " + workspace_ref + " spec.openai.apiKeyFrom";
    }
    r.fingerprint = "gen=" + std::to_string(workspace->metadata.generation);
  } else {
    r.fingerprint = "env";
  }
  if (r.base_url.empty()) {
    r.base_url = env_("OPENAI_BASE_URL").value_or("https://api.openai.com/v1");
  }
  ASSIGN_OR_RETURN(r.api_key, ResolveSecret(key_ref, lookup, field));
  if (options_.on_secret) {
    options_.on_secret(r.api_key);
  }
  r.fingerprint +=
      ";url=" + r.base_url + ";k=" + std::to_string(std::hash<std::string>{}(r.api_key));
  return r;
}

api::StatusOr<openai::AgentsApi*> HttpCloudClients::Agents(const std::string& namespace_,
                                                           const std::string& workspace_ref) {
  const std::string id = WorkspaceId(namespace_, workspace_ref);
  std::lock_guard lock(mu_);
  auto it = agents_.find(id);
  const Clock::SteadyTime now = clock_.Steady();
  if (it != agents_.end() && now - it->second->resolved_at < options_.secret_ttl) {
    return static_cast<openai::AgentsApi*>(it->second->api.get());
  }
  ASSIGN_OR_RETURN(ResolvedOpenAi resolved, ResolveOpenAi(namespace_, workspace_ref));
  if (it != agents_.end() && it->second->fingerprint == resolved.fingerprint) {
    it->second->resolved_at = now;
    return static_cast<openai::AgentsApi*>(it->second->api.get());
  }
  auto client = std::make_unique<AgentsClient>();
  client->fingerprint = resolved.fingerprint;
  client->resolved_at = now;
  client->bucket = std::make_unique<TokenBucket>(clock_, options_.openai_requests_per_second,
                                                 std::max(1.0, options_.burst));
  openai::HttpAgentsApiOptions api_options;
  api_options.base_url = resolved.base_url;
  client->api = std::make_unique<openai::HttpAgentsApi>(
      api_options, resolved.api_key, *client->bucket, clock_, transport_, streaming_);
  openai::AgentsApi* api = client->api.get();
  if (it != agents_.end()) {
    retired_agents_.push_back(std::move(it->second));
    it->second = std::move(client);
  } else {
    agents_.emplace(id, std::move(client));
  }
  return api;
}

api::StatusOr<std::string> HttpCloudClients::ExecutorKey(const api::SecretRef& ref,
                                                         std::string_view field) {
  const EnvLookup lookup = [this](std::string_view name) { return env_(name); };
  api::StatusOr<std::string> key =
      ref.empty() ? ResolveSecret({.env = "OPENAI_EXECUTOR_API_KEY"}, lookup,
                                  std::string(field) +
                                      " (unset, so the controller's OPENAI_EXECUTOR_API_KEY)")
                  : ResolveSecret(ref, lookup, field);
  if (key.ok() && options_.on_secret) {
    options_.on_secret(*key);
  }
  return key;
}

}  // namespace sbx::controller
