#include "cli/commands/table_printer.h"

#include <gtest/gtest.h>

#include <sstream>

#include "api/rfc3339.h"

namespace sbx::cli {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(FormatAgeTest, FollowsKubectlHumanDuration) {
  EXPECT_EQ(FormatAge(seconds(-5)), "<invalid>");
  EXPECT_EQ(FormatAge(seconds(-1)), "0s");
  EXPECT_EQ(FormatAge(seconds(0)), "0s");
  EXPECT_EQ(FormatAge(seconds(5)), "5s");
  EXPECT_EQ(FormatAge(seconds(119)), "119s");
  EXPECT_EQ(FormatAge(minutes(3)), "3m");
  EXPECT_EQ(FormatAge(minutes(3) + seconds(20)), "3m20s");
  EXPECT_EQ(FormatAge(minutes(12) + seconds(20)), "12m");
  EXPECT_EQ(FormatAge(hours(2)), "120m");
  EXPECT_EQ(FormatAge(hours(3)), "3h");
  EXPECT_EQ(FormatAge(hours(5) + minutes(10)), "5h10m");
  EXPECT_EQ(FormatAge(hours(30)), "30h");
  EXPECT_EQ(FormatAge(hours(24 * 4)), "4d");
  EXPECT_EQ(FormatAge(hours(24 * 3 + 4)), "3d4h");
  EXPECT_EQ(FormatAge(hours(24 * 20)), "20d");
  EXPECT_EQ(FormatAge(hours(24 * (365 * 2 + 30))), "2y30d");
  EXPECT_EQ(FormatAge(hours(24 * 365 * 9)), "9y");
}

TEST(AgeSinceTest, MeasuresFromNow) {
  const auto now = *api::ParseRfc3339("2026-09-01T12:05:00Z");
  EXPECT_EQ(AgeSince("2026-09-01T12:00:00Z", now), "5m");
  EXPECT_EQ(AgeSince("2026-09-01T12:00:00.900Z", now), "5m");
  EXPECT_EQ(AgeSince("2026-09-01T14:00:00+02:00", now), "5m");
  EXPECT_EQ(AgeSince("", now), "<unknown>");
}

TEST(TablePrinterTest, AlignsColumnsWithThreeSpacesAndNoTrailingBlanks) {
  TablePrinter t({"NAME", "READY", "AGE"});
  t.AddRow({"a", "True", "5s"});
  t.AddRow({"longer-name", "Unknown", ""});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "NAME          READY     AGE\n"
            "a             True      5s\n"
            "longer-name   Unknown\n");
}

TEST(TablePrinterTest, PadsShortRowsAndPrintsLaterRowsWithTheSameWidths) {
  TablePrinter t({"NAME", "STATE"});
  t.AddRow({"x"});
  std::ostringstream out;
  t.Print(out, /*with_header=*/false);
  EXPECT_EQ(out.str(), "x\n");
  std::ostringstream later;
  TablePrinter::PrintRow(later, {"y", "RUNNING"}, t.Widths());
  EXPECT_EQ(later.str(), "y      RUNNING\n");
}

TEST(TablePrinterTest, EscapesControlCharactersInCellsAndCountsTheEscapedWidth) {
  TablePrinter t({"NAME", "MESSAGE", "AGE"});
  t.AddRow({"a", "x\x1b]0;pwned\x07\x1b[2J\nsecond line\tend", "5s"});
  t.AddRow({"b", "short", "1m"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "NAME   MESSAGE                                      AGE\n"
            "a      x\\x1b]0;pwned\\x07\\x1b[2J\\nsecond line\\tend   5s\n"
            "b      short                                        1m\n");
}

TEST(TablePrinterTest, EscapesRowsPrintedLater) {
  std::ostringstream later;
  TablePrinter::PrintRow(later, {"y", "\x1b[31mred\r"}, {1, 5});
  EXPECT_EQ(later.str(), "y   \\x1b[31mred\\r\n");
}

}  // namespace
}  // namespace sbx::cli
