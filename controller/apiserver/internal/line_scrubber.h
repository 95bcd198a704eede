// LineScrubber: the executor log proxied by the API server passes the secret scrubber a whole
// line at a time. Private to apiserver/.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sbx::controller::apiserver_internal {

// Passes text through a scrub function a whole line at a time: a secret split across two reads
// is complete (and found) once its line is. A line longer than kMaxHeld goes as it is so far.
class LineScrubber {
 public:
  explicit LineScrubber(const std::function<std::string(std::string_view)>& scrub)
      : scrub_(scrub) {}
  // What can be released of `bytes` (and of what was held before), scrubbed.
  std::string Add(std::string_view bytes);
  // The rest, scrubbed.
  std::string Flush();

 private:
  static constexpr size_t kMaxHeld = size_t{64} * 1024;
  std::string Scrub(std::string_view text) const;
  const std::function<std::string(std::string_view)>& scrub_;
  std::string held_;
};

}  // namespace sbx::controller::apiserver_internal
