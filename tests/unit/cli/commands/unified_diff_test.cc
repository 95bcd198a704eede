#include "cli/commands/unified_diff.h"

#include <gtest/gtest.h>

namespace sbx::cli {
namespace {

TEST(UnifiedDiffTest, EqualTextsGiveNothing) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "old", "new"), "");
  EXPECT_EQ(UnifiedDiff("a\nb", "a\nb\n", "old", "new"), "");
  EXPECT_EQ(UnifiedDiff("", "", "old", "new"), "");
}

TEST(UnifiedDiffTest, ChangedLineWithContext) {
  const std::string diff = UnifiedDiff("a\nb\nc\nd\ne\n", "a\nb\nC\nd\ne\n", "old", "new", 1);
  EXPECT_EQ(diff,
            "--- old\n+++ new\n"
            "@@ -2,3 +2,3 @@\n"
            " b\n-c\n+C\n d\n");
}

TEST(UnifiedDiffTest, NewFileDiffsAgainstEmpty) {
  EXPECT_EQ(UnifiedDiff("", "x\ny\n", "/dev/null", "new"),
            "--- /dev/null\n+++ new\n@@ -0,0 +1,2 @@\n+x\n+y\n");
}

TEST(UnifiedDiffTest, DeletedFileDiffsToEmpty) {
  EXPECT_EQ(UnifiedDiff("x\n", "", "old", "/dev/null"),
            "--- old\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n");
}

TEST(UnifiedDiffTest, DistantChangesMakeSeparateHunks) {
  std::string a;
  std::string b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 ? std::string("two") : (i == 18 ? std::string("eighteen") : std::to_string(i))) +
         "\n";
  }
  const std::string diff = UnifiedDiff(a, b, "a", "b", 3);
  EXPECT_NE(diff.find("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n"),
            std::string::npos)
      << diff;
}

TEST(UnifiedDiffTest, NearbyChangesMergeIntoOneHunk) {
  const std::string diff = UnifiedDiff("1\n2\n3\n4\n5\n6\n", "1\nX\n3\n4\nY\n6\n", "a", "b", 1);
  EXPECT_EQ(diff, "--- a\n+++ b\n@@ -1,6 +1,6 @@\n 1\n-2\n+X\n 3\n 4\n-5\n+Y\n 6\n");
}

TEST(UnifiedDiffTest, InsertionInTheMiddle) {
  EXPECT_EQ(UnifiedDiff("a\nc\n", "a\nb\nc\n", "o", "n", 3),
            "--- o\n+++ n\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
}

}  // namespace
}  // namespace sbx::cli
