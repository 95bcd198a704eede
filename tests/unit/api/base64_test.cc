#include "api/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace sbx::api {
namespace {

TEST(Base64Test, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, DecodesWhatItEncodesForEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) {
    all += static_cast<char>(i);
  }
  for (size_t n = 0; n <= all.size(); n += 37) {
    const std::string bytes = all.substr(0, n);
    EXPECT_EQ(Base64Decode(Base64Encode(bytes)), bytes) << n;
  }
}

TEST(Base64Test, AcceptsLineBreaksMissingPaddingAndTheUrlSafeAlphabet) {
  EXPECT_EQ(Base64Decode("Zm9v\nYmFy\r\n"), "foobar");
  EXPECT_EQ(Base64Decode("Zm9vYg"), "foob");
  EXPECT_EQ(Base64Decode("-_8="), Base64Decode("+/8="));
}

TEST(Base64Test, RejectsForeignCharactersDataAfterPaddingAndALoneCharacter) {
  EXPECT_EQ(Base64Decode("Zm9v!"), std::nullopt);
  EXPECT_EQ(Base64Decode("Zg==Zg=="), std::nullopt);
  EXPECT_EQ(Base64Decode("Zm9vY"), std::nullopt);
}

}  // namespace
}  // namespace sbx::api
