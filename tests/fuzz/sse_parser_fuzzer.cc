// libFuzzer target for the SSE parser (controller/cloud/openai/sse_parser.h). The input is an
// event stream; the first byte seeds how it is cut into chunks. Checks, besides no crash, leak
// or hang: the events (and the final last-event-id and retry) do not depend on how the stream is
// chunked — the parser's documented contract — comparing one Feed of everything with the
// chunked feed. A small max_event_bytes also exercises the failed state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "controller/cloud/openai/sse_parser.h"

namespace {

using sbx::controller::openai::SseEvent;
using sbx::controller::openai::SseParser;
using sbx::controller::openai::SseParserOptions;

struct Outcome {
  std::vector<SseEvent> events;
  bool failed = false;
};

Outcome Parse(std::string_view stream, uint8_t seed, SseParserOptions options, bool chunked) {
  SseParser parser(options);
  Outcome out;
  auto take = [&](std::vector<SseEvent> events) {
    out.events.insert(out.events.end(), events.begin(), events.end());
  };
  if (!chunked) {
    take(parser.Feed(stream));
  } else {
    size_t step = 1 + seed % 7;
    while (!stream.empty()) {
      const size_t n = std::min(step, stream.size());
      take(parser.Feed(stream.substr(0, n)));
      stream.remove_prefix(n);
      step = 1 + (step * 5 + seed) % 11;
    }
  }
  take(parser.Finish());
  out.failed = parser.failed();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const uint8_t seed = data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (SseParserOptions options :
       {SseParserOptions{}, SseParserOptions{64, /*dispatch_incomplete_at_eof=*/true}}) {
    const Outcome whole = Parse(stream, seed, options, /*chunked=*/false);
    const Outcome pieces = Parse(stream, seed, options, /*chunked=*/true);
    // Once failed, input is dropped, so only streams that never fail must agree.
    if (!whole.failed && !pieces.failed && whole.events != pieces.events) {
      std::abort();  // chunking changed the parse
    }
  }
  return 0;
}
