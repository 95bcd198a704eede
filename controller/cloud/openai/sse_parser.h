// SseParser: an incremental parser for text/event-stream (WHATWG HTML "Server-sent events",
// §9.2.6 "Interpreting an event stream"). Pure: no I/O, no clock, no third-party types.
//
// Feed() takes the body in arbitrary byte chunks, as they arrive off the wire (a chunk may end
// anywhere, even between the CR and LF of one line ending or inside the UTF-8 BOM), and returns
// the events completed by that chunk. Finish() marks end of stream. Handled: `event:`, `data:`
// (multi-line, joined with LF), `id:` (persists across events; ignored if it holds NUL),
// `retry:` (ASCII digits only), comments (`:` lines), unknown fields (ignored), a field line
// without a colon (a field with an empty value), one optional space after the colon, line
// endings CRLF/LF/CR, and a leading UTF-8 BOM. Bytes are passed through unchanged (no UTF-8
// validation; the consumer's JSON parser does that).
//
// End of stream: per the spec an event not terminated by a blank line is discarded at EOF;
// Finish() does that by default and reports it through discarded_at_eof(). With
// `dispatch_incomplete_at_eof` it is dispatched instead (for lenient servers).
//
// Limits: a line or event larger than `max_event_bytes` puts the parser into a failed state
// (failed() == true): the current and later input is dropped, so a hostile server cannot grow
// memory without bound.
//
// Thread-compatible: one parser per stream, used from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sbx::controller::openai {

struct SseEvent {
  std::string type = "message";  // `event:` field, "message" when absent
  std::string data;              // `data:` lines joined with "\n" (no trailing LF)
  std::string id;                // the last event id seen so far ("" if none)

  friend bool operator==(const SseEvent&, const SseEvent&) = default;
};

struct SseParserOptions {
  size_t max_event_bytes = 16u << 20;  // bound on one line and on one event's data
  bool dispatch_incomplete_at_eof = false;
};

class SseParser {
 public:
  explicit SseParser(SseParserOptions options = {});

  // Parses `chunk` and returns the events it completed, in order. Empty after failed().
  std::vector<SseEvent> Feed(std::string_view chunk);

  // End of stream. Returns the unterminated final event only when dispatch_incomplete_at_eof
  // is set (and it has data); otherwise discards it. The parser is then reset for a new stream
  // (last event id and retry are kept, as a reconnecting EventSource keeps them).
  std::vector<SseEvent> Finish();

  // The last valid `retry:` value (the reconnection time the server asks for), if any.
  std::optional<int64_t> retry_ms() const { return retry_ms_; }
  // The last event id buffer (what a reconnect would send as Last-Event-ID).
  const std::string& last_event_id() const { return last_event_id_; }
  // True once a line or an event exceeded max_event_bytes.
  bool failed() const { return failed_; }
  // True if the last Finish() dropped a partial line or an undispatched event.
  bool discarded_at_eof() const { return discarded_at_eof_; }
  // Number of comment lines seen (keep-alives), for diagnostics.
  uint64_t comments() const { return comments_; }

 private:
  void ProcessLine(std::string_view line, std::vector<SseEvent>& out);
  void Dispatch(std::vector<SseEvent>& out);
  bool CheckLimit(size_t extra);

  SseParserOptions options_;
  std::string line_;        // bytes of the current, not yet terminated line
  std::string data_;        // data buffer (each data line + "\n")
  std::string event_type_;  // event type buffer
  std::string last_event_id_;
  std::optional<int64_t> retry_ms_;
  bool after_cr_ = false;  // the previous chunk ended with CR: a leading LF belongs to it
  int bom_matched_ = 0;    // leading BOM bytes matched so far
  bool bom_done_ = false;  // past the point where a BOM may appear
  bool failed_ = false;
  bool discarded_at_eof_ = false;
  uint64_t comments_ = 0;
};

}  // namespace sbx::controller::openai
