#include "cli/commands/terminal_text.h"

#include <cstdio>

namespace sbx::cli {
namespace {

void AppendEscaped(std::string& out, unsigned char byte) {
  switch (byte) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default: {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      out += hex;
      return;
    }
  }
}

enum class Utf8 { kWellFormed, kIllFormed, kIncomplete };

// Classifies the UTF-8 sequence that starts with the non-ASCII byte s[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF) and gives its length when well formed.
Utf8 ScanSequence(std::string_view s, size_t i, size_t& length) {
  const auto lead = static_cast<unsigned char>(s[i]);
  size_t continuation = 0;
  unsigned char low = 0x80;  // the range of the first continuation byte
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    continuation = 1;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    continuation = 2;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    continuation = 3;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return Utf8::kIllFormed;
  }
  for (size_t k = 1; k <= continuation; ++k) {
    if (i + k >= s.size()) {
      return Utf8::kIncomplete;
    }
    const auto byte = static_cast<unsigned char>(s[i + k]);
    if (byte < (k == 1 ? low : 0x80) || byte > (k == 1 ? high : 0xbf)) {
      return Utf8::kIllFormed;
    }
  }
  length = continuation + 1;
  return Utf8::kWellFormed;
}

// Appends the escaped form of `s` to `out`. With `hold_incomplete`, stops before an incomplete
// sequence at the end and returns where it starts; otherwise returns s.size().
size_t EscapeInto(std::string& out, std::string_view s, TerminalLayout layout,
                  bool hold_incomplete) {
  size_t i = 0;
  while (i < s.size()) {
    const auto byte = static_cast<unsigned char>(s[i]);
    if (byte < 0x80) {
      const bool control = byte < 0x20 || byte == 0x7f;
      const bool kept = layout == TerminalLayout::kMultiLine && (byte == '\n' || byte == '\t');
      if (control && !kept) {
        AppendEscaped(out, byte);
      } else {
        out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    size_t length = 0;
    const Utf8 scan = ScanSequence(s, i, length);
    if (scan == Utf8::kIncomplete && hold_incomplete) {
      return i;
    }
    if (scan != Utf8::kWellFormed) {
      AppendEscaped(out, byte);  // the bytes after it are judged on their own
      ++i;
      continue;
    }
    const bool c1 = byte == 0xc2 && static_cast<unsigned char>(s[i + 1]) <= 0x9f;
    if (c1) {
      AppendEscaped(out, byte);
      AppendEscaped(out, static_cast<unsigned char>(s[i + 1]));
    } else {
      out.append(s.substr(i, length));
    }
    i += length;
  }
  return s.size();
}

}  // namespace

std::string EscapeTerminalText(std::string_view text, TerminalLayout layout) {
  std::string out;
  out.reserve(text.size());
  EscapeInto(out, text, layout, /*hold_incomplete=*/false);
  return out;
}

std::string TerminalEscaper::Escape(std::string_view piece) {
  pending_.append(piece);
  std::string out;
  out.reserve(pending_.size());
  const size_t held = EscapeInto(out, pending_, layout_, /*hold_incomplete=*/true);
  pending_.erase(0, held);
  return out;
}

std::string TerminalEscaper::Finish() {
  std::string out;
  EscapeInto(out, pending_, layout_, /*hold_incomplete=*/false);
  pending_.clear();
  return out;
}

void ProgramOutput::Write(std::string_view bytes) {
  if (is_terminal_) {
    out_ << escaper_.Escape(bytes);
  } else {
    out_ << bytes;
  }
  out_.flush();
}

void ProgramOutput::Finish() {
  if (is_terminal_) {
    out_ << escaper_.Finish();
  }
  out_.flush();
}

}  // namespace sbx::cli
