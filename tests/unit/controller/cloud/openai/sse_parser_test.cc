#include "controller/cloud/openai/sse_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace sbx::controller::openai {
namespace {

std::vector<SseEvent> ParseAll(std::string_view text, SseParserOptions options = {}) {
  SseParser parser(options);
  std::vector<SseEvent> out = parser.Feed(text);
  for (SseEvent& e : parser.Finish()) {
    out.push_back(std::move(e));
  }
  return out;
}

// Feeds `text` one byte at a time: every chunk boundary must give the same events.
std::vector<SseEvent> ParseBytewise(std::string_view text, SseParserOptions options = {}) {
  SseParser parser(options);
  std::vector<SseEvent> out;
  for (char c : text) {
    for (SseEvent& e : parser.Feed(std::string_view(&c, 1))) {
      out.push_back(std::move(e));
    }
  }
  for (SseEvent& e : parser.Finish()) {
    out.push_back(std::move(e));
  }
  return out;
}

SseEvent Ev(std::string data, std::string type = "message", std::string id = "") {
  return SseEvent{std::move(type), std::move(data), std::move(id)};
}

TEST(SseParserTest, ParsesOneDataEventWithDefaultType) {
  EXPECT_EQ(ParseAll("data: {\"a\":1}\n\n"), std::vector<SseEvent>{Ev("{\"a\":1}")});
}

TEST(SseParserTest, JoinsMultipleDataLinesWithLineFeed) {
  EXPECT_EQ(ParseAll("data: one\ndata: two\ndata:three\n\n"),
            std::vector<SseEvent>{Ev("one\ntwo\nthree")});
}

TEST(SseParserTest, KeepsEventTypeAndResetsItAfterDispatch) {
  EXPECT_EQ(ParseAll("event: update\ndata: 1\n\ndata: 2\n\n"),
            (std::vector<SseEvent>{Ev("1", "update"), Ev("2")}));
}

TEST(SseParserTest, EmptyEventFieldMeansMessage) {
  EXPECT_EQ(ParseAll("event:\ndata: x\n\n"), std::vector<SseEvent>{Ev("x")});
}

TEST(SseParserTest, IdPersistsAcrossEventsUntilChanged) {
  EXPECT_EQ(ParseAll("id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"),
            (std::vector<SseEvent>{Ev("a", "message", "7"), Ev("b", "message", "7"),
                                   Ev("c", "message", "")}));
}

TEST(SseParserTest, IgnoresIdContainingNul) {
  SseParser parser;
  const std::string text = std::string("id: 1\n\nid: a\0b\ndata: x\n\n", 24);
  auto events = parser.Feed(text);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, "1");
  EXPECT_EQ(parser.last_event_id(), "1");
}

TEST(SseParserTest, IdWithoutDataDispatchesNothingButIsRemembered) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("id: 42\n\n").empty());
  EXPECT_EQ(parser.last_event_id(), "42");
}

TEST(SseParserTest, RetryAcceptsOnlyAsciiDigits) {
  SseParser parser;
  parser.Feed("retry: 1500\n\n");
  EXPECT_EQ(parser.retry_ms(), 1500);
  parser.Feed("retry: 15x\nretry: -1\nretry:\nretry: 99999999999999999999999\n\n");
  EXPECT_EQ(parser.retry_ms(), 1500);
  parser.Feed("retry:0\n");
  EXPECT_EQ(parser.retry_ms(), 0);
}

TEST(SseParserTest, IgnoresCommentsAndCountsThem) {
  SseParser parser;
  auto events = parser.Feed(": keep-alive\n:\ndata: x\n: inside\n\n");
  EXPECT_EQ(events, std::vector<SseEvent>{Ev("x")});
  EXPECT_EQ(parser.comments(), 3u);
}

TEST(SseParserTest, CommentOnlyBlockDispatchesNothing) {
  EXPECT_TRUE(ParseAll(": ping\n\n: ping\n\n").empty());
}

TEST(SseParserTest, IgnoresUnknownFields) {
  EXPECT_EQ(ParseAll("foo: bar\ndata: x\nDATA: y\nData: z\n\n"), std::vector<SseEvent>{Ev("x")});
}

TEST(SseParserTest, FieldWithoutColonHasEmptyValue) {
  // "data" alone appends an empty line; the event's data is "".
  EXPECT_EQ(ParseAll("data\n\n"), std::vector<SseEvent>{Ev("")});
  EXPECT_EQ(ParseAll("data\ndata\n\n"), std::vector<SseEvent>{Ev("\n")});
}

TEST(SseParserTest, RemovesOnlyOneLeadingSpaceFromValue) {
  EXPECT_EQ(ParseAll("data:  two spaces\n\n"), std::vector<SseEvent>{Ev(" two spaces")});
  EXPECT_EQ(ParseAll("data:\tx\n\n"), std::vector<SseEvent>{Ev("\tx")});
}

TEST(SseParserTest, KeepsColonsInsideTheValue) {
  EXPECT_EQ(ParseAll("data: {\"url\":\"http://x:1\"}\n\n"),
            std::vector<SseEvent>{Ev("{\"url\":\"http://x:1\"}")});
}

TEST(SseParserTest, EmptyDataLineProducesEmptyEventButNoDataProducesNone) {
  EXPECT_EQ(ParseAll("data:\n\n"), std::vector<SseEvent>{Ev("")});
  EXPECT_TRUE(ParseAll("event: x\n\n").empty());
}

TEST(SseParserTest, EventWithoutDataDoesNotLeakItsTypeIntoTheNext) {
  EXPECT_EQ(ParseAll("event: x\n\ndata: y\n\n"), std::vector<SseEvent>{Ev("y")});
}

TEST(SseParserTest, AcceptsCrLfLfAndCrLineEndings) {
  const std::vector<SseEvent> want{Ev("a\nb", "t"), Ev("c")};
  EXPECT_EQ(ParseAll("event: t\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"), want);
  EXPECT_EQ(ParseAll("event: t\rdata: a\rdata: b\r\rdata: c\r\r"), want);
  EXPECT_EQ(ParseAll("event: t\ndata: a\r\ndata: b\r\rdata: c\n\n"), want);
}

TEST(SseParserTest, CrLfSplitAcrossChunksIsOneLineEnding) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: a\r").empty());
  // If the LF were a second line ending, this would dispatch "a" now.
  EXPECT_TRUE(parser.Feed("\n").empty());
  EXPECT_EQ(parser.Feed("\r\n"), std::vector<SseEvent>{Ev("a")});
}

TEST(SseParserTest, CrFollowedByCrIsTwoLineEndings) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: a\r").empty());
  EXPECT_EQ(parser.Feed("\r"), std::vector<SseEvent>{Ev("a")});
}

TEST(SseParserTest, DeliversEachEventAsSoonAsItsBlankLineArrives) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: 1\n").empty());
  EXPECT_EQ(parser.Feed("\nda"), std::vector<SseEvent>{Ev("1")});
  EXPECT_TRUE(parser.Feed("ta: 2\n").empty());
  EXPECT_EQ(parser.Feed("\n"), std::vector<SseEvent>{Ev("2")});
}

TEST(SseParserTest, ReturnsManyEventsFromOneChunkInOrder) {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += "data: " + std::to_string(i) + "\n\n";
  }
  const auto events = ParseAll(text);
  ASSERT_EQ(events.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(events[i].data, std::to_string(i));
  }
}

TEST(SseParserTest, DiscardsUnterminatedEventAtEofPerSpec) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: 1\n\ndata: partial\n").size() == 1);
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_TRUE(parser.discarded_at_eof());
}

TEST(SseParserTest, DiscardsUnterminatedLineAtEofPerSpec) {
  SseParser parser;
  parser.Feed("data: 1");
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_TRUE(parser.discarded_at_eof());
}

TEST(SseParserTest, CleanEofDiscardsNothing) {
  SseParser parser;
  parser.Feed("data: 1\n\n: bye\n");
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_FALSE(parser.discarded_at_eof());
}

TEST(SseParserTest, LenientModeDispatchesFinalEventWithoutBlankLine) {
  SseParserOptions lenient{.dispatch_incomplete_at_eof = true};
  EXPECT_EQ(ParseAll("data: 1\n\ndata: 2\n", lenient), (std::vector<SseEvent>{Ev("1"), Ev("2")}));
  EXPECT_EQ(ParseAll("event: e\ndata: 3", lenient), std::vector<SseEvent>{Ev("3", "e")});
  EXPECT_TRUE(ParseAll("event: e\n", lenient).empty());
}

TEST(SseParserTest, FinishResetsForANewStreamButKeepsIdAndRetry) {
  SseParser parser;
  parser.Feed("id: 5\nretry: 10\ndata: half");
  parser.Finish();
  EXPECT_EQ(parser.Feed("data: next\n\n"), std::vector<SseEvent>{Ev("next", "message", "5")});
  EXPECT_EQ(parser.retry_ms(), 10);
}

TEST(SseParserTest, StripsLeadingUtf8Bom) {
  EXPECT_EQ(ParseAll("\xEF\xBB\xBF"
                     "data: x\n\n"),
            std::vector<SseEvent>{Ev("x")});
}

TEST(SseParserTest, StripsBomSplitAcrossChunks) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("\xEF").empty());
  EXPECT_TRUE(parser.Feed("\xBB").empty());
  EXPECT_EQ(parser.Feed("\xBF"
                        "data: x\n\n"),
            std::vector<SseEvent>{Ev("x")});
}

TEST(SseParserTest, KeepsBomLikeBytesThatAreNotABom) {
  // A partial BOM followed by other bytes is line content: here it makes an unknown field.
  EXPECT_EQ(ParseAll("\xEF\xBB"
                     "data: x\n\ndata: y\n\n"),
            std::vector<SseEvent>{Ev("y")});
  // A BOM later in the stream is content, not stripped.
  EXPECT_EQ(ParseAll("data: a\n\n\xEF\xBB\xBF"
                     "data: b\n\n"),
            std::vector<SseEvent>{Ev("a")});
}

TEST(SseParserTest, PassesNonAsciiBytesThrough) {
  EXPECT_EQ(ParseAll("data: h\xC3\xA9llo \xF0\x9F\x98\x80\n\n"),
            std::vector<SseEvent>{Ev("h\xC3\xA9llo \xF0\x9F\x98\x80")});
}

TEST(SseParserTest, FailsOnOversizedLineAndDropsLaterInput) {
  SseParser parser(SseParserOptions{.max_event_bytes = 64});
  EXPECT_TRUE(parser.Feed(std::string(100, 'x')).empty());
  EXPECT_TRUE(parser.failed());
  EXPECT_TRUE(parser.Feed("\n\ndata: ok\n\n").empty());
}

TEST(SseParserTest, FailsOnOversizedEventAcrossManyLines) {
  SseParser parser(SseParserOptions{.max_event_bytes = 64});
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text += "data: 0123456789\n";
  }
  EXPECT_TRUE(parser.Feed(text).empty());
  EXPECT_TRUE(parser.failed());
}

TEST(SseParserTest, EventsUpToTheLimitPass) {
  SseParser parser(SseParserOptions{.max_event_bytes = 64});
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += "data: 0123456789\n\n";  // each event is small; the total is not limited
  }
  EXPECT_EQ(parser.Feed(text).size(), 50u);
  EXPECT_FALSE(parser.failed());
}

TEST(SseParserTest, AnyChunkingGivesTheSameEvents) {
  const std::string text =
      "\xEF\xBB\xBF: hello\r\nevent: agent.session.idle\r\nid: 1\r\ndata: {\"type\":\r\n"
      "data: \"x\"}\r\n\r\nretry: 100\ndata: second\rdata: line\r\rdata:third\n\n"
      "data: tail-without-blank-line\n";
  const auto whole = ParseAll(text);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0], Ev("{\"type\":\n\"x\"}", "agent.session.idle", "1"));
  EXPECT_EQ(whole[1], Ev("second\nline", "message", "1"));
  EXPECT_EQ(whole[2], Ev("third", "message", "1"));
  EXPECT_EQ(ParseBytewise(text), whole);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    SseParser parser;
    std::vector<SseEvent> got;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 9)(rng);
      for (SseEvent& e : parser.Feed(std::string_view(text).substr(pos, n))) {
        got.push_back(std::move(e));
      }
      pos += n;
    }
    for (SseEvent& e : parser.Finish()) {
      got.push_back(std::move(e));
    }
    ASSERT_EQ(got, whole) << "trial " << trial;
  }
}

TEST(SseParserTest, EmptyFeedIsHarmless) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("").empty());
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_FALSE(parser.discarded_at_eof());
}

}  // namespace
}  // namespace sbx::controller::openai
