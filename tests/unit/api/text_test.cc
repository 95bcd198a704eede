#include "api/text.h"

#include <gtest/gtest.h>

#include <string>

namespace sbx::api {
namespace {

TEST(TrimTest, RemovesLeadingAndTrailingAsciiWhitespaceOnly) {
  EXPECT_EQ(Trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(Trim("\v\fx\f\v"), "x");
  EXPECT_EQ(Trim("inner  space"), "inner  space");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim(" \t\n "), "");
  // A non-breaking space (UTF-8 C2 A0) is not ASCII whitespace.
  EXPECT_EQ(Trim("\xC2\xA0x"), "\xC2\xA0x");
}

TEST(TrimTest, ReturnsAViewIntoTheInput) {
  const std::string text = "  token ";
  const std::string_view trimmed = Trim(text);
  EXPECT_EQ(trimmed.data(), text.data() + 2);
}

TEST(LowerTest, LowersAsciiLettersAndLeavesOtherBytes) {
  EXPECT_EQ(Lower("Content-Type"), "content-type");
  EXPECT_EQ(Lower("ALREADY_EXISTS 42"), "already_exists 42");
  EXPECT_EQ(Lower("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // "Été": UTF-8 bytes unchanged
  EXPECT_EQ(Lower(""), "");
}

}  // namespace
}  // namespace sbx::api
