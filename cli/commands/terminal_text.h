// TerminalText: makes text that sbx did not write safe to show on the operator's terminal.
// Condition and event messages, setup results, executor logs and exec output come from
// sandboxes and cloud APIs; an escape sequence in them could retitle, clear or rewrite the
// terminal, or hide lines from the operator (the class of kubectl CVE-2021-25743). Every sbxctl
// printer passes such text through this one place.
//
// The escapes are C-style, for a human to read, and not reversible: `\n`, `\r`, `\t` for those
// three, `\xNN` (lower-case hex) for every other byte that is a C0 control (0x00-0x1f), DEL
// (0x7f), part of a C1 control (U+0080-U+009F, in UTF-8 the bytes c2 80-c2 9f) or not part of
// well-formed UTF-8. Everything else, including well-formed non-ASCII UTF-8, is unchanged.
//
// EscapeTerminalText is stateless and thread-safe; TerminalEscaper and ProgramOutput keep state
// between calls and are not thread-safe.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace sbx::cli {

enum class TerminalLayout {
  // A table cell or a one-line field: newline and tab are escaped too, so a value can neither
  // break the row nor shift the columns.
  kSingleLine,
  // A block of lines (describe's spec, a log): newline and tab are kept.
  kMultiLine,
};

// `text` with control characters escaped as described above.
std::string EscapeTerminalText(std::string_view text, TerminalLayout layout);

// Escapes text that arrives in pieces (logs -f): an incomplete UTF-8 sequence at the end of a
// piece is held back until the next piece completes it (or Finish escapes it), so a character,
// or a C1 control, split across two reads is judged whole.
class TerminalEscaper {
 public:
  explicit TerminalEscaper(TerminalLayout layout) : layout_(layout) {}

  // The escaped text of what was held back plus `piece`, minus a new incomplete tail.
  std::string Escape(std::string_view piece);
  // The escaped bytes still held back (an incomplete sequence at the very end); "" if none.
  std::string Finish();

 private:
  TerminalLayout layout_;
  std::string pending_;
};

// Where a program's own output (exec's stdout and stderr, an executor log) goes. As kubectl
// does, a pipe or a file gets the bytes unchanged; a terminal gets them escaped (kMultiLine).
class ProgramOutput {
 public:
  // `out` is borrowed and must outlive this. `is_terminal`: `out` is a terminal (isatty).
  ProgramOutput(std::ostream& out, bool is_terminal)
      : out_(out), is_terminal_(is_terminal), escaper_(TerminalLayout::kMultiLine) {}
  // Writes `bytes` (escaped on a terminal) and flushes.
  void Write(std::string_view bytes);
  // Writes what an escaping terminal still holds back; call once the output ends.
  void Finish();

 private:
  std::ostream& out_;
  const bool is_terminal_;
  TerminalEscaper escaper_;
};

}  // namespace sbx::cli
