#include "controller/server/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace sbx::log {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Captures every line; the logger is process-wide, so each test re-initialises it.
class LogTest : public ::testing::Test {
 protected:
  void Capture(Format format, Level level) {
    InitWithSink(format, level, [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    });
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  void TearDown() override { Init(Format::kText, Level::kInfo); }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(LogTest, TextLineHasTimestampLevelEventAndFields) {
  Capture(Format::kText, Level::kInfo);
  Info("reconciled", {{"kind", "Sandbox"}, {"name", "default/a"}, {"duration_ms", "12"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO reconciled )"
                           R"(kind=Sandbox name=default/a duration_ms=12)")))
      << lines[0];
}

TEST_F(LogTest, TextQuotesAndEscapesValuesThatNeedIt) {
  Capture(Format::kText, Level::kInfo);
  Warn("failed", {{"error", "UNAVAILABLE: connection \"refused\""},
                  {"empty", ""},
                  {"multi", "a\nb"},
                  {"eq", "a=b"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr(" WARN failed error=\"UNAVAILABLE: connection \\\"refused\\\"\" "
                                  "empty=\"\" multi=\"a\\nb\" eq=\"a=b\""));
}

TEST_F(LogTest, JsonLineIsOneEscapedObjectWithFieldsInOrder) {
  Capture(Format::kJson, Level::kInfo);
  Error("boom", {{"msg", "quote \" backslash \\ newline \n tab \t"}, {"kind", "Sandbox"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["event"], "boom");
  EXPECT_EQ(j["msg"], "quote \" backslash \\ newline \n tab \t");
  EXPECT_EQ(j["kind"], "Sandbox");
  EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(lines[0].rfind("{\"ts\":", 0), 0u);
  EXPECT_LT(lines[0].find("\"msg\""), lines[0].find("\"kind\""));
}

TEST_F(LogTest, JsonSurvivesInvalidUtf8) {
  Capture(Format::kJson, Level::kInfo);
  Info("bytes", {{"v", std::string("ok\xff\xfe", 4)}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NO_THROW((void)nlohmann::json::parse(lines[0]));
}

TEST_F(LogTest, FiltersByLevel) {
  Capture(Format::kText, Level::kWarn);
  Debug("d");
  Info("i");
  Warn("w");
  Error("e");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr(" WARN w"));
  EXPECT_THAT(lines[1], HasSubstr(" ERROR e"));
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kError));
}

TEST_F(LogTest, RedactsRegisteredSecretsInEveryPartOfTheLine) {
  RegisterSecret("dapi-secret-123");
  Capture(Format::kText, Level::kDebug);
  Info("token dapi-secret-123 leaked", {{"header", "Authorization: Bearer dapi-secret-123"},
                                        {"twice", "dapi-secret-123dapi-secret-123"}});
  Capture(Format::kJson, Level::kDebug);
  Info("x", {{"header", "Bearer dapi-secret-123"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    EXPECT_THAT(line, Not(HasSubstr("dapi-secret-123"))) << line;
    EXPECT_THAT(line, HasSubstr("[REDACTED]")) << line;
  }
  EXPECT_THAT(lines[0], HasSubstr("twice=[REDACTED][REDACTED]"));
}

// A secret that is part of "[REDACTED]" made the old scrub loop forever (it searched again at
// the place it had just written). Each occurrence is now found in the original text.
TEST_F(LogTest, ScrubTerminatesForSecretsInsideTheRedactionMarker) {
  for (const char* secret : {"RED", "EDACT", "[REDACTED]", "D]"}) {
    RegisterSecret(secret);
  }
  RegisterSecret("dapi-overlap-123");
  const std::string scrubbed = Scrub("x RED y dapi-overlap-123 [REDACTED] EDACTED");
  EXPECT_EQ(scrubbed.find("dapi-overlap"), std::string::npos) << scrubbed;
  EXPECT_EQ(scrubbed.find(" y "), 12u) << scrubbed;  // what is no secret stays
  Capture(Format::kText, Level::kInfo);
  Info("line", {{"k", "RED dapi-overlap-123"}});
  ASSERT_EQ(Lines().size(), 1u);
}

TEST_F(LogTest, RedactsSecretsInTheirEscapedForms) {
  RegisterSecret("pa\"ss\\word");
  Capture(Format::kText, Level::kInfo);
  Info("t", {{"v", "x pa\"ss\\word y"}});
  Capture(Format::kJson, Level::kInfo);
  Info("j", {{"v", "pa\"ss\\word"}});
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], Not(HasSubstr("ss\\\\word"))) << lines[0];
  EXPECT_THAT(lines[0], HasSubstr("[REDACTED]"));
  EXPECT_EQ(nlohmann::json::parse(lines[1])["v"], "[REDACTED]");
}

TEST_F(LogTest, LinesLoggedStraightThroughSpdlogUseTheSameFormatAndRedaction) {
  RegisterSecret("client-secret-xyz");
  Capture(Format::kJson, Level::kDebug);
  spdlog::debug("oauth: refreshed with {}", "client-secret-xyz");
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  const auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["level"], "debug");
  EXPECT_EQ(j["event"], "oauth: refreshed with [REDACTED]");
}

TEST(LogParseTest, ParsesLevelsAndFormats) {
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(ParseLevel("INFO"), Level::kInfo);
  EXPECT_EQ(ParseLevel("warning"), Level::kWarn);
  EXPECT_EQ(ParseLevel("error"), Level::kError);
  EXPECT_EQ(ParseLevel("verbose"), std::nullopt);
  EXPECT_EQ(ParseFormat("json"), Format::kJson);
  EXPECT_EQ(ParseFormat("Text"), Format::kText);
  EXPECT_EQ(ParseFormat("xml"), std::nullopt);
}

}  // namespace
}  // namespace sbx::log
