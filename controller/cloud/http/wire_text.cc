#include "controller/cloud/http/wire_text.h"

#include <algorithm>

#ifndef SBX_VERSION
#define SBX_VERSION "0.0.0"
#endif

namespace sbx::controller::http {

std::string BodyExcerpt(std::string_view body, size_t max) {
  std::string out;
  const size_t n = std::min(body.size(), max);
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(body[i]);
    out.push_back((c < 0x20 || c == 0x7F) ? ' ' : static_cast<char>(c));
  }
  if (body.size() > max) {
    out += "…";
  }
  return out;
}

std::string_view UserAgent() { return "sbx/" SBX_VERSION; }

}  // namespace sbx::controller::http
