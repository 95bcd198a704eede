// Base64 (RFC 4648 §4, standard alphabet, "=" padding), the one implementation every module
// uses: collected artifacts (exec-sync output), executor output chunks (JSON-RPC), HTTP Basic
// credentials, and the emulators' decoders of the same. Stateless functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sbx::api {

// `bytes` in the standard alphabet, padded with "=" to a multiple of 4, no line breaks.
std::string Base64Encode(std::string_view bytes);

// The bytes `text` encodes. Accepts the standard and the URL-safe alphabet (RFC 4648 §5: "-"
// and "_"), padding or none, and ASCII whitespace anywhere (line breaks of wrapped output).
// nullopt for any other character, for data after the padding, or for a lone trailing
// character (6 bits cannot make a byte).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace sbx::api
