// Text primitives shared by every module: ASCII whitespace trimming and lower-casing.
//
// Why here: api is the lowest target of the tree (sbx::controller, sbx::emulator and the cli all
// link sbx::api, and api links nothing of ours), so it is the one home every module can reach
// without a new dependency (STYLE.md: "shared primitives (trim, time parsing) have one home").
// Both functions work on bytes in the "C" locale: only ASCII letters change case and only the
// six ASCII whitespace characters (space, \t, \n, \v, \f, \r) are trimmed, so UTF-8 text passes
// through untouched. Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace sbx::api {

// `s` without leading and trailing ASCII whitespace; a view into `s` (keep `s` alive).
std::string_view Trim(std::string_view s);

// `s` with ASCII letters A-Z turned into a-z.
std::string Lower(std::string_view s);

}  // namespace sbx::api
