#include "controller/apiserver/tokens.h"

#include <gtest/gtest.h>

namespace sbx::controller::apiserver {
namespace {

constexpr char kToken[] = "s3cret-token-0123456789";

TEST(TokensTest, TokenLineIsNameRoleAndTheLowercaseSha256OfTheToken) {
  auto line = TokenLine("ci", "editor", kToken);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "ci editor sha256:" + Sha256Hex(kToken));
  // The well-known digest of "abc" (FIPS 180-2), lowercase.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(line->find(kToken), std::string::npos);
}

TEST(TokensTest, RefusesBadNamesRolesAndShortTokens) {
  EXPECT_FALSE(TokenLine("has space", "viewer", kToken).ok());
  EXPECT_FALSE(TokenLine("ci", "root", kToken).ok());
  EXPECT_FALSE(TokenLine("ci", "viewer", "short").ok());
}

TEST(TokensTest, AuthenticatesByHashAndKnowsTheRole) {
  auto table = TokenTable::Parse("# team tokens\n\n" + *TokenLine("ci", "editor", kToken) + "\n" +
                                     *TokenLine("ops", "admin", "another-token-0123456789") + "\n",
                                 "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  auto ci = table->Authenticate(kToken);
  ASSERT_TRUE(ci.has_value());
  EXPECT_EQ(ci->name, "ci");
  EXPECT_EQ(ci->role, Role::kEditor);
  EXPECT_EQ(table->Authenticate("another-token-0123456789")->role, Role::kAdmin);
  EXPECT_FALSE(table->Authenticate("s3cret-token-012345678").has_value());
  EXPECT_FALSE(table->Authenticate("").has_value());
  EXPECT_TRUE(Role::kAdmin > Role::kEditor && Role::kEditor > Role::kViewer);
}

TEST(TokensTest, MalformedLinesNameTheLineButNeverItsText) {
  const std::string hash = Sha256Hex(kToken);
  auto upper = TokenTable::Parse("ci viewer sha256:" + std::string(64, 'A') + "\n", "t");
  ASSERT_FALSE(upper.ok());
  EXPECT_EQ(upper.status().message().rfind("t:1: ", 0), 0u) << upper.status();
  auto plain = TokenTable::Parse("\nci viewer " + hash + "\n", "t");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("t:2: "), std::string::npos);
  EXPECT_EQ(plain.status().message().find(hash), std::string::npos);
  EXPECT_FALSE(TokenTable::Parse("ci viewer sha256:" + hash + "\nci admin sha256:" +
                                     Sha256Hex("x-token-0123456789abc") + "\n",
                                 "t")
                   .ok());  // the same name twice
  EXPECT_FALSE(TokenTable::Parse("a viewer sha256:" + hash + "\nb admin sha256:" + hash + "\n",
                                 "t")
                   .ok());  // the same token twice
  EXPECT_FALSE(TokenTable::Parse("ci viewer sha256:" + hash + " extra\n", "t").ok());
}

}  // namespace
}  // namespace sbx::controller::apiserver
