#include "cli/commands/terminal_text.h"

#include <gtest/gtest.h>

#include <sstream>

namespace sbx::cli {
namespace {

constexpr TerminalLayout kSingle = TerminalLayout::kSingleLine;
constexpr TerminalLayout kMulti = TerminalLayout::kMultiLine;

// An OSC title change (ended by BEL) and a clear-screen CSI, as a hostile message would hold.
constexpr std::string_view kHostile = "ok\x1b]0;pwned\x07\x1b[2Jdone";

TEST(EscapeTerminalTextTest, EscapesEscapeSequencesSoTheTerminalShowsThemAsText) {
  EXPECT_EQ(EscapeTerminalText(kHostile, kSingle), "ok\\x1b]0;pwned\\x07\\x1b[2Jdone");
  EXPECT_EQ(EscapeTerminalText(kHostile, kMulti), "ok\\x1b]0;pwned\\x07\\x1b[2Jdone");
}

TEST(EscapeTerminalTextTest, LeavesPrintableTextAndWellFormedUtf8Alone) {
  const std::string_view text =
      "plain ASCII ~!@#$%^&*() \\x1b, caf\xc3\xa9, \xe2\x9c\x93, \xf0\x9f\x99\x82";
  EXPECT_EQ(EscapeTerminalText(text, kSingle), text);
  EXPECT_EQ(EscapeTerminalText("", kSingle), "");
}

TEST(EscapeTerminalTextTest, SingleLineEscapesNewlineAndTabMultiLineKeepsThem) {
  EXPECT_EQ(EscapeTerminalText("a\nb\tc\rd", kSingle), "a\\nb\\tc\\rd");
  // A carriage return could overwrite a line with other text: escaped in blocks too.
  EXPECT_EQ(EscapeTerminalText("a\nb\tc\rd", kMulti), "a\nb\tc\\rd");
}

TEST(EscapeTerminalTextTest, EscapesEveryC0ControlAndDel) {
  for (int byte = 0; byte < 0x20; ++byte) {
    const std::string text(1, static_cast<char>(byte));
    const std::string escaped = EscapeTerminalText(text, kSingle);
    EXPECT_EQ(escaped.front(), '\\') << "byte " << byte;
    EXPECT_GT(escaped.size(), 1u) << "byte " << byte;
  }
  EXPECT_EQ(EscapeTerminalText(std::string_view("\0", 1), kSingle), "\\x00");
  EXPECT_EQ(EscapeTerminalText("\x7f", kSingle), "\\x7f");
}

TEST(EscapeTerminalTextTest, EscapesC1ControlsEncodedInUtf8) {
  // U+009B is CSI: "\xc2\x9bJ" erases the screen on terminals that honour C1 controls.
  EXPECT_EQ(EscapeTerminalText("a\xc2\x9bJ", kMulti), "a\\xc2\\x9bJ");
  EXPECT_EQ(EscapeTerminalText("\xc2\x80\xc2\x9f", kMulti), "\\xc2\\x80\\xc2\\x9f");
  // U+00A0 is the first code point after the C1 range: printable.
  EXPECT_EQ(EscapeTerminalText("\xc2\xa0", kMulti), "\xc2\xa0");
}

TEST(EscapeTerminalTextTest, EscapesBytesThatAreNotWellFormedUtf8) {
  EXPECT_EQ(EscapeTerminalText("\x9bJ", kMulti), "\\x9bJ");                  // a lone C1 byte
  EXPECT_EQ(EscapeTerminalText("\xc0\x9b", kMulti), "\\xc0\\x9b");           // overlong
  EXPECT_EQ(EscapeTerminalText("\xed\xa0\x80", kMulti), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeTerminalText("\xff", kMulti), "\\xff");
  EXPECT_EQ(EscapeTerminalText("x\xe2\x9c", kMulti), "x\\xe2\\x9c");  // cut short at the end
}

TEST(TerminalEscaperTest, JudgesACharacterSplitAcrossPiecesWhole) {
  TerminalEscaper escaper(kMulti);
  EXPECT_EQ(escaper.Escape("caf\xc3"), "caf");
  EXPECT_EQ(escaper.Escape("\xa9!"), "\xc3\xa9!");
  // A C1 control split in two is still escaped.
  EXPECT_EQ(escaper.Escape("x\xc2"), "x");
  EXPECT_EQ(escaper.Escape("\x9bJ\n"), "\\xc2\\x9bJ\n");
  EXPECT_EQ(escaper.Finish(), "");
}

TEST(TerminalEscaperTest, FinishEscapesWhatIsStillHeldBack) {
  TerminalEscaper escaper(kMulti);
  EXPECT_EQ(escaper.Escape("end\xf0\x9f"), "end");
  EXPECT_EQ(escaper.Finish(), "\\xf0\\x9f");
  EXPECT_EQ(escaper.Finish(), "");
}

TEST(ProgramOutputTest, PassesBytesThroughUnchangedToAPipeOrFile) {
  std::ostringstream out;
  ProgramOutput program(out, /*is_terminal=*/false);
  program.Write(kHostile);
  program.Write("\r\n\xc2");
  program.Finish();
  EXPECT_EQ(out.str(), std::string(kHostile) + "\r\n\xc2");
}

TEST(ProgramOutputTest, EscapesControlCharactersOnATerminal) {
  std::ostringstream out;
  ProgramOutput program(out, /*is_terminal=*/true);
  program.Write(kHostile);
  program.Write("\nnext line\tcol\n\xc2");
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
  EXPECT_EQ(out.str().find('\x07'), std::string::npos);
  program.Finish();
  EXPECT_EQ(out.str(), "ok\\x1b]0;pwned\\x07\\x1b[2Jdone\nnext line\tcol\n\\xc2");
}

}  // namespace
}  // namespace sbx::cli
