// Percent-encoding (RFC 3986 §2.1), the one implementation every module uses: sbx's REST paths
// and query values (the API server and its client), the cloud clients' URLs, and the emulators'
// request parsing. Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace sbx::api {

// Everything but the unreserved characters (A-Z a-z 0-9 - . _ ~) as %XX (upper-case hex): safe
// as one path segment or one query value.
std::string PercentEncode(std::string_view text);

// %XX sequences decoded (either case of hex); a '%' not followed by two hex digits stays as it
// is. With `plus_is_space` (form-encoded query strings) '+' becomes a space.
std::string PercentDecode(std::string_view text, bool plus_is_space = false);

}  // namespace sbx::api
