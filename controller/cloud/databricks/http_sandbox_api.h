// HttpSandboxApi: SandboxApi over HTTP (reference/databricks-sandbox-api.md §2, §3, §8).
//
// Every request goes through the shared http::RetryingCaller (pacing by the workspace's
// EndpointPacing (by endpoint class), the Authorization header from the CredentialsProvider, the
// CredentialBreaker, retries and redaction; see http/retrying_caller.h) with this API's ErrorTable
// (http_errors.h): idempotent calls retry 429/503/connection failures with jittered backoff or
// Retry-After, and a Retry-After also penalises the bucket so every caller of the workspace
// slows down; the final error keeps retry_after. Create counts as idempotent because sandbox ids
// are deterministic: if a retried create finds its own sandbox, the answer is kAlreadyExists and
// the caller adopts it with Get. ExecSync is retried only if the request never left
// (connect-phase failure), and its HTTP timeout is execution_timeout + margin. Backoff sleeps are
// on the injected Clock and end early on `stop` (→ kCancelled), which also cancels the in-flight
// request.
//
// Thread-safe. Borrows the credentials, bucket, clock and transport; they must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "controller/base/clock.h"
#include "controller/base/endpoint_pacing.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/databricks/http_errors.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/retrying_caller.h"

namespace sbx::controller::databricks {

struct HttpSandboxApiOptions {
  std::string host;          // normalised, e.g. "https://dbc-1.cloud.databricks.com"
  std::string workspace_id;  // sent as X-Databricks-Workspace-Id only when set
  std::chrono::milliseconds request_timeout{60'000};
  std::chrono::milliseconds exec_timeout_margin{30'000};
  http::RetryPolicy retry = DefaultRetryPolicy();
  // Uniform [0, 1) for backoff jitter; default: a seeded PRNG.
  std::function<double()> jitter;
};

class HttpSandboxApi final : public SandboxApi {
 public:
  HttpSandboxApi(HttpSandboxApiOptions options, CredentialsProvider& credentials,
                 EndpointPacing& pacing, Clock& clock, http::HttpTransport& transport);

  StatusOr<Sandbox> Create(const std::string& sandbox_id, const Sandbox& desired,
                           std::stop_token stop = {}) override;
  StatusOr<Sandbox> Get(const std::string& sandbox_id, std::stop_token stop = {}) override;
  StatusOr<SandboxPage> List(int page_size, const std::string& page_token,
                             std::stop_token stop = {}) override;
  StatusOr<std::vector<Sandbox>> ListAll(int page_size, std::stop_token stop = {}) override;
  StatusOr<Sandbox> Update(const std::string& sandbox_id, const Sandbox& desired,
                           const std::vector<std::string>& mask,
                           std::stop_token stop = {}) override;
  Status Delete(const std::string& sandbox_id, std::stop_token stop = {}) override;
  StatusOr<Sandbox> Start(const std::string& sandbox_id, std::stop_token stop = {}) override;
  StatusOr<Sandbox> Stop(const std::string& sandbox_id, std::stop_token stop = {}) override;
  StatusOr<ExecResult> ExecSync(const std::string& sandbox_id, const ExecRequest& request,
                                std::stop_token stop = {}) override;
  StatusOr<std::vector<Command>> ListCommands(const std::string& sandbox_id,
                                              std::stop_token stop = {}) override;
  std::chrono::milliseconds PacingBacklog() const override { return pacing_.Backlog(); }

 private:
  struct Call {
    std::string method{};
    std::string path_and_query{};  // escaped, starts with "/api/2.0/"
    std::optional<std::string> body{};
    http::Idempotency idempotency = http::Idempotency::kIdempotent;
    std::chrono::milliseconds timeout{0};  // 0: options_.request_timeout
    bool routine = false;                  // http::Call::routine
  };
  // Sends through the caller; returns the 2xx body or the mapped error.
  StatusOr<std::string> Send(const Call& call, std::stop_token stop);

  const HttpSandboxApiOptions options_;
  const ErrorTable errors_;
  const EndpointPacing& pacing_;
  http::RetryingCaller caller_;
};

}  // namespace sbx::controller::databricks
