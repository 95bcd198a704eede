// TurnRunner: the OpenAI emulator's emulated harness. Input queued on a session runs as turns
// on one runner thread per busy session, step by step as TurnScript reads it: a "$ " line runs
// with /bin/bash -c in the session's workspace directory through a ready plain-profile executor
// (process/start, then its process/* notifications; → a command_execution item); "!fail" ends
// the turn failed with the given error; "!subagent" streams a subagent turn; "!sleep" waits
// (cancellable). Then a final assistant message (content part, several output_text deltas),
// then agent.session.turn.completed with a deterministic usage (failed / cancelled as the
// session demands) and agent.session.idle. It also holds input in the connection wait
// (reference §2.1), also on purpose (the admin hold_inputs knob).
//
// Thread-safety: the *Locked methods expect State::mu held (WaitForExecutorLocked releases it
// while waiting). Stop() from the owner after State::BeginStop() and ExecutorRegistry::Stop():
// it joins every runner thread. Owns its runner threads; borrows the State and the
// ExecutorRegistry, which must outlive it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "emulator/openai/internal/executor_registry.h"
#include "emulator/openai/internal/state.h"

namespace sbx::emulator::internal::openai {

class TurnRunner {
 public:
  TurnRunner(State& state, ExecutorRegistry& registry);
  ~TurnRunner();  // Stop()

  // Queues `input` on `s` and starts the session's runner thread unless one is running.
  void EnqueueLocked(const std::shared_ptr<SessionRec>& s, PendingInput input);
  // The connection wait: while no executor is connected the session requires an
  // environment_connection action and the caller is held (up to Options::connection_wait).
  // False if no executor connected in time. `forced` (the admin hold_inputs knob) holds the
  // input as if no executor were connected: for the whole wait (→ false), or until
  // SessionRec::hold_release passes (→ whether an executor is connected then).
  bool WaitForExecutorLocked(std::unique_lock<std::mutex>& lock,
                             const std::shared_ptr<SessionRec>& s, bool forced = false);
  // Sends process/terminate for the process the session's active turn is running, if any.
  void TerminateActiveLocked(SessionRec& s);
  // Joins every runner thread. Idempotent.
  void Stop();

 private:
  struct Runner {
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
    std::thread thread;
  };
  struct CommandOutcome {
    std::string status = "failed";  // completed | failed | incomplete
    std::optional<int> exit_code;
    std::string output;
  };

  struct TurnContext;

  void RunTurns(const std::shared_ptr<SessionRec>& s);
  void RunTurnLocked(std::unique_lock<std::mutex>& lock, const std::shared_ptr<SessionRec>& s,
                     const PendingInput& in);
  // Ends the turn with `status` (its usage set) and the session idle.
  void FinishTurnLocked(TurnContext& tc, const std::string& status, json error);
  // A command_execution item: item.added, the command's output deltas, item.done.
  void RunCommandItemLocked(std::unique_lock<std::mutex>& lock,
                            const std::shared_ptr<SessionRec>& s, TurnContext& tc,
                            const std::string& command);
  void EmitSubagentTurnLocked(TurnContext& tc, const std::string& status);
  void EmitFinalMessageLocked(TurnContext& tc, const std::string& input);
  // One assistant message streamed as output_text deltas (one per piece).
  void EmitAssistantMessageLocked(TurnContext& tc, const std::vector<std::string>& pieces,
                                  const std::string& phase);
  static json UsageJson(int64_t input_chars, int64_t output_chars);
  CommandOutcome RunCommandLocked(std::unique_lock<std::mutex>& lock,
                                  const std::shared_ptr<SessionRec>& s, const std::string& turn_id,
                                  const std::string& item_id, int output_index,
                                  const std::string& command);

  State& state_;
  ExecutorRegistry& registry_;
  std::vector<Runner> runners_;  // Guarded by state_.mu.
};

}  // namespace sbx::emulator::internal::openai
