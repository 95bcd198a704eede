#include "httpserver/listen_address.h"

#include <gtest/gtest.h>

namespace sbx::httpserver {
namespace {

TEST(ParseListenAddressTest, AcceptsHostPortBracketedV6AndAnEmptyHost) {
  auto a = ParseListenAddress("127.0.0.1:8443");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8443);
  EXPECT_TRUE(a->loopback);
  auto v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_TRUE(v6->loopback);
  auto any = ParseListenAddress(":9090");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->host, "0.0.0.0");
  EXPECT_FALSE(any->loopback);
  auto local = ParseListenAddress("localhost:1");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->host, "127.0.0.1");
}

TEST(ParseListenAddressTest, RefusesWhatIsNotAnAddressNamingIt) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:8x", "::1:80",
                          "example.com:80", "1.2.3.4:-1"}) {
    auto a = ParseListenAddress(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), api::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(a.status().message().find(bad), std::string::npos) << a.status();
  }
}

}  // namespace
}  // namespace sbx::httpserver
