#include "controller/cloud/openai/sse_parser.h"

#include <algorithm>

namespace sbx::controller::openai {
namespace {

constexpr char kBom[] = "\xEF\xBB\xBF";
constexpr int kBomSize = 3;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

SseParser::SseParser(SseParserOptions options) : options_(options) {}

bool SseParser::CheckLimit(size_t extra) {
  if (line_.size() + data_.size() + extra > options_.max_event_bytes) {
    failed_ = true;
    line_.clear();
    data_.clear();
    event_type_.clear();
  }
  return !failed_;
}

std::vector<SseEvent> SseParser::Feed(std::string_view chunk) {
  std::vector<SseEvent> out;
  size_t i = 0;
  // A UTF-8 BOM may only open the stream; it can be split across chunks.
  while (!bom_done_ && i < chunk.size()) {
    if (chunk[i] == kBom[bom_matched_]) {
      ++i;
      if (++bom_matched_ == kBomSize) {
        bom_done_ = true;
      }
    } else {
      // Not a BOM after all: the bytes matched so far are ordinary line content.
      line_.append(kBom, bom_matched_);
      bom_done_ = true;
    }
  }
  while (i < chunk.size() && !failed_) {
    if (after_cr_) {
      after_cr_ = false;
      if (chunk[i] == '\n') {  // second half of a CRLF split across chunks
        ++i;
        continue;
      }
    }
    const size_t eol = chunk.find_first_of("\r\n", i);
    if (eol == std::string_view::npos) {
      if (CheckLimit(chunk.size() - i)) {
        line_.append(chunk.substr(i));
      }
      break;
    }
    if (!CheckLimit(eol - i)) {
      break;
    }
    line_.append(chunk.substr(i, eol - i));
    if (chunk[eol] == '\r') {
      if (eol + 1 < chunk.size()) {
        i = chunk[eol + 1] == '\n' ? eol + 2 : eol + 1;
      } else {
        after_cr_ = true;
        i = eol + 1;
      }
    } else {
      i = eol + 1;
    }
    ProcessLine(line_, out);
    line_.clear();
  }
  return out;
}

void SseParser::ProcessLine(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    Dispatch(out);
    return;
  }
  if (line.front() == ':') {
    ++comments_;
    return;
  }
  std::string_view field = line;
  std::string_view value;
  if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') {
      value.remove_prefix(1);
    }
  }
  if (field == "event") {
    event_type_.assign(value);
  } else if (field == "data") {
    if (data_.size() + value.size() + 1 > options_.max_event_bytes) {
      failed_ = true;
      data_.clear();
      event_type_.clear();
      return;
    }
    data_.append(value);
    data_.push_back('\n');
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) {
      last_event_id_.assign(value);
    }
  } else if (field == "retry") {
    // Ignore values that do not fit comfortably in int64 instead of overflowing.
    if (AllDigits(value) && value.size() <= 18) {
      retry_ms_ = std::stoll(std::string(value));
    }
  }
  // Any other field is ignored.
}

void SseParser::Dispatch(std::vector<SseEvent>& out) {
  if (data_.empty()) {
    event_type_.clear();
    return;
  }
  SseEvent event;
  data_.pop_back();  // the LF appended after the last data line
  event.data = std::move(data_);
  if (!event_type_.empty()) {
    event.type = std::move(event_type_);
  }
  event.id = last_event_id_;
  out.push_back(std::move(event));
  data_.clear();
  event_type_.clear();
}

std::vector<SseEvent> SseParser::Finish() {
  std::vector<SseEvent> out;
  discarded_at_eof_ = false;
  if (!failed_) {
    const bool pending = !line_.empty() || !data_.empty() || (!bom_done_ && bom_matched_ > 0);
    if (options_.dispatch_incomplete_at_eof) {
      if (!line_.empty()) {
        ProcessLine(line_, out);
      }
      Dispatch(out);
    } else {
      discarded_at_eof_ = pending;
    }
  }
  line_.clear();
  data_.clear();
  event_type_.clear();
  after_cr_ = false;
  bom_matched_ = 0;
  bom_done_ = false;
  failed_ = false;
  return out;
}

}  // namespace sbx::controller::openai
