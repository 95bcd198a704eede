#include "emulator/databricks/internal/auth.h"

#include <strings.h>

#include <algorithm>

#include "api/base64.h"
#include "api/percent_encoding.h"

namespace sbx::emulator::internal::databricks {
namespace {

HttpResponse OAuthError(int status, const std::string& error, const std::string& description) {
  return {
      status, "application/json", {}, Dump({{"error", error}, {"error_description", description}})};
}

}  // namespace

Auth::Auth(State& state) : state_(state) {}

std::optional<ApiError> Auth::CheckAuth(const HttpRequest& req) {
  std::string h = req.Header("authorization");
  if (h.empty()) {
    return ApiError{401, "UNAUTHENTICATED", "Missing Authorization header", {}};
  }
  if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0) {
    return ApiError{401, "UNAUTHENTICATED", "Authorization must be a Bearer token", {}};
  }
  std::string token = Trim(h.substr(7));
  if (token.empty()) {
    return ApiError{401, "UNAUTHENTICATED", "Empty bearer token", {}};
  }
  if (state_.options.accept_any_token) {
    return std::nullopt;
  }
  if (std::find(state_.options.tokens.begin(), state_.options.tokens.end(), token) !=
      state_.options.tokens.end()) {
    return std::nullopt;
  }
  std::lock_guard lock(state_.mu);
  auto it = state_.issued.find(token);
  if (it == state_.issued.end()) {
    return ApiError{401, "UNAUTHENTICATED", "Invalid access token", {}};
  }
  if (SteadyClock::now() >= it->second.expires_at) {
    state_.issued.erase(it);
    return ApiError{401, "UNAUTHENTICATED", "Access token has expired", {}};
  }
  if (!it->second.scopes.contains("all-apis") && !it->second.scopes.contains("sandbox")) {
    return ApiError{403,
                    "PERMISSION_DENIED",
                    "Token is missing the required scope 'sandbox' (or 'all-apis')",
                    {}};
  }
  return std::nullopt;
}

// The URL the client used (its Host header), so discovery works behind any address.
std::string Auth::PublicUrl(const HttpRequest& req) const {
  std::string host = req.Header("host");
  return host.empty() ? state_.base_url() : "http://" + host;
}

HttpResponse Auth::HostMetadata(const HttpRequest& req) {
  json j = {{"oidc_endpoint", PublicUrl(req) + "/oidc"}, {"cloud", "aws"}};
  if (!state_.options.workspace_id.empty()) {
    j["workspace_id"] = state_.options.workspace_id;
  }
  return Ok(j);
}

HttpResponse Auth::OidcDiscovery(const HttpRequest& req) {
  const std::string base = PublicUrl(req);
  return Ok({{"issuer", base + "/oidc"},
             {"authorization_endpoint", base + "/oidc/v1/authorize"},
             {"token_endpoint", base + "/oidc/v1/token"},
             {"grant_types_supported", json::array({"client_credentials"})}});
}

HttpResponse Auth::Token(const HttpRequest& req) {
  auto form = internal::ParseFormEncoded(req.body);
  std::string client_id, client_secret;
  std::string h = req.Header("authorization");
  if (h.size() > 6 && strncasecmp(h.c_str(), "Basic ", 6) == 0) {
    auto decoded = api::Base64Decode(Trim(h.substr(6)));
    if (decoded) {
      auto colon = decoded->find(':');
      client_id = api::PercentDecode(decoded->substr(0, colon), false);
      if (colon != std::string::npos) {
        client_secret = api::PercentDecode(decoded->substr(colon + 1), false);
      }
    }
  } else {
    client_id = form["client_id"];  // client_secret_post
    client_secret = form["client_secret"];
  }
  if (client_id.empty() || client_id != state_.options.oauth_client_id ||
      client_secret != state_.options.oauth_client_secret) {
    return OAuthError(401, "invalid_client", "Client authentication failed");
  }
  if (form["grant_type"] != "client_credentials") {
    return OAuthError(400, "unsupported_grant_type",
                      "Only grant_type=client_credentials is supported");
  }
  std::string scope =
      form.contains("scope") && !Trim(form["scope"]).empty() ? Trim(form["scope"]) : "all-apis";
  IssuedToken t;
  t.expires_at = SteadyClock::now() + state_.options.oauth_token_ttl;
  t.client_id = client_id;
  std::size_t start = 0;
  while (start < scope.size()) {
    std::size_t sp = scope.find(' ', start);
    if (sp == std::string::npos) {
      sp = scope.size();
    }
    if (sp > start) {
      t.scopes.insert(scope.substr(start, sp - start));
    }
    start = sp + 1;
  }
  std::string token = "dose" + state_.RandomHex(16);
  {
    std::lock_guard lock(state_.mu);
    state_.issued[token] = t;
  }
  auto ttl_s = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(state_.options.oauth_token_ttl).count());
  return Ok(
      {{"access_token", token}, {"token_type", "Bearer"}, {"expires_in", ttl_s}, {"scope", scope}});
}

}  // namespace sbx::emulator::internal::databricks
