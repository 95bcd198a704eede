// TablePrinter: kubectl-style plain tables (upper-case headers, columns left-aligned and
// separated by three spaces, no trailing blanks) and the AGE column's human durations. Cells
// are printed with control characters escaped, newlines and tabs included (see
// terminal_text.h), so that a message can neither drive the terminal nor break the layout.
//
// A value type; not thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace sbx::cli {

class TablePrinter {
 public:
  explicit TablePrinter(std::vector<std::string> headers);

  // Rows shorter than the header are padded with empty cells; longer rows abort (a bug). The
  // cells are escaped here, so Widths counts what is printed.
  void AddRow(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }

  // Writes the header (unless `with_header` is false) and all rows.
  void Print(std::ostream& out, bool with_header = true) const;
  // The column widths that Print uses, so that later rows (get -w) can line up.
  std::vector<size_t> Widths() const;
  // Writes one row (escaped as AddRow does) with the given widths (as get -w does for rows
  // that arrive later).
  static void PrintRow(std::ostream& out, const std::vector<std::string>& row,
                       const std::vector<size_t>& widths);

 private:
  static void PrintEscapedRow(std::ostream& out, const std::vector<std::string>& row,
                              const std::vector<size_t>& widths);

  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// kubectl's HumanDuration: "0s", "45s", "119s", "2m", "3m20s", "12m", "2h", "5h10m", "30h",
// "4d", "3d4h", "20d", "2y30d", "9y". Negative beyond -1 s is "<invalid>".
std::string FormatAge(std::chrono::seconds age);

// FormatAge(now - timestamp) in whole seconds of the timestamp (api::ParseRfc3339), or
// "<unknown>" for an empty or malformed timestamp.
std::string AgeSince(std::string_view rfc3339, std::chrono::system_clock::time_point now);

}  // namespace sbx::cli
