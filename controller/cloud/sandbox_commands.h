// SandboxCommands: runs a command in the sandbox behind a Sandbox object, for callers that must
// not know which cloud hosts it — sbxd's coming API server proxies `exec` and `logs` through it,
// so nothing under controller/server names a cloud (issue #11 item 2). CloudSandboxCommands is
// the implementation over CloudClients (today the Databricks Sandbox API's exec-sync).
//
// Thread-safe. CloudSandboxCommands borrows the CloudClients, which must outlive it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "api/status.h"
#include "controller/cloud/cloud_clients.h"

namespace sbx::controller {

struct CommandRequest {
  std::string cmd{};  // the program, e.g. "/bin/bash"
  std::vector<std::string> args{};
  std::map<std::string, std::string> env{};  // over the default env; may hold secrets
  std::chrono::seconds timeout{60};          // the sandbox ends the command after this
};

enum class CommandOutcome { kCompleted, kFailed, kTimedOut, kUnknown };

struct CommandResult {
  CommandOutcome outcome = CommandOutcome::kUnknown;
  std::optional<int> exit_code;  // absent if signalled, timed out or never started
  std::string stdout_text;
  std::string stderr_text;
  bool truncated = false;  // the sandbox cut the output
};

class SandboxCommands {
 public:
  virtual ~SandboxCommands() = default;
  // Runs `request` in sandbox `sandbox_id` of workspace `workspace_ref` in `namespace_` and
  // waits for it to end. Not idempotent: never retried once it may have started. Errors: those
  // of CloudClients::Sandboxes (kNotFound, kFailedPrecondition), kInvalidArgument for an empty
  // id or cmd, then the cloud's (kFailedPrecondition when the sandbox is not running, …).
  virtual api::StatusOr<CommandResult> Run(const std::string& namespace_,
                                           const std::string& workspace_ref,
                                           const std::string& sandbox_id,
                                           const CommandRequest& request,
                                           std::stop_token stop = {}) = 0;
};

class CloudSandboxCommands final : public SandboxCommands {
 public:
  explicit CloudSandboxCommands(CloudClients& clouds) : clouds_(clouds) {}

  api::StatusOr<CommandResult> Run(const std::string& namespace_, const std::string& workspace_ref,
                                   const std::string& sandbox_id, const CommandRequest& request,
                                   std::stop_token stop = {}) override;

 private:
  CloudClients& clouds_;
};

}  // namespace sbx::controller
