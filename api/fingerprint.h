// FNV-1a (64 bits), the one implementation every module uses for a stable fingerprint: stable
// across processes, builds and machines (unlike std::hash), so it may be stored and compared
// later. Not cryptographic: never for secrets' integrity, only to tell "made with the same
// inputs" apart (an executor's spec, a session's agent) or to name something without showing
// it (the emulator's principal of a token). Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sbx::api {

// FNV-1a of `bytes`.
uint64_t Fnv1a64(std::string_view bytes);

// The same as 16 lower-case hex digits.
std::string Fingerprint(std::string_view bytes);

}  // namespace sbx::api
