// HttpAgentsApi: AgentsApi over HTTP (reference/openai-agents-api.md §1, §2, §5).
//
// Every request goes through the shared http::RetryingCaller (see http/retrying_caller.h):
// request/response calls over the plain http::HttpTransport, the SSE event stream over the
// http::StreamingTransport, parsed incrementally by SseParser. Every request (stream opens
// included) first takes a token from the workspace's EndpointPacing, then carries
// `Authorization: Bearer <application key>`, `OpenAI-Beta: agents=v1`, Accept and User-Agent.
// Retries follow this API's ErrorTable (http_errors.h: GET/DELETE on 408/429/5xx/connection
// errors; create and send-events only when the request never left or the server says
// x-should-retry: true); `retry-after-ms`/`retry-after` hints are honoured, longer than 120 s
// end the call with Status::retry_after set, and a 429/503 hint also penalises the bucket so
// every caller of the workspace slows down. Backoff sleeps are on the injected Clock and end
// early on `stop`.
//
// The application key is held in memory only: it never appears in logs, Status messages (any
// echo by the server is replaced by "***") or URLs.
//
// Thread-safe. Borrows the bucket, clock and transports; they must outlive it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/retrying_caller.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/cloud/openai/http_errors.h"

namespace sbx::controller::openai {

struct HttpAgentsApiOptions {
  // Up to and including "/v1", no trailing slash (one is stripped).
  std::string base_url = "https://api.openai.com/v1";
  std::chrono::milliseconds request_timeout{std::chrono::seconds(60)};
  // POST …/events may be held up to 5 minutes while the executor connects.
  std::chrono::milliseconds send_events_timeout{std::chrono::minutes(6)};
  // A stream silent for this long ends with kDeadlineExceeded (the caller re-subscribes).
  std::chrono::milliseconds stream_idle_timeout{std::chrono::minutes(10)};
  size_t max_event_bytes = 16u << 20;
  http::RetryPolicy retry = DefaultRetryPolicy();
  // Uniform [0, 1) for backoff jitter; null: a seeded PRNG.
  Backoff::Uniform jitter{};
};

class HttpAgentsApi final : public AgentsApi {
 public:
  // `api_key` is the resolved application key (not a reference to one).
  HttpAgentsApi(HttpAgentsApiOptions options, const std::string& api_key, EndpointPacing& pacing,
                Clock& clock, http::HttpTransport& transport, http::StreamingTransport& streaming);

  StatusOr<Session> CreateSession(const CreateSessionRequest& request,
                                  std::stop_token stop = {}) override;
  StatusOr<Session> GetSession(const std::string& session_id, std::stop_token stop = {}) override;
  StatusOr<SessionPage> ListSessions(const ListSessionsParams& params,
                                     std::stop_token stop = {}) override;
  StatusOr<Session> UpdateSessionAgent(const std::string& session_id, const std::string& model,
                                       const std::string& instructions,
                                       std::stop_token stop = {}) override;
  Status DeleteSession(const std::string& session_id, std::stop_token stop = {}) override;
  Status SendEvents(const std::string& session_id, const std::vector<InputEvent>& events,
                    const std::string& idempotency_key = "", std::stop_token stop = {}) override;
  StatusOr<TurnPage> ListTurns(const std::string& session_id, const ListParams& params,
                               std::stop_token stop = {}) override;
  StatusOr<Turn> GetTurn(const std::string& session_id, const std::string& turn_id,
                         std::stop_token stop = {}) override;
  StatusOr<ItemPage> ListTurnItems(const std::string& session_id, const std::string& turn_id,
                                   const ListParams& params, std::stop_token stop = {}) override;
  StatusOr<ItemPage> ListItems(const std::string& session_id, const ListParams& params,
                               std::stop_token stop = {}) override;
  StatusOr<Environment> GetEnvironment(const std::string& environment_id, std::stop_token stop = {},
                                       bool routine = false) override;
  Status StreamEvents(const std::string& session_id, const StreamCallbacks& callbacks,
                      std::stop_token stop = {}) override;
  using AgentsApi::StreamEvents;

 private:
  struct Call {
    std::string method{};
    std::string path{};   // escaped, relative to base_url, e.g. "/agents/sessions/sess_1"
    std::string query{};  // "" or "?…"
    std::optional<std::string> body{};
    http::Idempotency idempotency = http::Idempotency::kIdempotent;
    std::chrono::milliseconds timeout{0};  // 0: options_.request_timeout
    std::string idempotency_key{};
    bool routine = false;  // http::Call::routine
  };
  http::Call BuildCall(const Call& call) const;
  // Sends through the caller; returns the 2xx body or the mapped error.
  StatusOr<std::string> Send(const Call& call, std::stop_token stop);

  const HttpAgentsApiOptions options_;
  const ErrorTable errors_;
  http::StaticCredentials credentials_;
  http::RetryingCaller caller_;
};

}  // namespace sbx::controller::openai
