// `sbxctl edit KIND NAME` (also KIND/NAME), as kubectl: opens the object's YAML (as
// `get -o yaml` prints it, under a comment header) in $SBX_EDITOR, else $EDITOR, else vi — run
// through /bin/sh, so "code --wait" works — and writes what was saved the way apply writes it
// (object_update.h): the same decoding, defaults, validation and secret-reference rules, a new
// generation when the spec changed. Only metadata.labels, metadata.annotations and spec are
// taken from the file; status and server-set metadata are not the user's to edit.
//
//   - saved unchanged, or emptied: `Edit cancelled, no changes made.`, exit 0;
//   - invalid (a YAML error, an unknown field, a failed validation, another name or kind): the
//     editor opens again on what was saved, with the errors as comments at the top; saved again
//     with no change: `error: Edit cancelled, no valid changes were saved.`, exit 1;
//   - the object changed since it was opened (its resourceVersion): refused, kubectl's
//     `Operation cannot be fulfilled …` message, and the edit is kept in a file it names; exit 1;
//   - the editor fails (non-zero exit): exit 1, nothing written.
// Only the comment lines at the TOP of the file are dropped: a `#` line inside a setup script is
// script. Prints `sandbox/dev edited`. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct EditCommandOptions {
  std::vector<std::string> args;  // KIND NAME or KIND/NAME
};

int RunEdit(CommandContext& ctx, const EditCommandOptions& options);
void AddEditCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
