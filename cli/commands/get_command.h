// `sbxctl get KIND[,KIND…] [NAME…] [-n NS|-A] [-l k=v,…]
//   [-o wide|yaml|json|name|jsonpath=TEMPLATE|custom-columns=NAME:PATH,…] [--sort-by PATH]
//   [--no-headers] [-w]`.
//
// Also accepts KIND/NAME… . Prints a kubectl-style table by default (see object_printer.h).
// A named object that does not exist prints `Error from server (NotFound): sandboxes "foo" not
// found` and exits 1; an empty list prints `No resources found in default namespace.` on
// stderr and exits 0. -w prints the current state, then one row per change (of any process),
// until SIGINT/SIGTERM or --timeout; both exit 0. --sort-by sorts the list (with -w, the first
// listing); a path that selects nothing in any object is an error, exit 1.
//
// `sbxctl get inventory [ID…]` lists the external resources sbx recorded creating (the store's
// inventory: WORKSPACE, TYPE, ID, STATE Intent|Live|Deleting|Abandoned, OWNER, AGE);
// `sbxctl get abandoned [ID…]` only those it gave up deleting (e.g. agent sessions the OpenAI
// service refuses to delete), which an operator must clean up by hand. Filtered by the owner's
// namespace (-n, -A); -o wide|json|name. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct GetCommandOptions {
  std::vector<std::string> args;            // KIND [NAME…] or KIND/NAME…
  std::string selector;                     // -l
  std::string output;                       // -o (see object_printer.h)
  std::string sort_by;                      // --sort-by: a JSONPath
  bool allow_missing_template_keys = true;  // --allow-missing-template-keys
  bool no_headers = false;                  // --no-headers
  bool watch = false;                       // -w
  std::string timeout = "0";                // --timeout for -w; 0 = until interrupted
};

int RunGet(CommandContext& ctx, const GetCommandOptions& options);
void AddGetCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
