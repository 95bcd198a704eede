// Auth: authentication of the Databricks emulator (§9): bearer PATs and OAuth M2M tokens on
// /api/, and the endpoints that issue them — /.well-known/databricks-config,
// /oidc/.well-known/oauth-authorization-server and POST /oidc/v1/token (client credentials).
//
// Thread-safety: thread-safe (issued tokens live in the State under its mutex). Borrows the
// State, which must outlive it.
#pragma once

#include <optional>
#include <string>

#include "emulator/databricks/internal/state.h"

namespace sbx::emulator::internal::databricks {

class Auth {
 public:
  explicit Auth(State& state);

  // nullopt if the request may call /api/; else 401 UNAUTHENTICATED or 403 PERMISSION_DENIED.
  std::optional<ApiError> CheckAuth(const HttpRequest& req);
  HttpResponse HostMetadata(const HttpRequest& req);
  HttpResponse OidcDiscovery(const HttpRequest& req);
  HttpResponse Token(const HttpRequest& req);

 private:
  // The URL the client used (its Host header), so discovery works behind any address.
  std::string PublicUrl(const HttpRequest& req) const;

  State& state_;
};

}  // namespace sbx::emulator::internal::databricks
