// ManifestReader: reads the manifests named by `-f` (files, directories, `-` for stdin) the way
// apply, diff and delete need them — decoded, defaulted and validated, with EVERY error found
// (not just the first), each one line "file:line:col: field.path: problem".
//
// Directories contribute their *.yaml, *.yml and *.json files in sorted order (recursively with
// -R). The same object (kind, namespace, name) twice, even across files, is an error naming
// both places. A file (or stdin) larger than ManifestReadOptions::max_manifest_bytes is refused
// before it is read: "<file>: manifest is N bytes, more than the limit of M bytes". What the
// decoder refuses in a manifest (aliases, deep nesting, invalid UTF-8) is listed in
// api/codec.h. Stateless functions; thread-safe apart from reading `stdin_stream`.
#pragma once

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/validation.h"
#include "cli/commands/command_context.h"

namespace sbx::cli {

// Per manifest file (and stdin). Manifests are a few KiB each, so 8 MiB holds thousands of
// objects; a 100 MB file is refused by its size instead of being read and parsed.
inline constexpr size_t kDefaultMaxManifestBytes = size_t{8} << 20;  // = GlobalOptions' default

struct ManifestReadOptions {
  std::vector<std::string> paths;  // -f, in order; "-" is stdin
  bool recursive = false;          // -R
  // -n given explicitly: objects that name no other namespace are put there.
  std::optional<std::string> namespace_override;
  bool validate = true;  // default + validate (delete -f only needs identities)
  // The secret sources manifests may name; ReadCommandManifests takes the env prefix from
  // $SBX_SECRET_ENV_PREFIX when set (the operator's sbxd flag, told to the CLI).
  api::ValidationOptions validation;
  size_t max_manifest_bytes = kDefaultMaxManifestBytes;
};

struct ManifestSet {
  std::vector<api::Manifest> manifests;  // in file order, defaulted (and validated)
  std::vector<std::string> errors;       // one line each; non-empty = nothing may be applied
};

ManifestSet ReadManifests(const ManifestReadOptions& options, std::istream& stdin_stream);

// ReadManifests for a verb's `-f`/`-R`, with the global `-n` applied. Every error is printed on
// the command's stderr; nullopt then, and the verb exits without changing anything.
std::optional<ManifestSet> ReadCommandManifests(CommandContext& ctx,
                                                const std::vector<std::string>& paths,
                                                bool recursive, bool validate = true);

// "file:line" of a manifest, for messages.
std::string Location(const api::Manifest& manifest);

}  // namespace sbx::cli
