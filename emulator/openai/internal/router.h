// Router: the OpenAI emulator's HTTP entry point. It maps each request to its handler —
// /_emulator/… to the AdminApi, …/cloud/environment/{id}/register to the ExecutorRegistry,
// /v1/agents/… to the AgentsApi — and applies what every Agents API call goes through first:
// the endpoint's accounting, latency and faults (FaultInjector, endpoint names "openai.…"),
// then authentication (Bearer key, OpenAI-Beta header). Unknown paths get 404 unknown_url.
//
// Thread-safety: thread-safe; Handle() runs on the HTTP server's connection threads. Borrows
// everything it routes to, which must outlive it.
#pragma once

#include <optional>
#include <string>

#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/internal/admin_api.h"
#include "emulator/openai/internal/agents_api.h"
#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/internal/executor_registry.h"
#include "emulator/openai/internal/state.h"

namespace sbx::emulator::internal::openai {

class Router {
 public:
  Router(State& state, AgentsApi& agents, ExecutorRegistry& registry, AdminApi& admin,
         FaultInjector& faults);

  void Handle(HttpExchange& ex);

 private:
  void RespondUnknownUrl(HttpExchange& ex);
  HttpResponse FaultResponse(const FaultSpec& f, const std::string& endpoint);
  std::optional<ApiError> CheckAuth(const HttpRequest& req);

  State& state_;
  AgentsApi& agents_;
  ExecutorRegistry& registry_;
  AdminApi& admin_;
  FaultInjector& faults_;
};

}  // namespace sbx::emulator::internal::openai
