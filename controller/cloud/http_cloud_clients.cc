#include "controller/cloud/http_cloud_clients.h"

#include <functional>

namespace sbx::controller {

HttpCloudClients::HttpCloudClients(Store& store, Clock& clock, databricks::HttpTransport& transport,
                                   databricks::Env env, HttpCloudClientsOptions options)
    : store_(store),
      clock_(clock),
      transport_(transport),
      env_(std::move(env)),
      options_(std::move(options)) {}

HttpCloudClients::~HttpCloudClients() = default;

api::StatusOr<HttpCloudClients::Resolved> HttpCloudClients::Resolve(
    const std::string& namespace_, const std::string& workspace_ref) {
  Resolved r;
  databricks::DatabricksConfig explicit_values;
  api::StatusOr<api::Object> workspace =
      store_.Get({api::Kind::kWorkspace, namespace_, workspace_ref});
  if (workspace.ok()) {
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
  } else if (workspace.status().code() == api::StatusCode::kNotFound &&
             workspace_ref == api::kDefaultWorkspaceRef) {
    r.fingerprint = "env";  // the controller's own environment, as the SDKs would use it
  } else if (workspace.status().code() == api::StatusCode::kNotFound) {
    return api::NotFoundError("Workspace " + WorkspaceId(namespace_, workspace_ref) +
                              " not found (create it, or use workspaceRef: default to use the "
                              "controller's environment)");
  } else {
    return workspace.status();
  }
  api::StatusOr<databricks::DatabricksConfig> config =
      databricks::ResolveConfig(explicit_values, env_);
  if (!config.ok()) {
    return api::FailedPreconditionError("Workspace " + WorkspaceId(namespace_, workspace_ref) +
                                        ": " + config.status().message());
  }
  r.config = *std::move(config);
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

}  // namespace sbx::controller
