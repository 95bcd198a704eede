#include "httpserver/http_exchange.h"

#include <gtest/gtest.h>

namespace sbx::httpserver {
namespace {

TEST(ParseFormEncodedTest, DecodesKeysAndValuesWithPlusAsSpaceAndKeepsTheFirstOfARepeat) {
  const auto form = ParseFormEncoded("a=1&b=two+words&c&d=%41%2b&&a=2");
  EXPECT_EQ(form.at("a"), "1");
  EXPECT_EQ(form.at("b"), "two words");
  EXPECT_EQ(form.at("c"), "");
  EXPECT_EQ(form.at("d"), "A+");
  EXPECT_EQ(form.size(), 4u);
}

TEST(HttpRequestTest, HeadersAreFoundWhateverTheirCase) {
  HttpRequest r;
  r.headers["content-type"] = "text/plain";
  EXPECT_EQ(r.Header("Content-Type"), "text/plain");
  EXPECT_EQ(r.Header("absent"), "");
}

TEST(HttpRequestTest, AnUpgradeNeedsBothTheUpgradeHeaderAndTheConnectionToken) {
  HttpRequest r;
  r.headers["upgrade"] = "websocket";
  EXPECT_FALSE(r.IsUpgrade());
  r.headers["connection"] = "keep-alive, Upgrade";
  EXPECT_TRUE(r.IsUpgrade());
  r.headers["connection"] = "upgraded";
  EXPECT_FALSE(r.IsUpgrade());
  r.headers.erase("upgrade");
  r.headers["connection"] = "upgrade";
  EXPECT_FALSE(r.IsUpgrade());
}

}  // namespace
}  // namespace sbx::httpserver
