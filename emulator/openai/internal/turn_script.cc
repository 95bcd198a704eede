#include "emulator/openai/internal/turn_script.h"

#include <cctype>
#include <sstream>

#include "api/duration.h"
#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::openai {
namespace {

// `!name rest` → the step, or an error message for a malformed control line.
std::optional<std::string> ParseControl(const std::string& name, const std::string& rest,
                                        TurnStep& step) {
  std::istringstream words(rest);
  if (name == "fail" || name == "flaky") {
    step.kind = name == "fail" ? TurnStep::Kind::kFail : TurnStep::Kind::kFlaky;
    if (!(words >> step.code)) {
      return "!" + name + " needs an error code: !" + name + " <code> [<message>]";
    }
    std::string message;
    std::getline(words, message);
    step.message = Trim(message);
    if (step.message.empty()) {
      step.message = "turn failed on request (!" + name + " " + step.code + ")";
    }
    return std::nullopt;
  }
  if (name == "subagent") {
    step.kind = TurnStep::Kind::kSubagent;
    words >> step.status;
    if (step.status.empty()) {
      step.status = "completed";
    }
    if (step.status != "completed" && step.status != "failed" && step.status != "cancelled") {
      return "!subagent status must be completed, failed or cancelled, not '" + step.status + "'";
    }
    return std::nullopt;
  }
  if (name == "say") {
    step.kind = TurnStep::Kind::kSay;
    step.command = Trim(rest);
    if (step.command.empty()) {
      return "!say needs the text to say: !say <text>";
    }
    return std::nullopt;
  }
  // name == "sleep" (IsControl admits no other)
  step.kind = TurnStep::Kind::kSleep;
  std::string text;
  words >> text;
  auto d = api::ParseDuration(text);
  if (!d.ok()) {
    return "!sleep: " + std::string(d.status().message());
  }
  step.duration = *d;
  return std::nullopt;
}

// Only these names make a line a control line; "!important: …" in a real prompt stays text.
bool IsControl(const std::string& name) {
  return name == "fail" || name == "flaky" || name == "subagent" || name == "sleep" ||
         name == "say";
}

}  // namespace

TurnScript ParseTurnScript(const std::string& text) {
  TurnScript script;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("$ ", 0) == 0) {
      TurnStep step;
      step.command = Trim(line.substr(2));
      script.steps.push_back(std::move(step));
      continue;
    }
    if (line.size() < 2 || line[0] != '!' || !std::isalpha(static_cast<unsigned char>(line[1]))) {
      continue;  // plain text
    }
    size_t end = line.find_first_of(" \t\r", 1);
    std::string name = line.substr(1, end == std::string::npos ? std::string::npos : end - 1);
    std::string rest = end == std::string::npos ? "" : line.substr(end);
    if (!IsControl(name)) {
      continue;  // plain text
    }
    TurnStep step;
    if (auto error = ParseControl(name, rest, step)) {
      script.error = *error;
      return script;
    }
    script.steps.push_back(std::move(step));
  }
  return script;
}

}  // namespace sbx::emulator::internal::openai
