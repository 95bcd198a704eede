// `sbxctl wait KIND NAME --for=condition=Ready[=True|False] | --for=delete [--timeout 5m]`, and
// the waiting that `apply --wait` and `delete --wait` share with it.
//
// Waiting blocks on Store::WaitForChange (cheap, any process) and re-reads the object; no fixed
// sleeps. A condition counts only once the controller has observed the current generation
// (condition or status observedGeneration >= metadata.generation), so `apply --wait` after a
// spec change does not return on the previous generation's Ready. The wait fails fast when
// the controller reports a terminal error (controller::IsTerminalReason, the one list). Not
// thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "api/conditions.h"
#include "api/resources.h"
#include "api/status.h"
#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct WaitCondition {
  bool for_delete = false;                                    // --for=delete
  std::string type{api::condition::kReady};                   // --for=condition=TYPE
  api::ConditionStatus status = api::ConditionStatus::kTrue;  // [=True|False|Unknown]
};

// Parses "condition=Ready", "condition=Ready=False", "delete".
api::StatusOr<WaitCondition> ParseWaitFor(std::string_view text);

// Blocks until `key` meets `condition`, `deadline` passes (kDeadlineExceeded
// "timed out waiting for the condition on sandboxes/foo"), the controller reports a terminal
// error (kFailedPrecondition naming the reason and message), the object is absent when waiting
// for a condition (kNotFound), or the user interrupts (kCancelled).
api::Status WaitFor(CommandContext& ctx, controller::Store& store, const api::ObjectKey& key,
                    const WaitCondition& condition, std::chrono::steady_clock::time_point deadline);

struct WaitCommandOptions {
  std::vector<std::string> targets;  // KIND NAME… or KIND/NAME…
  std::string for_text;              // --for
  std::string timeout = "5m";        // --timeout
};
int RunWait(CommandContext& ctx, const WaitCommandOptions& options);
void AddWaitCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
