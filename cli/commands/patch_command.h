// `sbxctl patch KIND NAME -p PATCH [--type merge|json]` (also KIND/NAME), as kubectl.
//
// --type merge (the default; sbx objects have no strategic-merge keys, so lists are replaced
// as in a JSON merge patch, RFC 7386) or json (a JSON Patch, RFC 6902). The patch applies to
// the object as `get -o json` shows it; only metadata.labels, metadata.annotations and spec are
// kept (status and server-set metadata are the controller's and the store's). The result is
// decoded as strictly as a manifest and written as apply writes it (object_update.h): same
// validation and secret-reference rules, a new generation when the spec changed, a concurrent
// change read again. Prints `sandbox/dev patched` or `sandbox/dev patched (no change)`.
// A bad patch, an unknown field, a changed name or kind: one line, exit 1. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct PatchCommandOptions {
  std::vector<std::string> args;  // KIND NAME or KIND/NAME
  std::string patch;              // -p
  std::string type = "merge";     // --type
};

int RunPatch(CommandContext& ctx, const PatchCommandOptions& options);
void AddPatchCommand(CLI::App& app, CommandContext& ctx);

// The object `original` with `patch` applied (see above), decoded strictly; kInvalidArgument
// naming the problem. Shared with nothing else yet, exposed for tests.
api::StatusOr<api::Object> PatchObject(const api::Object& original, std::string_view patch,
                                       std::string_view type);

}  // namespace sbx::cli
