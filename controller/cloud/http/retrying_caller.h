// RetryingCaller: THE request loop of the cloud clients — pace → authorize → send → classify →
// delay — shared by HttpSandboxApi and HttpAgentsApi, which keep only their wire formats and
// ErrorTables.
//
// Send(call):
//   1. While the CredentialBreaker is open (a 401 recently), fail at once without a request:
//      the breaker's Status, prefixed "<what>: not sent, <credentials_noun> rejected recently".
//   2. Each attempt takes a token of the call's endpoint class from the workspace's
//      EndpointPacing, then the Authorization header from the Credentials (a failure there is a
//      failure that was never sent), sends through the HttpTransport and classifies the reply:
//      2xx is returned; a non-2xx becomes the ErrorTable's failure, annotated with `what`. The
//      pacing adapts (AIMD, endpoint_pacing.h): only a 429 is congestion — Throttled cuts the
//      class's rate and holds its callers for the hint (at most max_retry_after); any reply
//      below 500 is Succeeded, which raises the rate while calls wait for tokens; a 5xx, with
//      or without Retry-After, tells the pacing nothing (a random server error is not
//      congestion: issue #25). A 401 invalidates the Credentials' cached token and trips the
//      breaker, any other reply closes it.
//   3. NextRetryDelay (retry_policy.h) decides. A wait longer than the thread's
//      InlineWaitLimit() (inline_wait.h: a reconcile worker's) is not slept: the failure is
//      returned with retry_after set to the wait, so the reconcile gives its thread back and
//      the Manager requeues it for then. Other sleeps are on the injected Clock and end early on
//      `stop` (→ kCancelled, which also cancels the in-flight request).
//   A `routine` call (a look that is due only by its cadence, such as the probe of an executor
//   the connection already vouches for) never waits and is never retried: it is sent only if
//   the class and the workspace have a token now and no needed call of the API waits out a 429
//   (EndpointPacing::Starving; else kResourceExhausted "not sent"), once.
//   Under throttling the class's few tokens go to the calls that bring objects up; a routine
//   look that cannot be made now is made on a later pass (issue #25: 100 connected workers
//   probing every 10 s wanted 10 exec-syncs/s of a command class that random 429s held at 3/s,
//   and the last workers' launches waited behind them for minutes).
// Stream(call, handlers) does the same through the StreamingTransport until the stream opens
// (a 2xx head); nothing is retried after that, since events may have been delivered, and the
// stream's own end is returned. As before this layer existed, streams neither consult nor feed
// the breaker.
// Every Status leaving the caller has the Authorization value and its bare credential scrubbed
// (redact.h).
//
// Thread-safe. Borrows the error table, credentials, pacing, clock and transports; they must
// outlive it. Owns the breaker (one per API client: a rebuilt client starts with a closed one).
#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "api/status.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/base/credential_breaker.h"
#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/retry_policy.h"

namespace sbx::controller::http {

// Where the Authorization header of each attempt comes from.
class Credentials {
 public:
  virtual ~Credentials() = default;
  // The header value, e.g. "Bearer dapi…". A failure means nothing was sent (safe to retry when
  // the error table says so: kUnavailable for an unreachable token endpoint).
  virtual api::StatusOr<std::string> Authorization(std::stop_token stop) = 0;
  // Drops a cached token (after a 401), so the next call fetches a fresh one.
  virtual void Invalidate() {}
};

// A fixed header value (an API key, a personal access token).
class StaticCredentials final : public Credentials {
 public:
  explicit StaticCredentials(std::string authorization)
      : authorization_(std::move(authorization)) {}
  api::StatusOr<std::string> Authorization(std::stop_token) override { return authorization_; }

 private:
  const std::string authorization_;
};

struct RetryingCallerOptions {
  std::string log_name;          // prefix of the debug lines about retries, e.g. "openai"
  std::string credentials_noun;  // "the workspace's credentials were" — for the breaker's message
  RetryPolicy retry{};
  // Uniform [0, 1) for backoff jitter; null: a seeded PRNG.
  Backoff::Uniform jitter{};
};

// One call: the request without Authorization, how safe it is to repeat, and how messages
// name it ("GET /api/2.0/sandboxes/x": never the query, which may hold ids or tokens).
struct Call {
  HttpRequest request;
  Idempotency idempotency = Idempotency::kIdempotent;
  std::string what;
  EndpointClass endpoint_class = EndpointClass::kRead;  // whose pacing it waits for
  bool routine = false;  // a spare token now or not at all; one attempt (see above)
};

class RetryingCaller {
 public:
  // `streaming` may be null when the API has no streams.
  RetryingCaller(RetryingCallerOptions options, const ErrorTable& errors, Credentials& credentials,
                 EndpointPacing& pacing, Clock& clock, HttpTransport& transport,
                 StreamingTransport* streaming = nullptr);

  // The 2xx response, or the final error (see above).
  api::StatusOr<HttpResponse> Send(const Call& call, std::stop_token stop);
  struct StreamEnd {
    bool opened = false;  // a 2xx head arrived: handlers ran, nothing was retried after it
    // The stream's end once it opened (OK, or how it broke), else the final error of the
    // attempts to open it.
    api::Status status;
  };
  StreamEnd Stream(const Call& call, const StreamHandlers& handlers, std::stop_token stop);

 private:
  // The attempts of `call`, each sent by `exchange(request, stop)`, until a 2xx response (which
  // is returned) or the final error; `guard`: consult and feed the breaker.
  template <typename Exchange>
  api::StatusOr<HttpResponse> Loop(const Call& call, bool guard, Exchange exchange,
                                   std::stop_token stop);
  // The failure of a non-2xx reply, with the pacing, credentials and breaker told about it.
  AttemptFailure Classify(const Call& call, const HttpResponse& response, bool guard,
                          const std::string& authorization, const EndpointPacing::Permit& permit);

  const RetryingCallerOptions options_;
  const ErrorTable& errors_;
  Credentials& credentials_;
  EndpointPacing& pacing_;
  Clock& clock_;
  HttpTransport& transport_;
  StreamingTransport* const streaming_;
  CredentialBreaker breaker_{clock_};  // a 401 stops every call for a cool-down
  const Backoff backoff_;
};

}  // namespace sbx::controller::http
