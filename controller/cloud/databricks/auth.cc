#include "controller/cloud/databricks/auth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/base64.h"
#include "api/percent_encoding.h"
#include "api/text.h"
#include "controller/cloud/databricks/http_errors.h"
#include "controller/cloud/databricks/wire_format.h"
#include "controller/cloud/http/redact.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::databricks {

using api::CancelledError;
using api::FailedPreconditionError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::PercentEncode;
using api::UnauthenticatedError;
using http::BodyExcerpt;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpResult;
using http::HttpTransport;
using http::Redact;

namespace {

using api::Lower;
using api::Trim;
using json = nlohmann::json;
using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

// The INI dialect of .databrickscfg: [section], key = value (or key: value), full-line comments
// with ; or #, inline comments only after whitespace (as go-ini reads them). Keys are
// case-insensitive like Python's ConfigParser. Sections are kept apart: no DEFAULT inheritance.
IniFile ParseIni(std::istream& in) {
  IniFile file;
  std::string current;
  std::string line;
  while (std::getline(in, line)) {
    std::string t(Trim(line));
    if (t.empty() || t[0] == ';' || t[0] == '#') {
      continue;
    }
    if (t.front() == '[') {
      const size_t close = t.find(']');
      current = Trim(t.substr(1, close == std::string::npos ? std::string::npos : close - 1));
      file[current];
      continue;
    }
    size_t sep = t.find('=');
    if (sep == std::string::npos) {
      sep = t.find(':');
    }
    if (sep == std::string::npos) {
      continue;
    }
    std::string key = Lower(Trim(t.substr(0, sep)));
    std::string value(Trim(t.substr(sep + 1)));
    for (size_t i = 1; i < value.size(); ++i) {
      if ((value[i] == ';' || value[i] == '#') &&
          std::isspace(static_cast<unsigned char>(value[i - 1]))) {
        value = Trim(value.substr(0, i));
        break;
      }
    }
    file[current][key] = value;
  }
  return file;
}

void FillIfUnset(std::string& field, const std::string& value) {
  if (field.empty() && !value.empty()) {
    field = value;
  }
}

bool AnyAuthConfigured(const DatabricksConfig& c) {
  return !c.token.empty() || !c.client_id.empty() || !c.client_secret.empty();
}

// A JSON string, or a number as its decimal text (ids and expiries come as either).
std::string StringOrNumber(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) {
    return "";
  }
  if (it->is_string()) {
    return it->get<std::string>();
  }
  if (it->is_number_integer()) {
    return std::to_string(it->get<int64_t>());
  }
  if (it->is_number()) {
    return std::to_string(static_cast<int64_t>(it->get<double>()));
  }
  return "";
}

Status LoadConfigFile(DatabricksConfig& cfg, const Env& env) {
  const bool profile_named = !cfg.profile.empty();
  std::string path = cfg.config_file.empty() ? "~/.databrickscfg" : cfg.config_file;
  if (path.starts_with("~/")) {
    const std::optional<std::string> home = env("HOME");
    if (!home || home->empty()) {
      if (profile_named) {
        return InvalidArgumentError("profile \"" + cfg.profile + "\": cannot find " + path +
                                    " because HOME is not set");
      }
      return OkStatus();
    }
    path = *home + path.substr(1);
  }
  std::ifstream in(path);
  if (!in) {
    if (profile_named) {
      return InvalidArgumentError("profile \"" + cfg.profile + "\": cannot read config file " +
                                  path);
    }
    return OkStatus();  // no file and nothing asked of it
  }
  const IniFile ini = ParseIni(in);
  std::string profile = cfg.profile;
  bool named = profile_named;
  if (profile.empty()) {
    if (auto s = ini.find("__settings__"); s != ini.end()) {
      if (auto d = s->second.find("default_profile"); d != s->second.end() && !d->second.empty()) {
        profile = d->second;
        named = true;
      }
    }
  }
  if (profile.empty()) {
    profile = "DEFAULT";
  }
  auto section = ini.find(profile);
  if (section == ini.end()) {
    if (!named) {
      return OkStatus();  // a missing DEFAULT is not an error
    }
    return InvalidArgumentError("profile \"" + profile + "\" not found in " + path);
  }
  const Section& s = section->second;
  auto get = [&](const char* key) -> std::string {
    auto it = s.find(key);
    return it == s.end() ? "" : it->second;
  };
  FillIfUnset(cfg.host, get("host"));
  FillIfUnset(cfg.token, get("token"));
  FillIfUnset(cfg.client_id, get("client_id"));
  FillIfUnset(cfg.client_secret, get("client_secret"));
  FillIfUnset(cfg.auth_type, get("auth_type"));
  FillIfUnset(cfg.workspace_id, get("workspace_id"));
  FillIfUnset(cfg.account_id, get("account_id"));
  FillIfUnset(cfg.discovery_url, get("discovery_url"));
  FillIfUnset(cfg.scopes, get("scopes"));
  if (cfg.profile.empty()) {
    cfg.profile = profile;
  }
  spdlog::debug("databricks: loaded profile {} from {}", profile, path);
  return OkStatus();
}

}  // namespace

Env ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) {
      return std::nullopt;
    }
    return std::string(v);
  };
}

std::string NormalizeHost(std::string_view host_in) {
  std::string host(Trim(host_in));
  if (host.empty()) {
    return host;
  }
  if (host.find("://") == std::string::npos) {
    host = "https://" + host;
  }
  while (!host.empty() && host.back() == '/') {
    host.pop_back();
  }
  if (host.ends_with(":443")) {
    host.resize(host.size() - 4);
  }
  return host;
}

StatusOr<DatabricksConfig> ResolveConfig(const DatabricksConfig& explicit_values, const Env& env) {
  DatabricksConfig cfg = explicit_values;
  // Step 2: environment variables fill what is still unset.
  const std::pair<std::string*, const char*> vars[] = {
      {&cfg.host, "DATABRICKS_HOST"},
      {&cfg.token, "DATABRICKS_TOKEN"},
      {&cfg.client_id, "DATABRICKS_CLIENT_ID"},
      {&cfg.client_secret, "DATABRICKS_CLIENT_SECRET"},
      {&cfg.profile, "DATABRICKS_CONFIG_PROFILE"},
      {&cfg.config_file, "DATABRICKS_CONFIG_FILE"},
      {&cfg.workspace_id, "DATABRICKS_WORKSPACE_ID"},
      {&cfg.auth_type, "DATABRICKS_AUTH_TYPE"},
      {&cfg.account_id, "DATABRICKS_ACCOUNT_ID"},
      {&cfg.discovery_url, "DATABRICKS_DISCOVERY_URL"},
  };
  for (const auto& [field, name] : vars) {
    if (field->empty()) {
      if (std::optional<std::string> v = env(name)) {
        *field = *v;
      }
    }
  }
  // Step 3: the config file, only when a profile was named or nothing useful is set yet.
  if (!cfg.profile.empty() || (cfg.host.empty() && !AnyAuthConfigured(cfg))) {
    RETURN_IF_ERROR(LoadConfigFile(cfg, env));
  }
  // Step 4.
  cfg.host = NormalizeHost(cfg.host);
  // Step 6.
  if (cfg.host.empty()) {
    return InvalidArgumentError(
        "no Databricks host configured (set the Workspace host, DATABRICKS_HOST or a profile in "
        "~/.databrickscfg)");
  }
  const bool has_pat = !cfg.token.empty();
  const bool has_m2m = !cfg.client_id.empty() || !cfg.client_secret.empty();
  if (cfg.auth_type.empty()) {
    if (has_pat && has_m2m) {
      return InvalidArgumentError(
          "validate: more than one authorization method configured: oauth and pat. Config: "
          "host=" +
          cfg.host + ". Set auth_type to pick one");
    }
  } else if (cfg.auth_type == "pat") {
    if (!has_pat) {
      return InvalidArgumentError("auth_type pat needs a token");
    }
  } else if (cfg.auth_type == "oauth-m2m") {
    if (cfg.client_id.empty() || cfg.client_secret.empty()) {
      return InvalidArgumentError("auth_type oauth-m2m needs client_id and client_secret");
    }
  } else {
    return InvalidArgumentError("auth_type \"" + cfg.auth_type +
                                "\" is not supported (use pat or oauth-m2m)");
  }
  return cfg;
}

bool SameHost(std::string_view a, std::string_view b) {
  return Lower(NormalizeHost(a)) == Lower(NormalizeHost(b));
}

StatusOr<DatabricksConfig> ResolveWorkspaceConfig(const DatabricksConfig& workspace,
                                                  const Env& env) {
  const bool own_credentials = AnyAuthConfigured(workspace);
  // The controller's own configuration: a named profile alone (its host goes with its token), or
  // the SDK chain of the environment.
  StatusOr<DatabricksConfig> controller_config = InvalidArgumentError("unset");
  if (!workspace.profile.empty()) {
    DatabricksConfig profile_only;
    profile_only.profile = workspace.profile;
    profile_only.config_file = env("DATABRICKS_CONFIG_FILE").value_or("");
    const Env home_only = [&env](std::string_view name) -> std::optional<std::string> {
      return name == "HOME" ? env(name) : std::nullopt;
    };
    controller_config = ResolveConfig(profile_only, home_only);
    if (!controller_config.ok() && !own_credentials) {
      return controller_config.status();  // a named profile that is missing is worth saying
    }
  } else {
    controller_config = ResolveConfig(DatabricksConfig{}, env);
  }

  if (own_credentials) {
    DatabricksConfig cfg = workspace;
    cfg.profile.clear();
    if (cfg.host.empty()) {
      if (!controller_config.ok()) {
        return InvalidArgumentError(
            "no Databricks host configured (set spec.databricks.host of the Workspace)");
      }
      cfg.host = controller_config->host;
    }
    const Env none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
    return ResolveConfig(cfg, none);
  }

  const std::string wanted = NormalizeHost(workspace.host);
  if (!controller_config.ok()) {
    if (wanted.empty()) {
      return controller_config.status();
    }
    return FailedPreconditionError(
               "host " + wanted +
               " needs credentials of its own: set spec.databricks.tokenFrom (or clientIdFrom "
               "and clientSecretFrom)")
        .WithReason("CredentialsMissing");
  }
  if (!wanted.empty() && !SameHost(wanted, controller_config->host)) {
    return FailedPreconditionError(
               "host " + wanted +
               " needs credentials of its own: set spec.databricks.tokenFrom (or clientIdFrom "
               "and clientSecretFrom); the controller's own credentials belong to " +
               controller_config->host + " and are never sent to another host")
        .WithReason("CredentialsMissing");
  }
  DatabricksConfig cfg = *std::move(controller_config);
  if (!workspace.workspace_id.empty()) {
    cfg.workspace_id = workspace.workspace_id;
  }
  return cfg;
}

StatusOr<HostMetadata> FetchHostMetadata(HttpTransport& transport, const std::string& host,
                                         std::stop_token stop) {
  HttpRequest request;
  request.method = "GET";
  request.url = host + "/.well-known/databricks-config";
  request.headers = {{"Accept", "application/json"}};
  request.timeout = std::chrono::seconds(10);
  HttpResult result = transport.Send(request, stop);
  RETURN_IF_ERROR(result.status.Annotate("host metadata"));
  if (result.response.status != 200) {
    return StatusFromHttpError(result.response.status, result.response.reason, result.response.body)
        .Annotate("host metadata");
  }
  try {
    const json j = json::parse(result.response.body);
    if (!j.is_object()) {
      return InternalError("host metadata: not a JSON object");
    }
    HostMetadata m;
    m.oidc_endpoint = StringOrNumber(j, "oidc_endpoint");
    m.account_id = StringOrNumber(j, "account_id");
    m.workspace_id = StringOrNumber(j, "workspace_id");
    m.cloud = StringOrNumber(j, "cloud");
    return m;
  } catch (const std::exception&) {
    return InternalError("host metadata: not JSON (" + BodyExcerpt(result.response.body) + ")");
  }
}

void BackfillHostMetadata(DatabricksConfig& config, HttpTransport& transport,
                          std::stop_token stop) {
  StatusOr<HostMetadata> m = FetchHostMetadata(transport, config.host, stop);
  if (!m.ok()) {
    spdlog::warn("databricks: host metadata lookup for {} failed: {}", config.host,
                 m.status().ToString());
    return;
  }
  FillIfUnset(config.workspace_id, m->workspace_id);
  FillIfUnset(config.account_id, m->account_id);
  if (config.discovery_url.empty() && !m->oidc_endpoint.empty()) {
    std::string oidc = m->oidc_endpoint;
    while (!oidc.empty() && oidc.back() == '/') {
      oidc.pop_back();
    }
    config.discovery_url = oidc + "/.well-known/oauth-authorization-server";
  }
}

OAuthM2MCredentials::OAuthM2MCredentials(const DatabricksConfig& config, HttpTransport& transport,
                                         Clock& clock)
    : host_(config.host),
      client_id_(config.client_id),
      client_secret_(config.client_secret),
      discovery_url_(config.discovery_url),
      scopes_(config.scopes.empty() ? "all-apis" : config.scopes),
      transport_(transport),
      clock_(clock) {}

StatusOr<std::string> OAuthM2MCredentials::Authorization(std::stop_token stop) {
  {
    std::lock_guard lock(mu_);
    if (token_ && clock_.Steady() < token_->refresh_at) {
      return token_->header;
    }
  }
  std::lock_guard fetch_lock(fetch_mu_);
  {
    std::lock_guard lock(mu_);
    if (token_ && clock_.Steady() < token_->refresh_at) {
      return token_->header;  // another caller refreshed it meanwhile
    }
  }
  StatusOr<Token> fresh = FetchToken(stop);
  std::lock_guard lock(mu_);
  if (!fresh.ok()) {
    if (token_ && clock_.Steady() < token_->expires_at &&
        fresh.status().code() != api::StatusCode::kCancelled) {
      spdlog::warn("databricks oauth-m2m: token refresh failed, using the current token: {}",
                   fresh.status().ToString());
      return token_->header;
    }
    return fresh.status();
  }
  token_ = *fresh;
  return token_->header;
}

void OAuthM2MCredentials::Invalidate() {
  std::lock_guard lock(mu_);
  token_.reset();
}

StatusOr<std::string> OAuthM2MCredentials::TokenEndpoint(std::stop_token stop) {
  if (!token_endpoint_.empty()) {
    return token_endpoint_;
  }
  HttpRequest request;
  request.method = "GET";
  request.url = discovery_url_.empty() ? host_ + "/oidc/.well-known/oauth-authorization-server"
                                       : discovery_url_;
  request.headers = {{"Accept", "application/json"}};
  request.timeout = timeout_;
  HttpResult result = transport_.Send(request, stop);
  RETURN_IF_ERROR(result.status.Annotate("oauth-m2m discovery"));
  if (result.response.status != 200) {
    return StatusFromHttpError(result.response.status, result.response.reason, result.response.body)
        .Annotate("oauth-m2m discovery");
  }
  try {
    const json j = json::parse(result.response.body);
    std::string endpoint = StringOrNumber(j, "token_endpoint");
    if (endpoint.empty()) {
      return InternalError("oauth-m2m discovery: no token_endpoint in the response");
    }
    token_endpoint_ = endpoint;
    return endpoint;
  } catch (const std::exception&) {
    return InternalError("oauth-m2m discovery: response is not JSON (" +
                         BodyExcerpt(result.response.body) + ")");
  }
}

StatusOr<OAuthM2MCredentials::Token> OAuthM2MCredentials::FetchToken(std::stop_token stop) {
  ASSIGN_OR_RETURN(const std::string endpoint, TokenEndpoint(stop));
  HttpRequest request;
  request.method = "POST";
  request.url = endpoint;
  request.headers = {
      {"Authorization", "Basic " + api::Base64Encode(client_id_ + ":" + client_secret_)},
      {"Accept", "application/json"},
      {"Content-Type", "application/x-www-form-urlencoded"},
  };
  request.body = "grant_type=client_credentials&scope=" + PercentEncode(scopes_);
  request.timeout = timeout_;
  const Clock::SteadyTime sent = clock_.Steady();
  HttpResult result = transport_.Send(request, stop);
  RETURN_IF_ERROR(result.status.Annotate("oauth-m2m token"));
  const HttpResponse& r = result.response;
  if (r.status != 200) {
    std::string detail;
    try {
      const json j = json::parse(r.body);
      detail = StringOrNumber(j, "error");
      const std::string description = StringOrNumber(j, "error_description");
      if (!description.empty()) {
        detail += ": " + description;
      }
    } catch (const std::exception&) {
      detail = BodyExcerpt(r.body);
    }
    detail = Redact(Redact(detail, client_secret_),
                    api::Base64Encode(client_id_ + ":" + client_secret_));
    const std::string message =
        "oauth-m2m token request failed: HTTP " + std::to_string(r.status) + " " + detail;
    if (r.status == 400 || r.status == 401 || r.status == 403) {
      return UnauthenticatedError(message);
    }
    return Status(StatusCodeForHttp(r.status, ""), message);
  }
  try {
    const json j = json::parse(r.body);
    const std::string access_token = StringOrNumber(j, "access_token");
    if (access_token.empty()) {
      return InternalError("oauth-m2m token response has no access_token");
    }
    std::string token_type = StringOrNumber(j, "token_type");
    if (token_type.empty()) {
      token_type = "Bearer";
    }
    const std::string expires_in = StringOrNumber(j, "expires_in");
    long long ttl_s = expires_in.empty() ? 3600 : std::atoll(expires_in.c_str());
    if (ttl_s <= 0) {
      ttl_s = 3600;
    }
    const std::chrono::seconds ttl(ttl_s);
    Token token;
    token.header = token_type + " " + access_token;
    token.expires_at = sent + std::max(ttl - std::chrono::seconds(40), ttl / 2);
    token.refresh_at =
        sent + ttl - std::min<std::chrono::seconds>(ttl / 2, std::chrono::minutes(20));
    token.refresh_at = std::min(token.refresh_at, token.expires_at);
    spdlog::debug("databricks oauth-m2m: fetched a token valid for {} s", ttl_s);
    return token;
  } catch (const std::exception&) {
    return InternalError(
        "oauth-m2m token response is not JSON");  // no excerpt: it may hold a token
  }
}

StatusOr<std::unique_ptr<CredentialsProvider>> MakeCredentialsProvider(
    const DatabricksConfig& config, HttpTransport& transport, Clock& clock) {
  std::string type = config.auth_type;
  if (type.empty()) {
    if (!config.token.empty()) {
      type = "pat";
    } else if (!config.client_id.empty() && !config.client_secret.empty()) {
      type = "oauth-m2m";
    }
  }
  if (type == "pat" && !config.token.empty()) {
    return std::unique_ptr<CredentialsProvider>(std::make_unique<PatCredentials>(config.token));
  }
  if (type == "oauth-m2m" && !config.client_id.empty() && !config.client_secret.empty()) {
    return std::unique_ptr<CredentialsProvider>(
        std::make_unique<OAuthM2MCredentials>(config, transport, clock));
  }
  return UnauthenticatedError("no Databricks credentials configured for " + config.host +
                              " (need a token, or client_id and client_secret)");
}

}  // namespace sbx::controller::databricks
