// DatabricksEmulator: a local, faithful emulator of the Databricks Sandbox API
// (reference/databricks-sandbox-api.md §3, §4, §8, §9, §12) on a loopback port, plus the
// admin API under /_emulator/ (see emulator/README.md).
//
// State lives in memory; each sandbox has a directory tree under `<root>/sandboxes/<id>/`:
// `home/` survives stop/start and is what commands see as /home/sandbox-agent; `tmp/` is the
// sandbox's /tmp and is wiped on stop. exec-sync runs real processes (argv, no shell). Each
// one carries SBX_EMULATOR_SANDBOX=<instance-id>/<sandbox-id> in its environment, which is how
// stop, delete and Stop() find and kill every process of a sandbox, detached ones included.
//
// Every behaviour the reference lists as undocumented (§13) is an Option below with a safe
// default and a comment saying what was chosen.
//
// Thread-safety: all public methods are thread-safe. Start() once, Stop() once (also run by the
// destructor). Owns its HTTP server, timer thread and processes; a FaultInjector passed in
// Options is borrowed and must outlive the emulator.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"

namespace sbx::emulator {

namespace internal {
class FaultInjector;
}

class DatabricksEmulator {
 public:
  using Duration = std::chrono::milliseconds;

  struct Options {
    // Root of the on-disk state; created if missing. Required.
    std::string root_dir;
    // Extra directory prepended to every command's PATH (a stand-in `codex` goes here).
    // Empty = `<root>/bin`.
    std::string bin_dir;

    // §4 timings. PENDING → RUNNING after `pending_delay`; STOPPING → STOPPED after
    // `stopping_delay`. 0 = at the next observation (the create/start/stop response itself
    // still shows PENDING/STOPPING, like the docs example).
    Duration pending_delay{1000};
    Duration stopping_delay{1000};

    // §1/§13.5: the seed says "To disable sandbox auto-stop, set inactivity_timeout to 0 or
    // leave the field unset", so by default a sandbox without a timeout (or with "0s") never
    // auto-stops. `default_inactivity_timeout` > 0 models a server that applies a default
    // instead (the lakebox CLI's 10 min); 0 = none. The minimum is 0 so tests can use "0.2s";
    // the maximum follows lakebox (≤ 24 h).
    Duration default_inactivity_timeout{0};
    Duration min_inactivity_timeout{0};
    Duration max_inactivity_timeout{std::chrono::hours(24)};
    // Echo a non-zero default_inactivity_timeout in responses when the client did not set one
    // (what a server that fills defaults does; lakebox lists idleTimeout for every sandbox).
    bool fill_default_inactivity_timeout = true;
    // §13.4: what counts as activity for the idle timer. A running exec-sync always keeps
    // the sandbox awake; its start and end count as activity when this is true.
    bool exec_counts_as_activity = true;
    bool list_commands_counts_as_activity = true;

    // §13.2: exec-sync limits (undocumented). No/zero timeout → default; above max → clamped.
    Duration default_execution_timeout{std::chrono::minutes(5)};
    Duration max_execution_timeout{std::chrono::hours(1)};
    // Cap on stdout+stderr bytes per response; the rest is dropped and truncated=true.
    std::size_t exec_output_cap_bytes = 1 << 20;
    // Value of $HOME for exec-sync. The reference says it is *not* /home/sandbox-agent
    // (unconfirmed); empty = leave HOME unset.
    std::string exec_home_env;

    // Auth (§9). Accepted PATs; OAuth M2M client credentials; issued token lifetime.
    std::vector<std::string> tokens{"dapi-emulator"};
    std::string oauth_client_id = "sbx-emulator-client";
    std::string oauth_client_secret = "sbx-emulator-secret";
    Duration oauth_token_ttl{std::chrono::hours(1)};
    // Accept any non-empty bearer token (demos only).
    bool accept_any_token = false;
    // Advertised by /.well-known/databricks-config (turns on the SDKs' workspace header);
    // empty = not advertised. The header itself is always tolerated and never checked.
    std::string workspace_id;

    // §13.1: sandbox ids. Allowed characters are undocumented: we allow [A-Za-z0-9._-], 1..max.
    std::size_t max_sandbox_id_length = 128;
    // §1 quota (unconfirmed 100 per workspace). Above it create → 429 RESOURCE_EXHAUSTED.
    // 0 = unlimited.
    std::size_t max_sandboxes = 100;
    // §1 per-user quota (unconfirmed: 40). A user is one PAT, or one OAuth client. Above it
    // create → 429 RESOURCE_EXHAUSTED with a QuotaFailure detail. 0 = unlimited (the default:
    // the number is unconfirmed, and tests and benchmarks create many sandboxes as one user).
    std::size_t max_sandboxes_per_user = 0;
    // §3 row 4 (early docs): a PATCH takes this long to apply; another PATCH of the same
    // sandbox meanwhile gets 409 ABORTED. 0 = instant (no overlap is possible).
    Duration update_duration{0};
    // Reject unknown JSON fields in create/update bodies with 400. Default false: the real
    // API ignores output-only fields (name, status, times) and proto JSON parsers tolerate more.
    bool reject_unknown_fields = false;
    // §12.3: also accept legacy mask paths `metadata.display_name` and Terraform's `spec`.
    bool accept_legacy_mask_paths = false;
    // §13.10: start sets a fresh create_time (early docs; unconfirmed). Default: keep it.
    bool reset_create_time_on_start = false;
    // §13.10: every state transition sets update_time (unconfirmed). Default: PATCH only.
    bool update_time_on_transitions = false;
    // §4: delete goes through STOPPING for `stopping_delay` before the sandbox is gone
    // (early docs). Default: gone at once.
    bool delete_via_stopping = false;
    // §13.3: ListCommands history is cleared when the sandbox stops (the daemon that keeps it
    // dies with the VM). Default true.
    bool clear_commands_on_stop = true;
    // Use a private mount namespace per command when available (else path rewriting).
    bool prefer_mount_namespace = true;

    // Workspace-wide API rate limit in requests/s (§13.8: real limits are undocumented); above
    // it /api/ calls get 429 REQUEST_LIMIT_EXCEEDED with Retry-After. 0 = unlimited.
    double requests_per_second = 0;

    // Shared accounting/fault injection (borrowed; may be null = the emulator owns one).
    internal::FaultInjector* faults = nullptr;
  };

  explicit DatabricksEmulator(Options options);
  ~DatabricksEmulator();
  DatabricksEmulator(const DatabricksEmulator&) = delete;
  DatabricksEmulator& operator=(const DatabricksEmulator&) = delete;

  // Creates the root dir, probes isolation, binds host:port (0 = a free port) and starts
  // serving. Returns the bound port. kInvalidArgument for bad options, kUnavailable if the
  // port cannot be bound.
  api::StatusOr<int> Start(const std::string& host = "127.0.0.1", int port = 0);
  // Stops serving, kills every process of every sandbox. Idempotent.
  void Stop();

  std::string base_url() const;  // "http://127.0.0.1:PORT"
  const std::string& instance_id() const;
  std::string isolation_mechanism() const;  // "mount-namespace" | "path-rewrite"
  internal::FaultInjector& faults();

  // The public (egress) address of whoever holds the client end of the TCP connection
  // peer_address:peer_port → local_port on this machine: the current boot's egress address of
  // the emulated sandbox the connecting process runs in (found by its SBX_EMULATOR_SANDBOX
  // marker), else `peer_address` itself. The OpenAI half's IP allowlist asks this.
  std::string EgressAddressOf(const std::string& peer_address, int peer_port, int local_port) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::emulator
