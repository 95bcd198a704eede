// HealthServer: sbxd's operational HTTP endpoint (DESIGN §4 --metrics-addr), an adapter over
// sbx's one HTTP server (httpserver/http_server.h, kept out of this header).
//
//   GET /healthz → 200 "ok" while the process runs;
//   GET /readyz  → 200 "ok" when readiness() returns {true, _}, else 503 with the reason
//                  (e.g. "standby: waiting for the leader lease", "initial sync not done");
//   GET /metrics → 200 Metrics::Render(), Content-Type "text/plain; version=0.0.4";
//   other paths  → 404; other methods on these paths → 405.
// The library's bounds apply (head, body, connections, request and write deadlines).
//
// Thread-safety: Start/Stop from one owning thread. Requests are served on the server's
// connection threads, so `readiness` is called concurrently and must be thread-safe; an
// exception from it answers 503. Stop() closes the listener and joins every connection thread,
// so after it returns neither `metrics` nor `readiness` is called again. Ownership: `metrics`
// and whatever `readiness` refers to must outlive Stop() (the destructor calls it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "api/status.h"
#include "controller/server/metrics.h"

namespace sbx::httpserver {
class HttpServer;
}

namespace sbx::controller {

class HealthServer {
 public:
  using Readiness = std::function<std::pair<bool, std::string>()>;

  HealthServer(Metrics& metrics, Readiness readiness);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Listens on `addr` (httpserver::ParseListenAddress: "host:port", "[v6addr]:port" or
  // ":port"); port 0 picks a free port. Returns the port listened on. kInvalidArgument for a
  // malformed address, kUnavailable if it cannot be bound, kFailedPrecondition if already
  // started. After Stop() it may be started again.
  api::StatusOr<int> Start(const std::string& addr);
  // Idempotent.
  void Stop();

 private:
  Metrics& metrics_;
  Readiness readiness_;
  std::unique_ptr<httpserver::HttpServer> server_;  // Set while started.
};

}  // namespace sbx::controller
