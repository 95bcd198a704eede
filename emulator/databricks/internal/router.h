// Router: the Databricks emulator's HTTP entry point. It maps each request to its handler —
// /_emulator/… to the AdminApi, discovery and /oidc/v1/token to Auth, /api/2.0/sandboxes… to
// the SandboxApi, /api/2.0/sandbox-exec/… to the ExecApi — and applies what every call goes
// through first: the endpoint's accounting, latency, faults and (on /api/) the workspace rate
// limit (FaultInjector, endpoint names "databricks.…"), then (on /api/) authentication.
// Unknown paths get 404 ENDPOINT_NOT_FOUND.
//
// Thread-safety: thread-safe; Handle() runs on the HTTP server's connection threads. Borrows
// everything it routes to, which must outlive it.
#pragma once

#include <string>

#include "emulator/databricks/internal/admin_api.h"
#include "emulator/databricks/internal/auth.h"
#include "emulator/databricks/internal/exec_api.h"
#include "emulator/databricks/internal/sandbox_api.h"
#include "emulator/databricks/internal/state.h"
#include "emulator/internal/fault_injector.h"

namespace sbx::emulator::internal::databricks {

class Router {
 public:
  Router(State& state, Auth& auth, SandboxApi& sandboxes, ExecApi& exec, AdminApi& admin,
         FaultInjector& faults);

  void Handle(HttpExchange& ex);

 private:
  HttpResponse FaultResponse(const FaultSpec& f, const std::string& endpoint);

  State& state_;
  Auth& auth_;
  SandboxApi& sandboxes_;
  ExecApi& exec_;
  AdminApi& admin_;
  FaultInjector& faults_;
};

}  // namespace sbx::emulator::internal::databricks
