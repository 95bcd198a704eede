// HttpAgentsApi: AgentsApi over HTTP (reference/openai-agents-api.md §1, §2, §5).
//
// Request/response calls go through the shared single-shot databricks::HttpTransport; the SSE
// event stream through a StreamingTransport, parsed incrementally by SseParser. Every request
// (stream opens included) first takes a token from the workspace's TokenBucket, then carries
// `Authorization: Bearer <application key>`, `OpenAI-Beta: agents=v1`, Accept and User-Agent.
// Retries follow openai/retry_policy.h (GET/DELETE on 408/429/5xx/connection errors; create and
// send-events only when the request never left or the server says x-should-retry: true);
// `retry-after-ms`/`retry-after` hints are honoured, longer than 120 s end the call with
// Status::retry_after set, and a 429/503 hint also penalises the bucket so every caller of the
// workspace slows down. Backoff sleeps are on the injected Clock and end early on `stop`.
//
// The application key is held in memory only: it never appears in logs, Status messages (any
// echo by the server is replaced by "***") or URLs.
//
// Thread-safe. Borrows the bucket, clock and transports; they must outlive it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "controller/cloud/databricks/http_transport.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/cloud/openai/retry_policy.h"
#include "controller/cloud/openai/streaming_transport.h"
#include "controller/engine/backoff.h"
#include "controller/engine/clock.h"
#include "controller/engine/credential_breaker.h"
#include "controller/engine/token_bucket.h"

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
  RetryPolicy retry{};
  // Uniform [0, 1) for backoff jitter; null: a seeded PRNG.
  Backoff::Uniform jitter{};
};

class HttpAgentsApi final : public AgentsApi {
 public:
  // `api_key` is the resolved application key (not a reference to one).
  HttpAgentsApi(HttpAgentsApiOptions options, std::string api_key, TokenBucket& bucket,
                Clock& clock, databricks::HttpTransport& transport, StreamingTransport& streaming);

  StatusOr<Session> CreateSession(const CreateSessionRequest& request,
                                  std::stop_token stop = {}) override;
  StatusOr<Session> GetSession(const std::string& session_id, std::stop_token stop = {}) override;
  StatusOr<SessionPage> ListSessions(const ListSessionsParams& params,
                                     std::stop_token stop = {}) override;
  StatusOr<std::vector<Session>> ListAllSessions(ListSessionsParams params,
                                                 std::stop_token stop = {}) override;
  StatusOr<Session> UpdateSessionAgent(const std::string& session_id, const std::string& model,
                                       const std::string& instructions,
                                       std::stop_token stop = {}) override;
  Status DeleteSession(const std::string& session_id, std::stop_token stop = {}) override;
  Status SendEvents(const std::string& session_id, const std::vector<InputEvent>& events,
                    const std::string& idempotency_key = "", std::stop_token stop = {}) override;
  StatusOr<Environment> GetEnvironment(const std::string& environment_id,
                                       std::stop_token stop = {}) override;
  Status StreamEvents(const std::string& session_id, const StreamCallbacks& callbacks,
                      std::stop_token stop = {}) override;
  using AgentsApi::StreamEvents;

 private:
  struct Call {
    std::string method{};
    std::string path{};   // escaped, relative to base_url, e.g. "/agents/sessions/sess_1"
    std::string query{};  // "" or "?…"
    std::optional<std::string> body{};
    Idempotency idempotency = Idempotency::kIdempotent;
    std::chrono::milliseconds timeout{0};  // 0: options_.request_timeout
    std::string idempotency_key{};
  };
  databricks::HttpRequest BuildRequest(const Call& call) const;
  // The failure for a non-2xx response: mapped Status with hint, bucket penalty, redaction.
  AttemptFailure FailureFromResponse(const std::string& what,
                                     const databricks::HttpResponse& response);
  AttemptFailure FailureFromTransport(const databricks::HttpResult& result) const;
  // Sends with pacing, auth and retries; returns the 2xx body or the mapped error.
  StatusOr<std::string> Send(const Call& call, std::stop_token stop);
  // Sleeps before the next attempt, or returns the Status that ends the call.
  std::optional<Status> WaitToRetry(const std::string& what, Idempotency idempotency,
                                    const AttemptFailure& failure, int attempt,
                                    Clock::SteadyTime start, std::stop_token stop);
  Status Redact(const Status& status) const;

  const HttpAgentsApiOptions options_;
  const std::string api_key_;
  TokenBucket& bucket_;
  Clock& clock_;
  CredentialBreaker breaker_{clock_};  // a 401 stops every call for a cool-down
  databricks::HttpTransport& transport_;
  StreamingTransport& streaming_;
  const Backoff backoff_;
};

}  // namespace sbx::controller::openai
