#include "controller/apiserver/internal/line_scrubber.h"

namespace sbx::controller::apiserver_internal {

std::string LineScrubber::Add(std::string_view bytes) {
  held_.append(bytes);
  size_t end = held_.rfind('\n');
  if (end == std::string::npos) {
    if (held_.size() < kMaxHeld) {
      return "";
    }
    end = held_.size() - 1;
  }
  std::string out = Scrub(std::string_view(held_).substr(0, end + 1));
  held_.erase(0, end + 1);
  return out;
}

std::string LineScrubber::Flush() {
  std::string out = Scrub(held_);
  held_.clear();
  return out;
}

std::string LineScrubber::Scrub(std::string_view text) const {
  return scrub_ ? scrub_(text) : std::string(text);
}

}  // namespace sbx::controller::apiserver_internal
