// The one FNV-1a: its published test vectors, so a fingerprint stored by one build still
// compares equal in the next.
#include "api/fingerprint.h"

#include <gtest/gtest.h>

namespace sbx::api {
namespace {

TEST(FingerprintTest, MatchesTheFnv1a64TestVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fingerprint("foobar"), "85944171f73967e8");
  EXPECT_EQ(Fingerprint("").size(), 16u);
}

TEST(FingerprintTest, EveryByteCountsNulsIncluded) {
  EXPECT_NE(Fingerprint(std::string("a\0b", 3)), Fingerprint(std::string("ab")));
  EXPECT_NE(Fingerprint("model\ninstructions"), Fingerprint("model\ninstruction"));
}

}  // namespace
}  // namespace sbx::api
