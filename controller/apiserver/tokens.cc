#include "controller/apiserver/tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "api/text.h"
#include "controller/base/sha256.h"

namespace sbx::controller::apiserver {
namespace {

constexpr size_t kMaxTokensFileBytes = size_t{1} << 20;
constexpr size_t kMinTokenBytes = 16;

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 63) {
    return false;
  }
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '@' || c == '-';
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() != size_t{2} * SHA256_DIGEST_LENGTH) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(SHA256_DIGEST_LENGTH);
  const auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    return -1;  // lowercase only, as the format says
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = value(hex[i]);
    const int lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kEditor:
      return "editor";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

api::StatusOr<Role> ParseRole(std::string_view text) {
  if (text == "viewer") {
    return Role::kViewer;
  }
  if (text == "editor") {
    return Role::kEditor;
  }
  if (text == "admin") {
    return Role::kAdmin;
  }
  return api::InvalidArgumentError("unknown role \"" + std::string(text) +
                                   "\" (expected viewer, editor or admin)");
}

std::string Sha256Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string digest = Sha256(bytes);
  std::string hex;
  hex.reserve(digest.size() * 2);
  for (const char c : digest) {
    const auto u = static_cast<unsigned char>(c);
    hex.push_back(kHex[u >> 4]);
    hex.push_back(kHex[u & 15]);
  }
  return hex;
}

api::StatusOr<std::string> TokenLine(std::string_view name, std::string_view role,
                                     std::string_view token) {
  if (!ValidName(name)) {
    return api::InvalidArgumentError("invalid token name \"" + std::string(name) +
                                     "\" (1-63 of A-Z a-z 0-9 . _ @ -)");
  }
  ASSIGN_OR_RETURN(Role parsed, ParseRole(role));
  if (token.size() < kMinTokenBytes) {
    return api::InvalidArgumentError("the token must be at least " +
                                     std::to_string(kMinTokenBytes) +
                                     " bytes (e.g. openssl rand -hex 32)");
  }
  return std::string(name) + " " + std::string(RoleName(parsed)) + " sha256:" + Sha256Hex(token);
}

api::StatusOr<TokenTable> TokenTable::Parse(std::string_view text, std::string_view file) {
  TokenTable table;
  std::set<std::string> names;
  std::set<std::string> hashes;
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string_view trimmed = api::Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') {
      continue;
    }
    const std::string where = std::string(file) + ":" + std::to_string(number) + ": ";
    std::istringstream fields{std::string(trimmed)};
    std::string name;
    std::string role;
    std::string hash;
    std::string extra;
    fields >> name >> role >> hash >> extra;
    if (hash.empty() || !extra.empty()) {
      return api::InvalidArgumentError(where + "expected \"NAME ROLE sha256:HEX\"");
    }
    if (!ValidName(name)) {
      return api::InvalidArgumentError(where + "invalid token name");
    }
    auto parsed_role = ParseRole(role);
    if (!parsed_role.ok()) {
      return api::InvalidArgumentError(where + parsed_role.status().message());
    }
    constexpr std::string_view kPrefix = "sha256:";
    std::optional<std::string> raw;
    if (hash.rfind(kPrefix, 0) == 0) {
      raw = FromHex(std::string_view(hash).substr(kPrefix.size()));
    }
    if (!raw) {
      return api::InvalidArgumentError(
          where + "the hash must be sha256: and 64 lowercase hex digits (sbxd hash-token)");
    }
    if (!names.insert(name).second) {
      std::string message = where;
      message += "token name \"" + name + "\" appears twice";
      return api::InvalidArgumentError(message);
    }
    if (!hashes.insert(*raw).second) {
      return api::InvalidArgumentError(where + "the same token hash appears twice");
    }
    table.entries_.push_back(Entry{Caller{name, *parsed_role}, *std::move(raw)});
  }
  return table;
}

api::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return api::NotFoundError("tokens file \"" + path + "\" cannot be read");
  }
  std::string text;
  text.resize(kMaxTokensFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxTokensFileBytes) {
    return api::InvalidArgumentError("tokens file \"" + path + "\" is larger than 1 MiB");
  }
  return Parse(text, path);
}

std::optional<Caller> TokenTable::Authenticate(std::string_view token) const {
  if (token.empty()) {
    return std::nullopt;
  }
  const std::string presented = Sha256(token);
  std::optional<Caller> found;
  for (const Entry& e : entries_) {
    // Every entry is compared, in constant time each; no early exit on a match.
    if (CRYPTO_memcmp(e.hash.data(), presented.data(), presented.size()) == 0) {
      found = e.caller;
    }
  }
  return found;
}

}  // namespace sbx::controller::apiserver
