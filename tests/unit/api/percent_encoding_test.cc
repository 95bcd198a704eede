#include "api/percent_encoding.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

TEST(PercentEncodingTest, EncodesAllButUnreserved) {
  EXPECT_EQ(PercentEncode("dev-a_1.x~"), "dev-a_1.x~");
  EXPECT_EQ(PercentEncode("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
  EXPECT_EQ(PercentEncode("display_name,spec.compute.inactivity_timeout"),
            "display_name%2Cspec.compute.inactivity_timeout");
  EXPECT_EQ(PercentEncode(std::string("\xff\x00", 2)), "%FF%00");
}

TEST(PercentEncodingTest, DecodesWhatItEncodesAndLeavesStrayPercents) {
  const std::string all = [] {
    std::string s;
    for (int c = 0; c < 256; ++c) {
      s.push_back(static_cast<char>(c));
    }
    return s;
  }();
  EXPECT_EQ(PercentDecode(PercentEncode(all)), all);
  EXPECT_EQ(PercentDecode("a%2fb%2F"), "a/b/");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");
  EXPECT_EQ(PercentDecode("a+b", /*plus_is_space=*/true), "a b");
}

}  // namespace
}  // namespace sbx::api
