// AdminApi: the OpenAI emulator's test-control endpoints under /_emulator/openai/… (registration
// counts and failure mode, expire a session, drop an environment's executor, hold a session's
// next inputs in the connection wait, a state dump with per-session input counters, reset) and,
// through the FaultInjector, the shared /_emulator/counters|latency|faults| rate_limit. See
// emulator/openai/README.md.
//
// Thread-safety: thread-safe. Borrows the State, the ExecutorRegistry and the FaultInjector,
// which must outlive it.
#pragma once

#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/internal/executor_registry.h"
#include "emulator/openai/internal/state.h"

namespace sbx::emulator::internal::openai {

class AdminApi {
 public:
  AdminApi(State& state, ExecutorRegistry& registry, FaultInjector& faults);

  // Any request whose path starts with /_emulator.
  HttpResponse Handle(const HttpRequest& req);

 private:
  json StateJson();
  static json CountersJson(const InputCounters& c);
  // POST /_emulator/openai/sessions/{id}/hold_inputs {"count":N, "release_after_ms":M?}.
  HttpResponse HoldInputs(const std::string& session_id, const HttpRequest& req);
  HttpResponse IpAllowlistCall(const HttpRequest& req);

  State& state_;
  ExecutorRegistry& registry_;
  FaultInjector& faults_;
};

}  // namespace sbx::emulator::internal::openai
