// FaultInjector: the accounting and fault-injection half of the emulators' admin API
// (/_emulator/…), shared by the Databricks and OpenAI emulators so one process can expose one
// set of counters: per-endpoint call counters keyed by stable names ("databricks.create"),
// per-endpoint or global latency, injected errors (rate 0..1, or a burst of the next K calls;
// before the handler ran, or after it — the call took effect but the client sees an error),
// and a workspace-wide request rate limit (token bucket; above it, 429 + Retry-After).
//
// Thread-safe (one internal mutex). Owned by whoever wires the emulators; each emulator takes
// it by pointer or owns its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal {

struct FaultSpec {
  int status = 503;                     // HTTP status to answer with: 429, 500, 503, …
  double rate = 0;                      // probability per call once the burst is used up
  int count = 0;                        // burst: the next `count` calls fail
  std::chrono::seconds retry_after{1};  // sent as Retry-After on 429 and 503
  std::string error_code;               // empty: derived from the status
  std::string message;                  // empty: a generic message
  bool after = false;  // run the handler first (the call takes effect), then fail the response
};

// What the injector decided for one call.
struct CallPlan {
  std::chrono::milliseconds latency{0};
  std::optional<FaultSpec> fault;  // fail this call (before or after, see fault.after)
  std::optional<std::chrono::seconds> throttled;  // rate limit hit: answer 429, Retry-After
};

class FaultInjector {
 public:
  FaultInjector();

  // Counts one call to `endpoint` and decides latency, fault and throttling for it.
  // `rate_limited` says whether the workspace rate limit applies to this endpoint.
  CallPlan Admit(std::string_view endpoint, bool rate_limited);
  // Admit(), then sleeps the planned latency on the calling thread (what every handler does).
  CallPlan AdmitAndDelay(std::string_view endpoint, bool rate_limited);

  std::map<std::string, std::int64_t> Counters() const;
  void ResetCounters();
  // endpoint "*" = every endpoint without its own setting.
  void SetLatency(const std::string& endpoint, std::chrono::milliseconds latency);
  void SetFault(const std::string& endpoint, const FaultSpec& fault);
  void ClearFaults();  // also clears latencies
  // requests_per_second <= 0 turns the limit off; burst <= 0 means max(1, rps).
  void SetRateLimit(double requests_per_second, double burst);
  void Reset();  // counters, latencies, faults and the rate limit

  // Serves GET /_emulator/counters, POST|DELETE /_emulator/counters (reset),
  // POST /_emulator/latency, POST|DELETE /_emulator/faults, POST /_emulator/rate_limit.
  // Returns nullopt for any other path.
  std::optional<HttpResponse> HandleAdmin(const HttpRequest& request);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::int64_t, std::less<>> counters_;              // Guarded by mu_.
  std::map<std::string, std::chrono::milliseconds, std::less<>> latency_;  // Guarded by mu_.
  std::map<std::string, FaultSpec, std::less<>> faults_;                   // Guarded by mu_.
  double rps_ = 0;                                                         // Guarded by mu_.
  double burst_ = 0;                                                       // Guarded by mu_.
  double tokens_ = 0;                                                      // Guarded by mu_.
  std::chrono::steady_clock::time_point refilled_at_;                      // Guarded by mu_.
  std::mt19937_64 rng_;                                                    // Guarded by mu_.
};

// Standard Databricks-ish error_code for an HTTP status (429 → "REQUEST_LIMIT_EXCEEDED", …).
std::string DefaultErrorCode(int status);

}  // namespace sbx::emulator::internal
