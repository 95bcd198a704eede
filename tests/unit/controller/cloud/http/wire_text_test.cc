#include "controller/cloud/http/wire_text.h"

#include <gtest/gtest.h>

namespace sbx::controller::http {
namespace {

TEST(WireTextTest, BodyExcerptCutsAndBlanksControlCharacters) {
  EXPECT_EQ(BodyExcerpt("a\nb\x7f", 10), "a b ");
  EXPECT_EQ(BodyExcerpt("abcdef", 3), "abc…");
}

TEST(WireTextTest, UserAgentNamesSbx) { EXPECT_TRUE(UserAgent().starts_with("sbx/")); }

}  // namespace
}  // namespace sbx::controller::http
