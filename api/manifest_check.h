// ManifestCheck: what every writer of manifests does after decoding them — the one code path
// shared by `sbxctl apply/diff/delete -f` (cli/commands/manifest_reader.h) and sbxd's
// `POST /apply` (controller/apiserver): put objects in the namespace given on the command line,
// apply defaults, validate (each problem placed at its file:line:col), and refuse the same
// object twice (naming both places). No I/O; stateless; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.h"
#include "api/status.h"
#include "api/validation.h"

namespace sbx::api {

struct ManifestCheckOptions {
  // Objects that name no other namespace than the default are put here (`-n` given).
  std::optional<std::string> namespace_override;
  bool validate = true;  // default + validate (delete -f only needs identities)
  ValidationOptions validation;
};

// Decodes `content` (from `file`) and appends its manifests; on a decode error appends the
// error's lines to `errors` instead.
void DecodeManifestText(std::string_view content, std::string_view file,
                        std::vector<Manifest>& manifests, std::vector<std::string>& errors);

// Defaults, validates and checks for duplicates, in place; every problem is one line of
// `errors` ("file:line:col: field.path: problem"). Non-empty errors = nothing may be applied.
void CheckManifests(std::vector<Manifest>& manifests, const ManifestCheckOptions& options,
                    std::vector<std::string>& errors);

// Appends the lines of `status`'s message (its ToString() if it has none) to `errors`.
void AppendErrorLines(const Status& status, std::vector<std::string>& errors);

// "file:line" of a manifest, for messages.
std::string ManifestLocation(const Manifest& manifest);

}  // namespace sbx::api
