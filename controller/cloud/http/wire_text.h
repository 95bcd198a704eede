// Text that every cloud client puts on the wire or into a message: percent-encoding of URL parts,
// short printable excerpts of bodies for error messages, and the User-Agent. Pure functions;
// thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sbx::controller::http {

// Percent-encodes every byte outside RFC 3986 "unreserved" (A-Z a-z 0-9 - . _ ~).
std::string UrlEscape(std::string_view text);

// At most `max` bytes of `body` for an error message, control characters as spaces, with "…"
// when cut.
std::string BodyExcerpt(std::string_view body, size_t max = 200);

// "sbx/<version>", the User-Agent of every request.
std::string_view UserAgent();

}  // namespace sbx::controller::http
