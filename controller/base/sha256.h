// SHA-256 (OpenSSL), the one place the controller takes it: a collected artifact's digest
// (AgentTask.status.artifacts[].sha256) and an API token's hash (--tokens-file). Stateless
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace sbx::controller {

// The 32-byte digest of `bytes`.
std::string Sha256(std::string_view bytes);

// The same as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view bytes);

}  // namespace sbx::controller
