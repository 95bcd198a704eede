// FaultInjector: the accounting and fault-injection half of the emulators' admin API
// (/_emulator/…), shared by the Databricks and OpenAI emulators so one process can expose one
// set of counters: per-endpoint call counters keyed by stable names ("databricks.create"),
// per-endpoint or global latency, injected errors (rate 0..1, or a burst of the next K calls;
// before the handler ran, or after it — the call took effect but the client sees an error),
// and request rate limits (token buckets; above them, 429 + Retry-After): one workspace-wide
// for the Databricks API, one for the OpenAI API.
//
// Thread-safe (one internal mutex). Owned by whoever wires the emulators; each emulator takes
// it by pointer or owns its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
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

// Which rate limit a call counts against.
enum class RateLimit { kNone, kDatabricks, kOpenAi };

// What the injector decided for one call.
struct CallPlan {
  std::chrono::milliseconds latency{0};
  std::optional<FaultSpec> fault;  // fail this call (before or after, see fault.after)
  // Rate limit hit: answer 429 with Retry-After (whole seconds, at least 1) …
  std::optional<std::chrono::seconds> throttled;
  // … and, where the API has a finer hint (OpenAI's retry-after-ms), when a token is free.
  std::chrono::milliseconds throttled_for{0};
};

class FaultInjector {
 public:
  FaultInjector();

  // Counts one call to `endpoint` and decides latency, fault and throttling for it.
  // `limit` says which rate limit applies to this endpoint; the bool forms mean the Databricks
  // workspace limit (true) or none.
  CallPlan Admit(std::string_view endpoint, RateLimit limit);
  CallPlan Admit(std::string_view endpoint, bool rate_limited) {
    return Admit(endpoint, rate_limited ? RateLimit::kDatabricks : RateLimit::kNone);
  }
  // Admit(), then sleeps the planned latency on the calling thread (what every handler does).
  CallPlan AdmitAndDelay(std::string_view endpoint, RateLimit limit);
  CallPlan AdmitAndDelay(std::string_view endpoint, bool rate_limited) {
    return AdmitAndDelay(endpoint, rate_limited ? RateLimit::kDatabricks : RateLimit::kNone);
  }

  std::map<std::string, std::int64_t> Counters() const;
  void ResetCounters();
  // endpoint "*" = every endpoint without its own setting.
  void SetLatency(const std::string& endpoint, std::chrono::milliseconds latency);
  void SetFault(const std::string& endpoint, const FaultSpec& fault);
  void ClearFaults();  // also clears latencies
  // requests_per_second <= 0 turns the limit off; burst <= 0 means max(1, rps).
  void SetRateLimit(double requests_per_second, double burst,
                    RateLimit limit = RateLimit::kDatabricks);
  void Reset();  // counters, latencies, faults and the rate limits

  // Serves GET /_emulator/counters, POST|DELETE /_emulator/counters (reset),
  // POST /_emulator/latency, POST|DELETE /_emulator/faults, POST /_emulator/rate_limit
  // ({"requests_per_second", "burst", "api": "databricks" (default) | "openai"}).
  // Returns nullopt for any other path. Throttled calls count in the counters as
  // "<api>.throttled" ("databricks.throttled", "openai.throttled") besides their endpoint.
  // Also GET|DELETE /_emulator/replica_log (below).
  std::optional<HttpResponse> HandleAdmin(const HttpRequest& request);

  // A request that named the sbxd replica sending it (X-Sbx-Replica, X-Sbx-Workspace,
  // X-Sbx-Fence: controller/cloud/fenced_transport.h), recorded in arrival order across both
  // APIs: what shows whether each workspace was served by one replica at a time. Requests
  // without X-Sbx-Replica are not recorded. At most kMaxReplicaLog, the oldest dropped (and
  // counted). Reset() clears it.
  struct ReplicaRequest {
    std::uint64_t seq = 0;  // arrival order, from 1
    std::string endpoint;   // "databricks.create", "openai.events.create", …
    std::string id;         // the sandbox or session the path names, if any
    std::string replica;
    std::string workspace;
    std::string fence;       // "" when the request carried none
    std::string checked_at;  // X-Sbx-Checked-At (unix ms), "" when none
    std::int64_t at_ms = 0;  // arrival, unix ms
  };
  static constexpr std::size_t kMaxReplicaLog = 200'000;
  void RecordReplicaRequest(std::string_view endpoint, const std::string& id,
                            const HttpRequest& request);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::int64_t, std::less<>> counters_;              // Guarded by mu_.
  std::map<std::string, std::chrono::milliseconds, std::less<>> latency_;  // Guarded by mu_.
  std::map<std::string, FaultSpec, std::less<>> faults_;                   // Guarded by mu_.
  struct Bucket {
    double rps = 0;
    double burst = 0;
    double tokens = 0;
    std::chrono::steady_clock::time_point refilled_at;
  };
  Bucket databricks_limit_;                 // Guarded by mu_.
  Bucket openai_limit_;                     // Guarded by mu_.
  std::mt19937_64 rng_;                     // Guarded by mu_.
  std::deque<ReplicaRequest> replica_log_;  // Guarded by mu_.
  std::uint64_t replica_log_seq_ = 0;       // Guarded by mu_.
  std::uint64_t replica_log_dropped_ = 0;   // Guarded by mu_.
};

// Standard Databricks-ish error_code for an HTTP status (429 → "REQUEST_LIMIT_EXCEEDED", …).
std::string DefaultErrorCode(int status);

}  // namespace sbx::emulator::internal
