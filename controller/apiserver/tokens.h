// Tokens: who may call sbxd's API (DESIGN §7.3). Bearer tokens are configured in a file
// (--tokens-file) that holds only their hashes, one line per token:
//
//   NAME ROLE sha256:HEX      # HEX = lowercase hex SHA-256 of the token
//
// Blank lines and lines starting with '#' are ignored. NAME is what events record as the caller
// ([A-Za-z0-9._@-]{1,63}); ROLE is viewer, editor or admin. Roles are ordered: an admin may do
// what an editor may, an editor what a viewer may.
//
// Authenticate hashes the presented token and compares it with EVERY entry in constant time
// (CRYPTO_memcmp), so neither the answer's timing nor an early exit tells how much of a hash
// matched. The table never holds a token, only hashes.
//
// Thread-safety: a TokenTable is immutable after Load; share it freely.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"

namespace sbx::controller::apiserver {

enum class Role { kViewer = 0, kEditor = 1, kAdmin = 2 };

std::string_view RoleName(Role role);
// "viewer" | "editor" | "admin"; kInvalidArgument otherwise.
api::StatusOr<Role> ParseRole(std::string_view text);

struct Caller {
  std::string name;
  Role role = Role::kViewer;
};

// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// The tokens-file line for `token`: "NAME ROLE sha256:HEX". kInvalidArgument for a bad name or
// role, or an empty token (or one shorter than 16 bytes: a guessable token is refused).
api::StatusOr<std::string> TokenLine(std::string_view name, std::string_view role,
                                     std::string_view token);

class TokenTable {
 public:
  // Parses the file's text. Errors name "<file>:<line>" and the problem, never the line's text
  // (it holds a hash). kInvalidArgument for a malformed line or a duplicate name or hash.
  static api::StatusOr<TokenTable> Parse(std::string_view text, std::string_view file);
  // Reads and parses `path` (at most 1 MiB). kNotFound / kInvalidArgument.
  static api::StatusOr<TokenTable> Load(const std::string& path);

  // The caller the bearer token belongs to, or nullopt.
  std::optional<Caller> Authenticate(std::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Caller caller;
    std::string hash;  // 32 raw bytes
  };
  std::vector<Entry> entries_;
};

}  // namespace sbx::controller::apiserver
