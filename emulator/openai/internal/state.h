// State: the OpenAI emulator's model — sessions with their turns, items and SSE subscribers,
// environments, executor registrations and the executor connections (JSON-RPC bookkeeping) —
// behind one mutex, and how that model renders as Agents API JSON and stream events.
// Module-private to emulator/openai; the router, the Agents API handlers, the turn runner, the
// executor registry and the admin API all read and write it.
//
// Thread-safety: every field marked "Guarded by mu" is read and written only with `mu` held;
// methods named *Locked expect it held, the others take it. `cv` is notified on every change a
// waiter may care about (new events, connections, responses, stop). `host`, `port` and
// `ws_port` are written once by OpenAiEmulator::Start. Owns its records and a copy of the
// Options.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emulator/openai/internal/ip_allowlist.h"
#include "emulator/openai/openai_emulator.h"
#include "emulator/openai/websocket_server.h"

namespace sbx::emulator::internal::openai {

class WebhookSender;

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// Seconds since the Unix epoch (the Agents API's timestamps).
int64_t NowUnix();

// One open SSE stream.
struct Subscriber {
  std::deque<std::string> queue;  // Guarded by State::mu.
  bool closed = false;            // Guarded by State::mu.
};

struct EnvironmentRec {
  std::string id;
  std::string session_id;
  // The last path segment of the session's own remote_url ("rt_…"): registration is accepted
  // only under that URL (reference openai-agents-api.md §1.4).
  std::string connect_token;
  std::set<WsConnectionId> connections;
  bool ever_connected = false;
  bool expired = false;
  bool deleted = false;
  SteadyClock::time_point dropped_at{};
  std::string reported = "pending";  // last status announced on the stream
  OpenAiEmulator::RegistrationCount registrations;
};

// What the emulated harness knows about one executor process it started.
struct ProcessWatch {
  std::string session_id;
  std::string turn_id;
  std::string item_id;
  int output_index = 0;
  std::vector<std::pair<int64_t, std::string>> chunks;  // (seq, bytes)
  std::optional<int> exit_code;
  bool closed = false;
};

// One executor WebSocket, seen as a JSON-RPC server (the emulator is the client).
struct RpcConnection {
  WsConnectionId id = 0;
  std::string environment_id;
  std::string profile;
  bool ready = false;  // initialize answered, initialized sent
  bool gone = false;
  int64_t next_id = 2;  // 1 is initialize
  std::map<int64_t, json> responses;
  std::map<std::string, std::shared_ptr<ProcessWatch>> processes;
};

struct PendingInput {
  std::string text;
  bool connection_failed = false;
};

// How a session's input went, for tests that assert exactly-once submission (a chaos test
// checks turns_started == tasks). Message input events only; cancels are not counted.
struct InputCounters {
  int64_t accepted_inputs = 0;  // message events accepted (create's input, POST …/events)
  int64_t deduped_inputs = 0;   // message events in POSTs answered 202 as Idempotency-Key replays
  // message events whose held POST's client went away before the hold ended: dropped, as the
  // service drops the input of a cut POST (reference §2.1, observed)
  int64_t dropped_inputs = 0;
  int64_t turns_started = 0;  // root turns created (agent.session.turn.created)
  // The most inputs a session ever had accepted and not yet finished as a turn, at once (in
  // totals: the most of any session). 1 for a session that only ever got one input at a time:
  // a pool chaos test proves from it that no replica ran two tasks at once.
  int64_t peak_open_inputs = 0;
  // In totals only: the most inputs open at once across all the sessions whose metadata names
  // one sbx.dev/worker (under session: PerTask each task has its own session on its replica, so
  // a pool chaos test proves from it that no replica ran two tasks at once).
  int64_t peak_worker_open_inputs = 0;
};

struct TurnRec {
  std::string id;
  std::string status = "queued";
  int64_t created_at = 0;
  std::optional<int64_t> started_at;
  std::optional<int64_t> completed_at;
  json error = nullptr;
  json usage = nullptr;     // {input_tokens, output_tokens, total_tokens, …} once terminal
  std::string subagent_id;  // empty for a root turn
  std::vector<json> items;
};

struct SessionRec {
  std::string id;
  int64_t seq = 0;
  int64_t created_at = 0;
  int64_t last_active_at = 0;
  std::string status = "idle";
  json required_actions = json::array();
  std::optional<std::string> error;
  json agent;
  json metadata = json::object();
  std::string environment_id;
  std::string connect_token;  // the environment's (see EnvironmentRec)
  std::string workspace_directory;
  json capability_directories = json::array();
  int64_t open_inputs = 0;  // accepted, their turn not finished (InputCounters::peak_open_inputs)
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  int64_t subscriptions_total = 0;  // SSE streams ever opened on this session
  std::vector<TurnRec> turns;
  std::deque<PendingInput> pending;
  // Idempotency-Key values of accepted POST …/events, kept for the session's lifetime (the
  // real dedupe window is undocumented, reference §7 q7).
  std::set<std::string> idempotency_keys;
  InputCounters counters;
  // Admin knob: this many more message inputs are held in the connection wait as if no
  // executor were connected; hold_release (when set) ends each hold early as if one connected.
  int hold_inputs = 0;
  std::optional<std::chrono::milliseconds> hold_release;
  bool runner_active = false;
  bool cancel_requested = false;
  // A turn has run with a connected executor: the real service's "durably bound CCA root"
  // (reference §1.6), without which DELETE answers 409 (strict_session_delete).
  bool root_bound = false;
  int waiting_for_executor = 0;  // POSTs held in the connection wait
  // The process the active turn is running (to terminate on cancel).
  WsConnectionId active_conn = 0;
  std::string active_process;
};

// An executor registration handed out by POST …/register (profile kNoiseProfile or
// kPlainJsonRpcProfile) or POST …/direct/register (kDirectTransport): where its WebSocket may
// connect.
struct Registration {
  std::string environment_id;
  std::string profile;
};

// True for the profiles whose socket carries plain exec-server JSON-RPC with the emulator as the
// JSON-RPC client (the stand-in's and codex's direct transport); false for Noise.
bool SpeaksJsonRpc(const std::string& profile);

class State {
 public:
  using RegistrationFailure = OpenAiEmulator::RegistrationFailure;
  using RegistrationCount = OpenAiEmulator::RegistrationCount;

  explicit State(OpenAiEmulator::Options options);

  std::string server_url() const;  // "http://host:port"
  std::string base_url() const;    // server_url() + "/v1"
  // A session's own remote_url: base_url() + "/agents/api/connect/" + connect_token (the shape
  // observed on the service, reference §1.4).
  std::string RemoteUrl(const std::string& connect_token) const;

  // A fresh id: `prefix` and 24 hex digits. NewId wants `mu` held; NewIdLocked takes it.
  std::string NewId(const std::string& prefix);
  std::string NewIdLocked(const std::string& prefix);

  // ---- rendering (mu held) -------------------------------------------------------------------
  json SessionJson(const SessionRec& s) const;
  std::string EnvironmentStatusLocked(const EnvironmentRec& env) const;
  json EnvironmentJson(const EnvironmentRec& env) const;
  json TurnJson(const SessionRec& s, const TurnRec& t) const;
  json Event(const std::string& type);
  json SessionEvent(const SessionRec& s, const std::string& type);
  json EnvironmentEvent(const SessionRec& s, const EnvironmentRec& env, const std::string& status);
  json TurnEvent(const SessionRec& s, const TurnRec& t, const std::string& type);
  json ItemEvent(const SessionRec& s, const std::string& turn_id, const std::string& type,
                 const json& item, json output_index);

  // ---- queries and updates (mu held) ---------------------------------------------------------
  // Queues `event` on every open stream of `s` and notifies `cv`.
  void EmitLocked(SessionRec& s, const json& event);
  SessionRec* FindSessionLocked(const std::string& id);
  // Emits agent.session.environment.<status> when the status changed since the last event.
  void AnnounceLocked(EnvironmentRec& env);
  bool ExecutorConnectedLocked(const SessionRec& s) const;
  // A ready plain-profile connection of the session's environment, or 0.
  WsConnectionId ReadyConnectionLocked(const SessionRec& s) const;
  // Every connection of the session's environment speaks the Noise profile (none can run
  // commands).
  bool NoiseOnlyLocked(const SessionRec& s) const;

  // Counts on the session and in `totals` (which outlive deleted sessions).
  // An input accepted / its turn finished: tracks InputCounters::peak_open_inputs.
  void OpenInputLocked(SessionRec& s);
  void CloseInputLocked(SessionRec& s);
  // A session being deleted: its inputs still open no longer count for its worker.
  void ForgetOpenInputsLocked(SessionRec& s);
  void CountLocked(SessionRec& s, int64_t InputCounters::*counter, int64_t n = 1);

  // ---- takes mu --------------------------------------------------------------------------------
  // Marks the session failed ("session expired") and its environment expired; false if unknown.
  bool ExpireSession(const std::string& session_id);
  // Sets `stopping`, ends every SSE stream and wakes every waiter.
  void BeginStop();

  const OpenAiEmulator::Options options;
  std::string host = "127.0.0.1";
  int port = 0;
  int ws_port = 0;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;  // Guarded by mu.
  // Inputs whose `!flaky` step has failed a turn once (turn_script.h). Guarded by mu.
  std::set<std::string> flaky_inputs_seen;
  std::mt19937_64 rng;                                             // Guarded by mu.
  RegistrationFailure registration_failure;                        // Guarded by mu.
  int64_t session_seq = 0;                                         // Guarded by mu.
  int64_t process_seq = 0;                                         // Guarded by mu.
  std::map<std::string, std::shared_ptr<SessionRec>> sessions;     // Guarded by mu.
  std::map<std::string, int64_t> session_seq_of;                   // incl. deleted. Guarded by mu.
  std::map<std::string, EnvironmentRec> environments;              // Guarded by mu.
  std::map<std::string, RegistrationCount> unknown_registrations;  // Guarded by mu.
  std::map<std::string, Registration> registrations;               // Guarded by mu.
  std::map<WsConnectionId, RpcConnection> connections;             // Guarded by mu.
  InputCounters totals;  // every session's, deleted ones too. Guarded by mu.
  // Open inputs by the sessions' metadata sbx.dev/worker (InputCounters::peak_worker_open_inputs).
  std::map<std::string, int64_t> open_inputs_by_worker;
  // Gets every emitted event (it turns session lifecycle events into signed webhooks). Set once
  // by OpenAiEmulator before Start; null = no webhooks.
  WebhookSender* webhooks = nullptr;
  IpAllowlist ip_allowlist;  // Guarded by mu.
  // The caller address of each environment's last registration (allowlist mode only).
  std::map<std::string, std::string> registration_addresses;  // Guarded by mu.
};

}  // namespace sbx::emulator::internal::openai
