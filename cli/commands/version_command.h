// `sbxctl version`: the sbxctl version (the CMake project version) and the store schema
// version this build uses; names the database when one exists (without opening or migrating
// it). Not thread-safe.
#pragma once

#include <string_view>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

// "0.1.0".
std::string_view SbxVersion();

int RunVersion(CommandContext& ctx);
void AddVersionCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
