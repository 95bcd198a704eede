// `sbxctl migrate --from SOURCE --to DESTINATION`: copies a whole store into an empty one, so an
// installation can move from SQLite to PostgreSQL (issue #17), or back, or to another file.
// SOURCE and DESTINATION are what --db takes: `sqlite:PATH` or a PATH, or a postgres:// URL.
// Every object keeps its uid, resourceVersion, generation, timestamps, finalizers,
// deletionTimestamp and applyset; the inventory (every state, owner uids), the events and the
// AgentTask logs and artifacts are copied too; leases and the change log are not
// (controller/store/store_copy.h).
//
// Refuses, with one line and exit 1, and writes nothing: a SOURCE file that does not exist;
// SOURCE and DESTINATION naming the same store; a DESTINATION that is not empty (naming what it
// holds — merging two stores could give two objects one uid, so there is no --force: empty it or
// pick another); a SOURCE whose sbxd lease is held and not expired (naming the holder; a running
// controller would go on writing to the old store) unless --ignore-lease. The copy is one
// transaction of DESTINATION: an error leaves it as it was. Prints
// `copied 120 objects, 80 inventory records, 340 events, 12 task logs (4,100 lines), 3 artifacts
// from SOURCE to DESTINATION`; with --dry-run the same counts as `would copy …`, after the whole
// copy was rehearsed and rolled back (nothing written; a DESTINATION file that does not exist is
// not created). Database URLs are printed with their password redacted. Not thread-safe.
#pragma once

#include <string>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct MigrateCommandOptions {
  std::string from;  // --from: sqlite:PATH, PATH or postgres://…
  std::string to;    // --to: likewise
  bool dry_run = false;
  bool ignore_lease = false;
};

int RunMigrate(CommandContext& ctx, const MigrateCommandOptions& options);
void AddMigrateCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
