// Databricks authentication (reference/databricks-sandbox-api.md §9): configuration resolved the
// way the SDKs do it, and credential providers that produce the Authorization header.
//
// ResolveConfig follows §9.3: explicit values (a Workspace spec, secrets already resolved) →
// environment (through an injected Env, so tests never touch the real one) →
// ~/.databrickscfg, then host normalisation and validation. FetchHostMetadata/BackfillHostMetadata
// do the best-effort `/.well-known/databricks-config` lookup.
//
// Secrets (token, client secret, access tokens) never appear in logs or Status messages.
// Functions are thread-safe; providers are thread-safe and borrow their transport and clock,
// which must outlive them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/retrying_caller.h"

namespace sbx::controller::databricks {

using api::Status;
using api::StatusOr;

// Named like the config attributes / .databrickscfg keys. Empty = unset.
struct DatabricksConfig {
  std::string host{};
  std::string token{};  // PAT
  std::string client_id{};
  std::string client_secret{};
  std::string auth_type{};  // "", "pat", "oauth-m2m"
  std::string profile{};
  std::string config_file{};
  std::string workspace_id{};
  std::string account_id{};
  std::string discovery_url{};
  std::string scopes{};  // space-separated; default "all-apis"
};

// Looks up an environment variable; nullopt when unset. Also asked for "HOME".
using Env = std::function<std::optional<std::string>(std::string_view name)>;
// The process environment (for the mains only).
Env ProcessEnv();

// §9.3 steps 1–4 and 6. Errors: kInvalidArgument for a missing named profile, an unreadable
// config file that was asked for, "more than one authorization method configured", an unknown
// auth_type or a pinned auth_type without its inputs, or no host at all.
StatusOr<DatabricksConfig> ResolveConfig(const DatabricksConfig& explicit_values, const Env& env);

// The config of a Workspace object, under the rule that a credential is only ever sent to the
// host it belongs to (SECURITY.md). `workspace` holds what the Workspace states: host, profile,
// workspace_id, and the credentials resolved from its own secret references (if any).
//  - With credentials of its own: exactly those, with its host (else the controller's host).
//    Nothing of the controller's own credentials is mixed in.
//  - Without: the controller's own credentials — the SDK chain of `env` (DATABRICKS_* then
//    ~/.databrickscfg), or, when the Workspace names a profile, that profile alone (its host with
//    its token) — and only when the Workspace names no host or the very host those credentials
//    belong to. Otherwise kFailedPrecondition with reason "CredentialsMissing", and nothing
//    about the controller's credentials is in the message but their host.
StatusOr<DatabricksConfig> ResolveWorkspaceConfig(const DatabricksConfig& workspace,
                                                  const Env& env);

// Whether two hosts (or base URLs) name the same place: NormalizeHost'ed, scheme and host
// compared case-insensitively, trailing '/' ignored.
bool SameHost(std::string_view a, std::string_view b);

// "dbc-1.cloud.databricks.com/" → "https://dbc-1.cloud.databricks.com"; drops ":443".
std::string NormalizeHost(std::string_view host);

// Response of GET {host}/.well-known/databricks-config.
struct HostMetadata {
  std::string oidc_endpoint;
  std::string account_id;
  std::string workspace_id;
  std::string cloud;
};
StatusOr<HostMetadata> FetchHostMetadata(http::HttpTransport& transport, const std::string& host,
                                         std::stop_token stop = {});
// §9.3 step 5: fills workspace_id, account_id and discovery_url when unset. A failure is only
// logged (returns the config unchanged).
void BackfillHostMetadata(DatabricksConfig& config, http::HttpTransport& transport,
                          std::stop_token stop = {});

// Produces the Authorization header value for each request: Authorization(stop) is e.g.
// "Bearer dapi…"; kUnauthenticated when credentials are rejected; kUnavailable when the token
// endpoint cannot be reached (the request was not sent: safe to retry); kCancelled. Invalidate()
// drops a cached token (after a 401), so the next call fetches a fresh one.
class CredentialsProvider : public http::Credentials {
 public:
  // "pat", "oauth-m2m".
  virtual std::string_view name() const = 0;
};

class PatCredentials final : public CredentialsProvider {
 public:
  explicit PatCredentials(std::string token) : token_(std::move(token)) {}
  std::string_view name() const override { return "pat"; }
  StatusOr<std::string> Authorization(std::stop_token) override { return "Bearer " + token_; }

 private:
  const std::string token_;
};

// OAuth M2M (client credentials, §9.5): discovery (discovery_url, else
// {host}/oidc/.well-known/oauth-authorization-server), then POST token_endpoint with Basic auth
// and grant_type=client_credentials&scope=<scopes>. The token is cached; it is refreshed when
// min(TTL/2, 20 min) of its lifetime is left (as the Python SDK does) and never used within 40 s
// of expiry. If a refresh fails while the old token is still usable, the old one is returned.
class OAuthM2MCredentials final : public CredentialsProvider {
 public:
  OAuthM2MCredentials(const DatabricksConfig& config, http::HttpTransport& transport, Clock& clock);
  std::string_view name() const override { return "oauth-m2m"; }
  StatusOr<std::string> Authorization(std::stop_token stop) override;
  void Invalidate() override;

 private:
  struct Token {
    std::string header;  // "<token_type> <access_token>"
    Clock::SteadyTime refresh_at;
    Clock::SteadyTime expires_at;  // 40 s before the real expiry
  };
  StatusOr<std::string> TokenEndpoint(std::stop_token stop);  // requires fetch_mu_
  StatusOr<Token> FetchToken(std::stop_token stop);           // requires fetch_mu_

  const std::string host_;
  const std::string client_id_;
  const std::string client_secret_;
  const std::string discovery_url_;
  const std::string scopes_;
  http::HttpTransport& transport_;
  Clock& clock_;
  std::chrono::milliseconds timeout_{60'000};

  std::mutex fetch_mu_;         // serialises discovery and token requests
  std::string token_endpoint_;  // Guarded by fetch_mu_.
  std::mutex mu_;
  std::optional<Token> token_;  // Guarded by mu_.
};

// The provider for a resolved config: auth_type pins one; otherwise PAT if a token is set, else
// OAuth M2M if client id and secret are set. kUnauthenticated when nothing is configured.
StatusOr<std::unique_ptr<CredentialsProvider>> MakeCredentialsProvider(
    const DatabricksConfig& config, http::HttpTransport& transport, Clock& clock);

}  // namespace sbx::controller::databricks
