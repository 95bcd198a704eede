// `sbxctl config`: the contexts of ~/.config/sbx/config.yaml (client_config.h), as kubectl's
// config verbs: get-contexts, current-context, use-context NAME, set-context NAME [--server URL]
// [--token T] [--certificate-authority FILE], delete-context NAME. Tokens are never printed.
// Not thread-safe.
#pragma once

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

void AddConfigCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
