// TurnScript: how the emulated harness reads a user message into steps (commands and the
// !fail, !subagent, !sleep test controls).
#include "emulator/openai/internal/turn_script.h"

#include <gtest/gtest.h>

namespace sbx::emulator::internal::openai {
namespace {

using Kind = TurnStep::Kind;
using namespace std::chrono_literals;

TEST(TurnScriptTest, ReadsCommandsAndControlsInOrderAndSkipsText) {
  TurnScript script = ParseTurnScript(
      "Fix it please\n$ echo a  \n!subagent\n!sleep 1m30s\n!subagent failed\n"
      "$ exit 3\n!fail rate_limit_exceeded  Slow down, please \nnot $ a command\n!");
  ASSERT_FALSE(script.error) << *script.error;
  ASSERT_EQ(script.steps.size(), 6u);
  EXPECT_EQ(script.steps[0].kind, Kind::kCommand);
  EXPECT_EQ(script.steps[0].command, "echo a");
  EXPECT_EQ(script.steps[1].kind, Kind::kSubagent);
  EXPECT_EQ(script.steps[1].status, "completed");
  EXPECT_EQ(script.steps[2].kind, Kind::kSleep);
  EXPECT_EQ(script.steps[2].duration, 90s);
  EXPECT_EQ(script.steps[3].status, "failed");
  EXPECT_EQ(script.steps[4].command, "exit 3");
  EXPECT_EQ(script.steps[5].kind, Kind::kFail);
  EXPECT_EQ(script.steps[5].code, "rate_limit_exceeded");
  EXPECT_EQ(script.steps[5].message, "Slow down, please");
}

TEST(TurnScriptTest, FailWithoutAMessageGetsADefaultOne) {
  TurnScript script = ParseTurnScript("!fail sandbox_error");
  ASSERT_EQ(script.steps.size(), 1u);
  EXPECT_EQ(script.steps[0].code, "sandbox_error");
  EXPECT_NE(script.steps[0].message.find("sandbox_error"), std::string::npos);
}

TEST(TurnScriptTest, FlakyIsAFailStepOfItsOwnKind) {
  TurnScript script = ParseTurnScript("$ echo a\n!flaky server_error gone for now\n");
  ASSERT_EQ(script.steps.size(), 2u);
  EXPECT_EQ(script.steps[1].kind, Kind::kFlaky);
  EXPECT_EQ(script.steps[1].code, "server_error");
  EXPECT_EQ(script.steps[1].message, "gone for now");
  EXPECT_NE(ParseTurnScript("!flaky").error.value_or("").find("!flaky <code>"), std::string::npos);
}

TEST(TurnScriptTest, MalformedControlLinesAreErrorsThatSayWhatIsWrong) {
  EXPECT_NE(ParseTurnScript("!fail").error.value_or("").find("!fail <code>"), std::string::npos);
  EXPECT_NE(ParseTurnScript("!sleep soon").error.value_or("").find("invalid duration"),
            std::string::npos);
  EXPECT_NE(ParseTurnScript("!subagent maybe").error.value_or("").find("maybe"), std::string::npos);
  EXPECT_FALSE(ParseTurnScript("! not a control\n!!\n!important: be careful\n$ true").error);
}

}  // namespace
}  // namespace sbx::emulator::internal::openai
