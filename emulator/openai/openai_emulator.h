// OpenAiEmulator: a local emulator of the OpenAI Agents API (beta) self-hosted session surface
// (reference/openai-agents-api.md §1, §2, §5, §6) and of the executor registry that
// `codex exec-server` registers with (reference/codex-exec-server.md §3, §9), on loopback.
//
// HTTP (one port, P): the Agents API under /v1/agents/… (sessions create/get/list/update/delete,
// POST …/events → 202, GET …/events → SSE, turns, items, GET /v1/agents/environments/{id});
// the executor registry at {remote_url}/cloud/environment/{id}/register and …/direct/register,
// where remote_url is each session's own http://127.0.0.1:P/v1/agents/api/connect/rt_… (loopback,
// so the real codex accepts plain http; registration under any other URL is refused with 404);
// and the admin API under
// /_emulator/openai/… plus the shared /_emulator/counters|latency|faults|rate_limit
// (see emulator/README.md).
//
// WebSocket (a second port, W): the `url` handed out by registration,
// ws://127.0.0.1:W/rendezvous/{environment_id}/{executor_registration_id}. Three kinds of
// socket are accepted:
//   - "noise_hybrid_ik_v1" (the real codex): the socket is accepted and kept open (pings are
//     answered), nothing is sent; it proves connectivity only and cannot run commands.
//   - "sbx_plain_jsonrpc_v1" (the stand-in executor, `sbx-emulator executor`): the socket carries
//     plain exec-server JSON-RPC text frames (codex-exec-server.md §7) with the emulator as the
//     JSON-RPC client; the emulated harness runs a turn's commands through it.
//   - "direct_jsonrpc_v1" (the real codex with `--remote-transport direct --aws-sigv4`,
//     registered at …/direct/register): the same plain JSON-RPC, so the harness drives a real
//     codex exactly as it drives the stand-in.
// An environment is `pending` until an executor's socket opens, `connected` while one is open,
// and `disconnected` `disconnected_after` after the last one closed.
//
// Emulated harness: a user message runs one turn. Every input line starting with "$ " is run
// with /bin/bash -c in the session's workspace directory through a connected plain-profile
// executor (→ a command_execution item with its output), then a final assistant message, then
// agent.session.turn.completed with a deterministic `usage` (failed if no executor connected
// within `connection_wait`; cancelled on agent.session.input.cancel), then
// agent.session.idle. Test controls in the input: "!fail <code> [<message>]",
// "!subagent [completed|failed|cancelled]", "!sleep <duration>" (openai/README.md).
// POST …/events dedupes on Idempotency-Key per session and counts accepted and deduped inputs
// and root turns (GET /_emulator/openai/state).
//
// Webhooks (Options::webhook_url/secret, or POST /_emulator/openai/webhooks): session lifecycle
// events are also POSTed, signed like the service's (Standard Webhooks), with retries.
//
// Session delete (Options::strict_session_delete, on by default): 409 conflict_error while a
// turn runs, and 409 "session has no durably bound CCA root" for a session none of whose turns
// ever ran with an executor — what the real service answered for such a self-hosted session.
//
// Thread-safety: all public methods are thread-safe. Start() once, Stop() once (also run by the
// destructor). Owns its servers and threads; a FaultInjector passed in Options is borrowed and
// must outlive the emulator.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/status.h"

namespace sbx::emulator {

namespace internal {
class FaultInjector;
}

// The plain JSON-RPC security profile of the stand-in executor (not an OpenAI name).
inline constexpr char kPlainJsonRpcProfile[] = "sbx_plain_jsonrpc_v1";
// The profile of the real codex exec-server (0.171.0).
inline constexpr char kNoiseProfile[] = "noise_hybrid_ik_v1";
// The transport of codex's direct mode (`--remote-transport direct --aws-sigv4`,
// codex-exec-server.md §5): plain JSON-RPC, registered at …/direct/register.
inline constexpr char kDirectTransport[] = "direct_jsonrpc_v1";

class OpenAiEmulator {
 public:
  using Duration = std::chrono::milliseconds;

  // How executor registration fails on purpose (admin API or Options).
  enum class RegistrationFailure {
    kNone,
    kIpNotAuthorized,  // 401, raw body "IP is not authorized"
    kMissingScope,  // 403 {"error":{"message":"Missing required scope …","code":"missing_scope"}}
  };

  struct Options {
    // Accepted application keys (Authorization: Bearer … on /v1/agents/*).
    std::vector<std::string> api_keys{"sk-emulator"};
    // Accepted environment ("executor") keys on /cloud/environment/{id}/register. An application
    // key used here gets 403 missing_scope (like a project key against the real registry).
    std::vector<std::string> executor_keys{"sk-exec-emulator"};
    bool accept_any_api_key = false;       // demos only
    bool accept_any_executor_key = false;  // demos only
    // Require `OpenAI-Beta: agents=v1` (400 invalid_beta without it).
    bool require_beta_header = true;
    // How long after the last executor socket closes the environment reports `disconnected`
    // (the real service took ~20 s; unconfirmed).
    Duration disconnected_after{std::chrono::seconds(20)};
    // How long POST …/events holds input that needs an executor that is not connected (the real
    // service: up to 5 minutes). When it expires the POST still answers 202 and the turn fails
    // with error code "connection_failed".
    Duration connection_wait{std::chrono::minutes(5)};
    // Per command run through the executor; then it is terminated and the item fails.
    Duration command_timeout{std::chrono::minutes(10)};
    // SSE keepalive comment interval (": keepalive"); also how fast a gone client is noticed.
    Duration keepalive_interval{std::chrono::seconds(15)};
    RegistrationFailure registration_failure = RegistrationFailure::kNone;
    // DELETE /agents/sessions/{id} as observed on the real service (reference §1.6), both
    // answered 409 conflict_error: a session whose turn is running ("running execution must be
    // cancelled first"; the real status is undocumented, 409 is our choice), and a session
    // whose first turn never ran ("session has no durably bound CCA root", also after a
    // cancel) — the root is bound once a turn has run with a connected executor. False: delete
    // always succeeds, cancelling a running turn (the documented happy path).
    bool strict_session_delete = true;
    // The organisation's IP allowlist (reference §3.4, §5: 401 "IP not authorized"): when
    // enabled, an executor registration whose caller address is in none of `ip_allowlist`'s
    // entries (IPv4 addresses or CIDR blocks) gets 401 with the raw body "IP is not
    // authorized". Also settable through POST /_emulator/openai/ip_allowlist.
    bool ip_allowlist_enabled = false;
    std::vector<std::string> ip_allowlist;
    // The public address of the client at the TCP peer_address:peer_port of a request to
    // local_port; unset = peer_address. sbx-emulator answers with the Databricks half's
    // DatabricksEmulator::EgressAddressOf (the emulated sandbox's egress address).
    std::function<std::string(const std::string& peer_address, int peer_port, int local_port)>
        caller_address;
    // Default page size of GET /agents/sessions (limit 1..100).
    int default_list_limit = 20;
    // Signed webhooks (reference §3.7: agent.session.created, .action_required, .in_progress,
    // .idle, .failed) POSTed to this URL, Standard Webhooks signature with `webhook_secret`
    // ("whsec_<base64 key>"); empty = none (the admin API can set it later). A delivery without
    // a 2xx is retried with exponential backoff (base doubling to cap) up to max_attempts.
    std::string webhook_url;
    std::string webhook_secret;
    int webhook_max_attempts = 10;
    Duration webhook_retry_base{std::chrono::seconds(1)};
    Duration webhook_retry_cap{std::chrono::minutes(5)};
    // Shared accounting/fault injection (borrowed; null = the emulator owns one).
    internal::FaultInjector* faults = nullptr;
    // Requests per second on /v1/agents/* (0 = unlimited); above it 429 rate_limit_exceeded with
    // Retry-After and retry-after-ms. The executor's own registration is not limited.
    double requests_per_second = 0;
  };

  struct RegistrationCount {
    std::int64_t attempts = 0;   // every POST …/register that named this environment
    std::int64_t successes = 0;  // answered 200
  };

  explicit OpenAiEmulator(Options options);
  ~OpenAiEmulator();
  OpenAiEmulator(const OpenAiEmulator&) = delete;
  OpenAiEmulator& operator=(const OpenAiEmulator&) = delete;

  // Binds host:port (0 = a free port) for HTTP and a free port for WebSockets, and starts
  // serving. Returns the HTTP port. kUnavailable if a port cannot be bound, kFailedPrecondition
  // if already started.
  api::StatusOr<int> Start(const std::string& host = "127.0.0.1", int port = 0);
  // Ends every SSE stream and executor socket, waits for running turns. Idempotent.
  void Stop();

  std::string base_url() const;    // "http://127.0.0.1:PORT/v1"
  std::string server_url() const;  // "http://127.0.0.1:PORT" (admin API root)
  int websocket_port() const;
  internal::FaultInjector& faults();

  // Same as the admin API, for in-process tests.
  void SetRegistrationFailure(RegistrationFailure failure);
  std::map<std::string, RegistrationCount> Registrations() const;
  // Closes every executor socket of `environment_id`; false if none was open.
  bool DropExecutor(const std::string& environment_id);
  // Marks the session failed ("session expired") and its environment expired; false if unknown.
  bool ExpireSession(const std::string& session_id);
  // The webhook sender's state as GET /_emulator/openai/webhooks shows it (JSON text).
  std::string WebhookStats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::emulator
