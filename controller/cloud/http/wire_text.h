// Text that every cloud client puts on the wire or into a message: short printable excerpts of
// bodies for error messages, and the User-Agent (URL parts are percent-encoded by
// api/percent_encoding.h). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sbx::controller::http {

// At most `max` bytes of `body` for an error message, control characters as spaces, with "…"
// when cut.
std::string BodyExcerpt(std::string_view body, size_t max = 200);

// "sbx/<version>", the User-Agent of every request.
std::string_view UserAgent();

}  // namespace sbx::controller::http
