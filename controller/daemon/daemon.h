// Daemon: sbxd as an object (DESIGN §4, issue #26), after Envoy's exe/server split. main parses
// flags into a DaemonConfig, builds a Daemon from it and runs it; a test does the same in its
// own process.
//
//   Create(config)  opens the store and builds every part (reconcilers, Manager, sources, lease
//                   holders, listeners) in dependency order; binds no port, starts no thread.
//   Serve()         binds the listeners that answer from start-up on, standby included:
//                   /healthz /readyz /metrics, the webhook endpoint, the API. Not for --once.
//   Run(stop)       takes work (per-workspace leases, or the leader lease: standby until then)
//                   and reconciles until `stop` or a lost leader lease; then drains.
//   RunOnce(stop)   --once: takes the leader lease, runs one full pass, gives the lease back.
//   ~Daemon()       shutdown: Drain (if Run did not), then the parts are destroyed in reverse
//                   order of construction, each after everything that uses it.
//
// One reconciler list (Reconcilers()) serves both the Manager and --once.
//
// Thread-safety: one thread calls Create, Serve, Run/RunOnce and the destructor; `stop` may be
// requested from any thread (a signal waiter). The ports are readable once Serve returned.
#pragma once

#include <iosfwd>
#include <memory>
#include <stop_token>

#include "api/status.h"
#include "controller/daemon/daemon_config.h"

namespace sbx::controller::daemon {

// `sbxd --once` found the leader lease held by another sbxd: nothing was done.
inline constexpr int kExitLeaseHeld = 3;

class Daemon {
 public:
  // Registers every secret known at start with the logger's scrubber first (SECURITY.md), then
  // opens the store (and, with --listen, the API's two connections and the tokens file).
  // kInvalidArgument for a bad tokens file; the store's error when it cannot be opened.
  static api::StatusOr<std::unique_ptr<Daemon>> Create(DaemonConfig config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Binds the health/metrics server, the webhook endpoint and the API server, as configured.
  [[nodiscard]] api::Status Serve();
  // Blocks until `stop` is requested or the leader lease is lost, then drains in-flight
  // reconciles and gives the leases up. The exit code: 0, or 1 after a lost leader lease.
  int Run(std::stop_token stop);
  // One pass over every object (the exit code: 0, 1 if anything failed, kExitLeaseHeld with the
  // reason on `err` if another sbxd holds the store).
  int RunOnce(std::stop_token stop, std::ostream& err);

  // Ports bound by Serve (0: not served).
  int metrics_port() const;
  int webhook_port() const;
  int api_port() const;

 private:
  struct Parts;
  explicit Daemon(std::unique_ptr<Parts> parts);
  void Drain();

  std::unique_ptr<Parts> parts_;
};

}  // namespace sbx::controller::daemon
