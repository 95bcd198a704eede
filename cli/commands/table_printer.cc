#include "cli/commands/table_printer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "api/rfc3339.h"
#include "cli/commands/terminal_text.h"

namespace sbx::cli {

TablePrinter::TablePrinter(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void TablePrinter::AddRow(std::vector<std::string> row) {
  if (row.size() > headers_.size()) {
    std::fprintf(stderr, "sbxctl: fatal: table row has %zu cells for %zu columns\n", row.size(),
                 headers_.size());
    std::abort();
  }
  row.resize(headers_.size());
  for (std::string& cell : row) {
    cell = EscapeTerminalText(cell, TerminalLayout::kSingleLine);
  }
  rows_.push_back(std::move(row));
}

std::vector<size_t> TablePrinter::Widths() const {
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = headers_[c].size();
    for (const auto& row : rows_) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  return widths;
}

void TablePrinter::PrintRow(std::ostream& out, const std::vector<std::string>& row,
                            const std::vector<size_t>& widths) {
  std::vector<std::string> escaped;
  escaped.reserve(row.size());
  for (const std::string& cell : row) {
    escaped.push_back(EscapeTerminalText(cell, TerminalLayout::kSingleLine));
  }
  PrintEscapedRow(out, escaped, widths);
}

void TablePrinter::PrintEscapedRow(std::ostream& out, const std::vector<std::string>& row,
                                   const std::vector<size_t>& widths) {
  std::string line;
  for (size_t c = 0; c < row.size(); ++c) {
    line += row[c];
    if (c + 1 < row.size()) {
      const size_t width = c < widths.size() ? widths[c] : row[c].size();
      line.append(width > row[c].size() ? width - row[c].size() : 0, ' ');
      line += "   ";
    }
  }
  while (!line.empty() && line.back() == ' ') {
    line.pop_back();
  }
  out << line << "\n";
}

void TablePrinter::Print(std::ostream& out, bool with_header) const {
  const std::vector<size_t> widths = Widths();
  if (with_header) {
    PrintEscapedRow(out, headers_, widths);
  }
  for (const auto& row : rows_) {
    PrintEscapedRow(out, row, widths);
  }
}

std::string FormatAge(std::chrono::seconds age) {
  const long long seconds = age.count();
  if (seconds < -1) {
    return "<invalid>";
  }
  if (seconds < 0) {
    return "0s";
  }
  if (seconds < 60LL * 2) {
    return std::to_string(seconds) + "s";
  }
  const long long minutes = seconds / 60;
  if (minutes < 10) {
    const long long s = seconds % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 60LL * 3) {
    return std::to_string(minutes) + "m";
  }
  const long long hours = seconds / 3600;
  if (hours < 8) {
    const long long m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) {
    return std::to_string(hours) + "h";
  }
  if (hours < 24LL * 8) {
    const long long h = hours % 24;
    return h == 0 ? std::to_string(hours / 24) + "d"
                  : std::to_string(hours / 24) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24LL * 365 * 2) {
    return std::to_string(hours / 24) + "d";
  }
  if (hours < 24LL * 365 * 8) {
    const long long dy = (hours / 24) % 365;
    return dy == 0 ? std::to_string(hours / 24 / 365) + "y"
                   : std::to_string(hours / 24 / 365) + "y" + std::to_string(dy) + "d";
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::string AgeSince(std::string_view rfc3339, std::chrono::system_clock::time_point now) {
  const auto t = api::ParseRfc3339(rfc3339);
  if (!t) {
    return "<unknown>";
  }
  // Ages count from the whole second of the timestamp, as kubectl's do.
  return FormatAge(std::chrono::duration_cast<std::chrono::seconds>(
      now - std::chrono::floor<std::chrono::seconds>(*t)));
}

}  // namespace sbx::cli
