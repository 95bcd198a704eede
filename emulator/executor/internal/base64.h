// Standard base64 (RFC 4648 §4, with padding), the encoding of the exec-server protocol's byte
// payloads (`chunk`, `dataBase64`; reference/codex-exec-server.md §7.1). Pure functions;
// thread-safe. Module-private to emulator/executor.
#pragma once

#include <optional>
#include <string>

namespace sbx::emulator::internal::executor {

std::string Base64Encode(const std::string& bytes);
// nullopt for text that is not base64 (a character outside the alphabet, or bad padding).
std::optional<std::string> Base64Decode(const std::string& text);

}  // namespace sbx::emulator::internal::executor
