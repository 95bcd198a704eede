// `sbxctl explain KIND[.field…] [--recursive]`, as kubectl: what a field of a manifest means,
// generated from the JSON Schemas of manifests/schema/ (compiled in: embedded_schemas.h).
// Prints KIND and VERSION, then the field's type (`<string>`, `<[]Object>`,
// `<map[string]string>`), its default and allowed values, its description, and its fields (each
// with its type, `-required-`, enum, default and description); --recursive prints the whole
// tree of field names and types instead. KIND takes every form `get` takes (sandbox, sb,
// Sandboxes). Lists are transparent: `sandbox.spec.setup.run`. An unknown field is
// `error: field "nope" does not exist`, exit 1. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct ExplainCommandOptions {
  std::string path;        // KIND[.field…]
  bool recursive = false;  // --recursive
};

int RunExplain(CommandContext& ctx, const ExplainCommandOptions& options);
void AddExplainCommand(CLI::App& app, CommandContext& ctx);

// The names of the fields under `path` (KIND[.field…]); for completion. Empty when `path`
// names no object.
std::vector<std::string> ExplainFieldNames(std::string_view path);

}  // namespace sbx::cli
