// Stand-in executor: a small `codex exec-server --remote` look-alike for emulated sandboxes
// (reference/codex-exec-server.md §3, §7, §9.3). It registers with the OpenAI emulator's
// executor registry like codex does (POST {remote}/cloud/environment/{id}/register, Bearer
// CODEX_API_KEY) but asks for the plain JSON-RPC security profile (kPlainJsonRpcProfile,
// "sbx_plain_jsonrpc_v1") instead of Noise, opens the WebSocket it gets back, and serves the
// exec-server JSON-RPC subset on it as the JSON-RPC server (what §9.3 says a stand-in must):
// initialize (with `resumeSessionId`: the session's processes survive a dropped socket for
// 30 s), initialized, process/start (argv, no shell, in `cwd` given as a file:// URI, env merged
// over its own minus CODEX_API_KEY, pipeStdin, tty), process/output|exited|closed notifications
// with one increasing `seq` per process, process/read, process/write, process/terminate,
// process/signal, fs/readFile and fs/writeFile (see internal/exec_session.h). Unknown methods
// get -32601; calls before initialize -32600; bad params -32602, with codex's message texts.
//
// Failure behaviour mirrors codex-cli 0.171.0: registration 401/403 and most other errors print
// "Error: …" (exact codex texts) and return 1; 503 registration_conflict and
// 502 authentication_service_unavailable are retried; a dropped WebSocket reconnects after
// ~0.7 s with growing backoff, without re-registering (re-registers after repeated connect
// failures). Inside an emulated sandbox without a mount namespace, a cwd under
// /home/sandbox-agent is rewritten to $SBX_SANDBOX_HOME.
//
// Thread-safety: RunStandinExecutor blocks its caller; stop it through the stop token. It owns
// every thread and child process it starts and kills the children on return.
#pragma once

#include <chrono>
#include <ostream>
#include <stop_token>
#include <string>

namespace sbx::emulator {

struct StandinExecutorOptions {
  std::string remote;          // --remote: the session's environment.remote_url
  std::string environment_id;  // --environment-id
  std::string name;            // --name (sent with the registration; informational)
  std::string api_key;         // CODEX_API_KEY; never logged
  std::chrono::milliseconds first_reconnect_delay{700};
  std::chrono::milliseconds max_reconnect_delay{5000};
  std::chrono::milliseconds request_timeout{10000};
  // How long a session's processes outlive a dropped connection (codex: 30 s, §7.5).
  std::chrono::milliseconds resume_window{30000};
};

// Runs until `stop` is requested (→ 0) or a fatal error (→ 1, one "Error: …" line on `err`).
int RunStandinExecutor(const StandinExecutorOptions& options, std::ostream& err,
                       std::stop_token stop);

// The error text codex prints for a --remote it refuses with API-key auth (without "Error: "),
// or "" when `remote` is acceptable: https on openai.com/openai.org (or a subdomain), or
// http(s) on a loopback host.
std::string CheckRemoteHost(const std::string& remote);

}  // namespace sbx::emulator
