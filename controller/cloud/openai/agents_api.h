// AgentsApi: the OpenAI Agents API (beta) session surface as the controller sees it
// (reference/openai-agents-api.md §1, §2, §5). HttpAgentsApi implements it over HTTP; the
// OpenAI half of the emulator serves the same wire format.
//
// Value types are plain structs with no third-party types. Decoding is forward-compatible:
// unknown fields are ignored and unknown enum values become k*Unknown with the raw string kept
// in a `*_raw` field, so a newer server never breaks an older controller.
//
// Errors (every method): canonical Status codes mapped from the HTTP status and the body
// {"error":{"message","type","param","code"}}:
//   400 → kInvalidArgument, 401 → kUnauthenticated, 403 → kPermissionDenied, 404 → kNotFound,
//   408 → kDeadlineExceeded, 409 → kAborted (kAlreadyExists when the code says so),
//   422 → kInvalidArgument, 429 → kResourceExhausted, 500 → kInternal,
//   502/503/504 → kUnavailable, other 4xx → kInvalidArgument, other 5xx → kInternal;
//   connection failures → kUnavailable, timeouts → kDeadlineExceeded, a body we cannot read →
//   kInternal, `stop` requested → kCancelled (the in-flight request is aborted).
// Messages keep the server's message, type/code and `x-request-id` ("HTTP 404 not_found_error:
// Session not found (request_id req_1)") and never contain the application key. A server retry
// hint (retry-after-ms / retry-after) is kept as Status::retry_after().
//
// Retries happen inside the implementation (see ErrorTable in openai/http_errors.h): GET and DELETE
// are retried on 408/429/5xx/connection errors; CreateSession and SendEvents are NOT idempotent on
// the real service (Idempotency-Key is observed to be ignored on create), so they are retried
// only when the request certainly never reached the server, or when the server says
// `x-should-retry: true`. The caller (a reconciler with an intent row) decides what to do next.
//
// Thread-safety: implementations are thread-safe; every method may be called concurrently.
// StreamEvents blocks its calling thread and invokes the callbacks on that thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"

namespace sbx::controller::openai {

using api::Status;
using api::StatusOr;

// --- Enums (unknown values tolerated) ----------------------------------------------------------

// AgentSession.status.
enum class SessionStatus { kUnknown, kIdle, kInProgress, kRequiresAction, kFailed };
// Environment type (`none`, `openai_hosted`, `self_hosted`).
enum class EnvironmentType { kUnknown, kNone, kOpenAiHosted, kSelfHosted };
// EnvironmentInfo.status: executor connectivity of an environment.
enum class EnvironmentStatus {
  kUnknown,
  kPending,
  kReady,
  kConnected,
  kDisconnected,
  kSuspended,
  kExpired,
  kFailed,
};
// Turn.status.
enum class TurnStatus { kUnknown, kQueued, kInProgress, kWaiting, kCompleted, kFailed, kCancelled };
// The turn is over: completed, failed or cancelled.
constexpr bool IsTerminal(TurnStatus s) {
  return s == TurnStatus::kCompleted || s == TurnStatus::kFailed || s == TurnStatus::kCancelled;
}
// Item.type: the two kinds a task log shows; every other type (function_call, reasoning,
// mcp_call, web_search_call, agent_message, subagent calls, future types) is kOther, never an
// error (reference §2.3: item types are forward-compatible). Read `type_raw` for those.
enum class ItemType { kOther, kMessage, kCommandExecution };
// Item.status (command_execution: in_progress|completed|failed|incomplete; message:
// in_progress|completed|incomplete).
enum class ItemStatus { kUnknown, kInProgress, kCompleted, kFailed, kIncomplete };

// Wire names ("idle", "in_progress", …); "unknown" for k*Unknown.
std::string_view SessionStatusName(SessionStatus s);
std::string_view EnvironmentTypeName(EnvironmentType t);
std::string_view EnvironmentStatusName(EnvironmentStatus s);
std::string_view TurnStatusName(TurnStatus s);
std::string_view ItemTypeName(ItemType t);  // "other" for kOther
std::string_view ItemStatusName(ItemStatus s);
// Wire name → enum; anything unrecognised (including "") → k*Unknown.
SessionStatus ParseSessionStatus(std::string_view raw);
EnvironmentType ParseEnvironmentType(std::string_view raw);
EnvironmentStatus ParseEnvironmentStatus(std::string_view raw);
TurnStatus ParseTurnStatus(std::string_view raw);
ItemType ParseItemType(std::string_view raw);  // anything else → kOther
ItemStatus ParseItemStatus(std::string_view raw);

// --- Sessions ----------------------------------------------------------------------------------

// AgentSession.environment. For self_hosted: `id` goes to `codex exec-server --environment-id`
// and `remote_url` (opaque, pass unchanged) to `--remote`.
struct SessionEnvironment {
  EnvironmentType type = EnvironmentType::kUnknown;
  std::string type_raw{};
  std::string id{};  // "ccarenv_…"
  std::string remote_url{};
  std::string workspace_directory{};
  std::vector<std::string> capability_directories{};
  // The real API has no status here (poll GetEnvironment); kept for a future server or emulator.
  std::optional<EnvironmentStatus> status{};
  std::string status_raw{};
};

// One entry of AgentSession.required_actions. Unknown types keep `type_raw` only.
struct RequiredAction {
  std::string type_raw{};        // "environment_connection", "function_call", …
  std::string environment_id{};  // environment_connection
  std::string turn_id{};         // function_call
  std::string call_id{};         // function_call
  std::string name{};            // function_call
  std::string arguments{};       // function_call (JSON text)
};

// AgentSession.agent (the fields the controller uses).
struct AgentConfig {
  std::string id{};
  std::string model{};
  std::optional<std::string> instructions{};
  std::optional<std::string> name{};
};

struct Session {
  std::string id{};  // "sess_…"
  SessionStatus status = SessionStatus::kUnknown;
  std::string status_raw{};
  std::vector<RequiredAction> required_actions{};
  SessionEnvironment environment{};
  AgentConfig agent{};
  int64_t created_at = 0;  // Unix seconds
  int64_t last_active_at = 0;
  std::optional<std::string> error{};  // why the session failed
  std::map<std::string, std::string> metadata{};
};

// POST /agents/sessions with a self_hosted environment and an inline agent, no initial input.
struct CreateSessionRequest {
  std::string model{};                                // required
  std::optional<std::string> instructions{};          // omitted when unset
  std::string workspace_directory{};                  // required, absolute path inside the sandbox
  std::vector<std::string> capability_directories{};  // omitted when empty
  std::map<std::string, std::string> metadata{};      // ≤ 16 pairs (server-enforced)
};

enum class ListOrder { kServerDefault, kAsc, kDesc };

// The most items one page of a list endpoint holds (`limit` 1–100, reference §1.2).
inline constexpr int kMaxPageLimit = 100;

// Cursor parameters of GET /agents/sessions. Zero/empty values are not sent.
struct ListSessionsParams {
  int limit = 0;           // server default 20
  std::string after{};     // exclusive cursor: an item id (the previous page's last_id)
  std::string agent_id{};  // filter
  ListOrder order = ListOrder::kServerDefault;
};

// Cursor parameters of the turn and item lists (GET …/turns, …/turns/{id}/items, …/items).
// Zero/empty values are not sent. `limit` must be 0 (server default 20) or 1–100: anything else
// is kInvalidArgument before any request.
struct ListParams {
  int limit = 0;
  std::string after{};                          // exclusive cursor: the previous page's last_id
  ListOrder order = ListOrder::kServerDefault;  // the server's default is desc (newest first)
};

struct SessionPage {
  std::vector<Session> sessions{};
  bool has_more = false;
  std::string first_id{};  // "" on an empty page
  std::string last_id{};
};

// GET /agents/environments/{id} (EnvironmentInfo).
struct Environment {
  std::string id{};
  EnvironmentType type = EnvironmentType::kUnknown;
  std::string type_raw{};
  EnvironmentStatus status = EnvironmentStatus::kUnknown;
  std::string status_raw{};
};

// --- Input events (POST /agents/sessions/{id}/events) -------------------------------------------

struct InputEvent {
  enum class Kind { kMessage, kCancel };
  Kind kind = Kind::kMessage;
  std::string text{};  // kMessage: one user message with one input_text part

  static InputEvent UserMessage(std::string text) { return {Kind::kMessage, std::move(text)}; }
  static InputEvent Cancel() { return {Kind::kCancel, {}}; }
};

// --- Stream events (GET /agents/sessions/{id}/events, SSE) --------------------------------------

// The classification of a stream event's `type`; kOther for anything else (subagent, reasoning,
// content parts, future types): read `type` and `raw_json` for those.
enum class EventKind {
  kOther,
  kSessionCreated,         // agent.session.created                 → session
  kSessionInProgress,      // agent.session.in_progress             → session
  kSessionIdle,            // agent.session.idle (NOT success)      → session
  kSessionRequiresAction,  // agent.session.requires_action         → session
  kSessionFailed,          // agent.session.failed                  → session
  kEnvironmentStatus,      // agent.session.environment.<status>    → environment, error?
  kTurnCreated,            // agent.session.turn.created            → turn
  kTurnInProgress,         // agent.session.turn.in_progress        → turn
  kTurnCompleted,          // agent.session.turn.completed          → turn, usage
  kTurnFailed,             // agent.session.turn.failed             → turn (error), usage
  kTurnCancelled,          // agent.session.turn.cancelled          → turn, usage
  kItemAdded,              // agent.session.turn.item.added         → item (+ item_id, item_type)
  kItemDone,               // agent.session.turn.item.done          → item (full output)
  kOutputTextDelta,        // agent.session.turn.output_text.delta  → item_id, text (the delta)
  kOutputTextDone,         // agent.session.turn.output_text.done   → item_id, text (full)
  kCommandOutputDelta,     // agent.output.command_execution_output.delta → item_id, text
  kError,                  // error                                 → error
};

struct ApiError {
  std::string type{};
  std::string code{};
  std::string message{};
  std::string param{};
};

// TokenUsage (reference §1.4) of a turn or a terminal turn event. The three totals are fields;
// every other integer the server sends, nested ones included, is kept in `details` under its
// dotted path ("input_tokens_details.cached_tokens", "output_tokens_details.reasoning_tokens"),
// so a new counter reaches describe without a client change. Non-integers are ignored.
struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t total_tokens = 0;
  std::map<std::string, int64_t> details{};
};

// Turn (reference §2.3). GET …/turns lists root turns only; subagent turns are seen in events.
struct Turn {
  std::string id{};  // "turn_…"
  std::string session_id{};
  std::optional<std::string> agent_id{};
  std::optional<std::string> subagent_id{};  // nullopt (absent or null) for a ROOT turn: the one
                                             // whose terminal event is a task's outcome
  TurnStatus status = TurnStatus::kUnknown;
  std::string status_raw{};
  int64_t created_at = 0;  // Unix seconds
  std::optional<int64_t> started_at{};
  std::optional<int64_t> completed_at{};
  std::optional<ApiError> error{};  // code + message (e.g. code "connection_failed")
  std::optional<Usage> usage{};     // observed null on the real service (reference §2.4)

  bool is_root() const { return !subagent_id.has_value(); }
};

// One saved item of a turn (reference §2.3 "Item types"), as GET …/items and the item.added /
// item.done events carry it. Fields not of the item's type stay empty.
struct Item {
  std::string id{};  // "msg_…", "cmd_…"; opaque
  ItemType type = ItemType::kOther;
  std::string type_raw{};
  std::optional<std::string> turn_id{};
  ItemStatus status = ItemStatus::kUnknown;
  std::string status_raw{};
  // kMessage: `role` (user|assistant) and `text`, the concatenation of its output_text and
  // input_text content parts in order (other parts, e.g. images or refusals, are skipped);
  // `phase` commentary|final_answer, nullopt when null/absent.
  std::string role{};
  std::string text{};
  std::optional<std::string> phase{};
  // kCommandExecution.
  std::string command{};
  std::optional<std::string> cwd{};
  std::optional<int64_t> exit_code{};  // nullopt while running, or when killed
  std::optional<int64_t> duration_ms{};
  std::string output{};  // "" when null/absent
};

// One page of a list endpoint ({object:"list", data, has_more, first_id, last_id}).
// first_id/last_id are "" when the server sends null (an empty page).
template <typename T>
struct ListPage {
  std::vector<T> data{};
  bool has_more = false;
  std::string first_id{};
  std::string last_id{};
};
using TurnPage = ListPage<Turn>;
using ItemPage = ListPage<Item>;

struct SessionEvent {
  std::string event_id{};  // random, not orderable; dedupe by it
  std::string type{};      // as sent, e.g. "agent.session.turn.completed"
  EventKind kind = EventKind::kOther;
  std::string session_id{};                  // from the event, or from `session.id`
  std::optional<std::string> turn_id{};      // turn, item and environment events
  std::optional<Session> session{};          // session-level events
  std::optional<Environment> environment{};  // kEnvironmentStatus (status also from the type)
  std::optional<Turn> turn{};                // turn events
  std::optional<ApiError> error{};           // kError, or a failed environment's error
  // Turn events: the event's `usage` (terminal events), else the turn's; nullopt when both are
  // null (observed on the real service: read the turn afterwards, reference §2.4).
  std::optional<Usage> usage{};
  std::optional<Item> item{};  // kItemAdded / kItemDone: the decoded item
  // item events: item.id; output_text and command output events: `item_id`.
  std::string item_id{};
  std::string item_type{};  // item events: "message", "command_execution", … (= item->type_raw)
  std::string text{};       // delta or full text, see EventKind
  std::optional<int64_t> output_index{};   // null for input items
  std::optional<int64_t> content_index{};  // output_text events
  std::string raw_json{};  // the whole `data:` payload, for anything not modelled above
};

// Callbacks of StreamEvents, all invoked on the calling thread.
struct StreamCallbacks {
  // Called once when the server has accepted the subscription (HTTP 2xx headers received),
  // before any event: the moment it is safe to send input without missing early events.
  std::function<void()> on_open;
  // Called for each event as soon as it has arrived. Return false to end the stream (→ OK).
  std::function<bool(const SessionEvent&)> on_event;
};

// --- The interface -------------------------------------------------------------------------------

class AgentsApi {
 public:
  virtual ~AgentsApi() = default;

  // POST /agents/sessions (self_hosted). Not retried once the request may have been sent: a
  // kUnavailable/kDeadlineExceeded here may still have created a session (find it by metadata
  // via ListAllSessions). kInvalidArgument for an empty model or workspace_directory, before
  // any request.
  virtual StatusOr<Session> CreateSession(const CreateSessionRequest& request,
                                          std::stop_token stop = {}) = 0;

  // GET /agents/sessions/{id}. kNotFound when the session does not exist (or was deleted).
  virtual StatusOr<Session> GetSession(const std::string& session_id,
                                       std::stop_token stop = {}) = 0;

  // GET /agents/sessions with cursor params: one page.
  virtual StatusOr<SessionPage> ListSessions(const ListSessionsParams& params,
                                             std::stop_token stop = {}) = 0;

  // Every page, following `after = last_id` while has_more. `params.after` is the starting
  // cursor. kInternal if the server's cursor does not advance (a loop). The default follows
  // ListSessions (a fake may override it).
  virtual StatusOr<std::vector<Session>> ListAllSessions(ListSessionsParams params,
                                                         std::stop_token stop = {});

  // POST /agents/sessions/{id} with {"agent": {model, instructions}}: the model settings of later
  // turns (reference §1.6; omitted fields stay unchanged, so an empty `instructions` is sent as
  // ""). kNotFound when the session does not exist.
  virtual StatusOr<Session> UpdateSessionAgent(const std::string& session_id,
                                               const std::string& model,
                                               const std::string& instructions,
                                               std::stop_token stop = {}) = 0;

  // DELETE /agents/sessions/{id}. kNotFound if already gone (callers treat that as done);
  // kAborted (409) if the server refuses, e.g. a turn is still running: cancel it first. Does not
  // stop the executor or the sandbox.
  virtual Status DeleteSession(const std::string& session_id, std::stop_token stop = {}) = 0;

  // POST /agents/sessions/{id}/events: 202 (any 2xx) with an empty body means accepted, not
  // done. If the executor is not connected the server may hold this request for up to 5 minutes
  // (the HTTP timeout allows for it). Never resubmitted after it may have been sent.
  // `idempotency_key`, when non-empty, is sent as the Idempotency-Key header (AgentTask passes
  // its uid): the service dedupes a repeated key, so a retry after a crash starts no second
  // turn. The dedupe window is not documented (reference §7 q7): the key is what makes a retry
  // safe, never a reason to retry here. kInvalidArgument for an empty `events` or an empty
  // message text.
  virtual Status SendEvents(const std::string& session_id, const std::vector<InputEvent>& events,
                            const std::string& idempotency_key = "", std::stop_token stop = {}) = 0;

  // GET /agents/sessions/{id}/turns: one page of the session's ROOT turns. kNotFound when the
  // session does not exist; kInvalidArgument for a limit outside 0 (default) or 1–100.
  virtual StatusOr<TurnPage> ListTurns(const std::string& session_id, const ListParams& params,
                                       std::stop_token stop = {}) = 0;

  // GET /agents/sessions/{id}/turns/{turn_id}. kNotFound when the session does not exist or the
  // turn is not one of its turns.
  virtual StatusOr<Turn> GetTurn(const std::string& session_id, const std::string& turn_id,
                                 std::stop_token stop = {}) = 0;

  // GET /agents/sessions/{id}/turns/{turn_id}/items: one page of the turn's saved items (the
  // user input first in asc order). kNotFound as for GetTurn.
  virtual StatusOr<ItemPage> ListTurnItems(const std::string& session_id,
                                           const std::string& turn_id, const ListParams& params,
                                           std::stop_token stop = {}) = 0;

  // GET /agents/sessions/{id}/items: one page of the session's saved root items, all turns
  // (the server has no turn filter; use ListTurnItems for one turn). kNotFound as ListTurns.
  virtual StatusOr<ItemPage> ListItems(const std::string& session_id, const ListParams& params,
                                       std::stop_token stop = {}) = 0;

  // Every item of one turn, following the cursor from `params.after` (default order asc: the
  // order a log is rebuilt in, reference §2.6). kInternal if the cursor does not advance.
  StatusOr<std::vector<Item>> ListAllTurnItems(const std::string& session_id,
                                               const std::string& turn_id,
                                               ListParams params = {.order = ListOrder::kAsc},
                                               std::stop_token stop = {});

  // GET /agents/environments/{id}: the pollable executor connection status. `routine`: a look
  // due only by its cadence (http::Call::routine: sent only if the pacing has a spare token now
  // and no needed call waits out a 429, else kResourceExhausted "not sent"; one attempt).
  virtual StatusOr<Environment> GetEnvironment(const std::string& environment_id,
                                               std::stop_token stop = {}, bool routine = false) = 0;

  // GET /agents/sessions/{id}/events (SSE). Blocks, delivering events incrementally as they
  // arrive, until: the server closes the stream or sends `[DONE]` (→ OK), on_event returns
  // false (→ OK), `stop` is requested (→ kCancelled, connection closed), the connection breaks
  // mid-stream (→ kUnavailable) or stays silent longer than the idle timeout
  // (→ kDeadlineExceeded). There is no resume: events missed between two calls are lost, so
  // re-read the session after reconnecting. Opening the stream is retried like a GET; nothing
  // is retried once on_open has run. `data:` payloads that are not JSON objects are skipped.
  virtual Status StreamEvents(const std::string& session_id, const StreamCallbacks& callbacks,
                              std::stop_token stop = {}) = 0;

  // Convenience: StreamEvents without an on_open callback. Implementations add
  // `using AgentsApi::StreamEvents;` so that overriding the virtual does not hide it.
  Status StreamEvents(const std::string& session_id,
                      std::function<bool(const SessionEvent&)> on_event,
                      std::stop_token stop = {}) {
    return StreamEvents(session_id, StreamCallbacks{nullptr, std::move(on_event)}, stop);
  }
};

// True for the terminal event of a ROOT turn (completed/failed/cancelled, no subagent): the
// outcome of a turn. agent.session.idle is not one.
bool IsRootTurnTerminal(const SessionEvent& event);

}  // namespace sbx::controller::openai
