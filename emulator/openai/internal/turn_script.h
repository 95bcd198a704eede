// TurnScript: how the OpenAI emulator's emulated harness reads a user message. The message is
// read line by line, in order; a line is one step:
//   "$ <command>"              run <command> with /bin/bash -c through the executor
//   "!fail <code> [<message>]" end the turn agent.session.turn.failed with error {code, message}
//   "!subagent [<status>]"     a subagent turn (subagent_id set) is created and ends with
//                              <status> (completed | failed | cancelled; default completed)
//   "!sleep <duration>"        the harness "thinks" that long (api::ParseDuration: 30s, 2m);
//                              a cancel ends it
//   "!say <text>"              an assistant commentary message with <text>, streamed as deltas
// Any other line (also "!word" for another word) is plain text. A malformed control line of
// those is an error the turn reports as failed with code invalid_request, so that a
// manifest author sees the mistake.
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sbx::emulator::internal::openai {

struct TurnStep {
  // kFlaky: `!flaky <code> [<message>]` fails the turn like !fail the first time the emulator
  // runs a turn with this exact input, and is skipped after that (a retry's second attempt
  // passes): an infrastructure failure that goes away.
  enum class Kind { kCommand, kFail, kSubagent, kSleep, kSay, kFlaky };
  Kind kind = Kind::kCommand;
  std::string command;               // kCommand; kSay: the text
  std::string code;                  // kFail, kFlaky
  std::string message;               // kFail, kFlaky
  std::string status = "completed";  // kSubagent: how the subagent turn ends
  std::chrono::seconds duration{0};  // kSleep
};

struct TurnScript {
  std::vector<TurnStep> steps;
  std::optional<std::string> error;  // a malformed control line, e.g. `!sleep: invalid …`
};

TurnScript ParseTurnScript(const std::string& text);

}  // namespace sbx::emulator::internal::openai
