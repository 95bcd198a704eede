#include "controller/cloud/http/wire_text.h"

#include <gtest/gtest.h>

namespace sbx::controller::http {
namespace {

TEST(WireTextTest, UrlEscapeKeepsUnreservedOnly) {
  EXPECT_EQ(UrlEscape("dev-a_1.x~"), "dev-a_1.x~");
  EXPECT_EQ(UrlEscape("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
  EXPECT_EQ(UrlEscape("display_name,spec.compute.inactivity_timeout"),
            "display_name%2Cspec.compute.inactivity_timeout");
}

TEST(WireTextTest, BodyExcerptCutsAndBlanksControlCharacters) {
  EXPECT_EQ(BodyExcerpt("a\nb\x7f", 10), "a b ");
  EXPECT_EQ(BodyExcerpt("abcdef", 3), "abc…");
}

TEST(WireTextTest, UserAgentNamesSbx) { EXPECT_TRUE(UserAgent().starts_with("sbx/")); }

}  // namespace
}  // namespace sbx::controller::http
