// AdminApi: the Databricks emulator's test-control endpoints under /_emulator/ (info, exec log,
// reset, per-sandbox state, stop behind the
// client's back, kill or list its processes, its egress address, injected provisioning failures)
// and, through the FaultInjector, the shared /_emulator/counters|latency|faults|rate_limit. See
// emulator/README.md.
//
// Thread-safety: thread-safe. Borrows the State and the FaultInjector, which must outlive it.
#pragma once

#include "emulator/databricks/internal/state.h"
#include "emulator/internal/fault_injector.h"

namespace sbx::emulator::internal::databricks {

class AdminApi {
 public:
  AdminApi(State& state, FaultInjector& faults);

  // Any request whose path is /_emulator or starts with /_emulator/.
  HttpResponse Handle(const HttpRequest& req);

 private:
  HttpResponse AdminError(int status, const std::string& message);
  HttpResponse SetEgress(SandboxRec& sb, const HttpRequest& req);  // mu held
  HttpResponse ProvisioningFailures(const HttpRequest& req);

  State& state_;
  FaultInjector& faults_;
};

}  // namespace sbx::emulator::internal::databricks
