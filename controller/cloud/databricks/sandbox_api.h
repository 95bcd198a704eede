// SandboxApi: the Databricks Sandbox REST API (reference/databricks-sandbox-api.md §3), as the
// controller sees it. HttpSandboxApi implements it over cpprestsdk; tests use the emulator.
//
// Errors are canonical Status codes mapped from the body's `error_code` and the HTTP status
// (§8.2): 400 → kInvalidArgument, 401 → kUnauthenticated, 403 → kPermissionDenied,
// 404 → kNotFound, 409 → kAlreadyExists (ALREADY_EXISTS/RESOURCE_ALREADY_EXISTS) or kAborted
// (ABORTED), 429 → kResourceExhausted (with retry_after), 500 → kInternal,
// 503 → kUnavailable, 504 → kDeadlineExceeded, connection failures → kUnavailable. Messages keep
// the server's message and request id and never contain a credential. Every call may be
// cancelled through `stop` (→ kCancelled). Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "api/status.h"

namespace sbx::controller::databricks {

using api::Status;
using api::StatusOr;

enum class SandboxState { kUnspecified, kPending, kRunning, kStopping, kStopped, kUnknown };
// "PENDING", "RUNNING", … (without the SANDBOX_STATE_ prefix); "UNKNOWN" for unknown values.
std::string_view SandboxStateName(SandboxState state);

struct Sandbox {
  std::string sandbox_id;  // from name "sandboxes/<id>"
  std::string name;        // "sandboxes/<id>"
  std::string display_name;
  std::optional<std::chrono::seconds> inactivity_timeout;  // spec.compute.inactivity_timeout
  std::string image_uri;                                   // spec.environment.image_uri
  std::map<std::string, std::string> custom_tags;          // metadata.custom_tags
  SandboxState state = SandboxState::kUnspecified;
  std::string state_raw;    // as sent, e.g. "SANDBOX_STATE_RUNNING"
  std::string create_time;  // RFC 3339
  std::string update_time;  // RFC 3339
};

struct SandboxPage {
  std::vector<Sandbox> sandboxes;
  std::string next_page_token;  // empty on the last page
};

enum class ExecStatus { kCompleted, kFailed, kTimedOut, kUnknown };

struct ExecRequest {
  std::string cmd;  // program; no shell (wrap in /bin/bash -c)
  std::vector<std::string> args;
  std::map<std::string, std::string> envs;  // merged over the default env; may hold secrets
  std::chrono::seconds execution_timeout{60};
  // Not on the wire: a look due only by its cadence. Sent only with a spare token of the pacing,
  // once, never waited for (kResourceExhausted "not sent" otherwise; http::Call::routine).
  bool routine = false;
};

struct ExecResult {
  std::string command_id;
  ExecStatus status = ExecStatus::kUnknown;
  std::optional<int> exit_code;  // absent if signalled, timed out or never started
  std::string stdout_text;
  std::string stderr_text;
  bool truncated = false;
};

struct Command {
  std::string command_id;
  std::string cmd;
  std::vector<std::string> args;
  std::optional<int64_t> pid;
  bool finished = false;
  std::optional<int> exit_code;
};

// Paths that may appear in an update mask.
inline constexpr std::string_view kMaskDisplayName = "display_name";
inline constexpr std::string_view kMaskInactivityTimeout = "spec.compute.inactivity_timeout";

class SandboxApi {
 public:
  virtual ~SandboxApi() = default;

  // POST /api/2.0/sandboxes?sandbox_id=… ; reads display_name, inactivity_timeout, image_uri,
  // custom_tags of `desired`. kAlreadyExists if the id is taken.
  virtual StatusOr<Sandbox> Create(const std::string& sandbox_id, const Sandbox& desired,
                                   std::stop_token stop = {}) = 0;
  virtual StatusOr<Sandbox> Get(const std::string& sandbox_id, std::stop_token stop = {}) = 0;
  // One page. page_size 0 = server default.
  virtual StatusOr<SandboxPage> List(int page_size, const std::string& page_token,
                                     std::stop_token stop = {}) = 0;
  // Every page; fails as a whole if any page fails (never a partial list).
  virtual StatusOr<std::vector<Sandbox>> ListAll(int page_size, std::stop_token stop = {}) = 0;
  // PATCH with update_mask = `mask` (exactly the changed paths, see kMask*).
  virtual StatusOr<Sandbox> Update(const std::string& sandbox_id, const Sandbox& desired,
                                   const std::vector<std::string>& mask,
                                   std::stop_token stop = {}) = 0;
  virtual Status Delete(const std::string& sandbox_id, std::stop_token stop = {}) = 0;
  // kNotFound unless the sandbox is STOPPED (documented API behaviour).
  virtual StatusOr<Sandbox> Start(const std::string& sandbox_id, std::stop_token stop = {}) = 0;
  virtual StatusOr<Sandbox> Stop(const std::string& sandbox_id, std::stop_token stop = {}) = 0;
  // Not idempotent: never retried once the request may have reached the server.
  virtual StatusOr<ExecResult> ExecSync(const std::string& sandbox_id, const ExecRequest& request,
                                        std::stop_token stop = {}) = 0;
  virtual StatusOr<std::vector<Command>> ListCommands(const std::string& sandbox_id,
                                                      std::stop_token stop = {}) = 0;
  // How far ahead the places in line of calls waiting for the workspace's pacing tokens reach
  // (EndpointPacing::Backlog): what a needed call made now would wait. 0: none, or unpaced.
  virtual std::chrono::milliseconds PacingBacklog() const { return std::chrono::milliseconds(0); }
};

}  // namespace sbx::controller::databricks
