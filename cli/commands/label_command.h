// `sbxctl label KIND NAME… KEY=VALUE… KEY-… [--overwrite] [--resource-version V]` and
// `sbxctl annotate …` (the same for annotations), as kubectl: also `KIND/NAME…`, `KIND --all`
// and `KIND -l SELECTOR`.
//
// KEY=VALUE sets, KEY- removes. Changing a key that already has another value needs
// --overwrite (`error: 'app' already has a value (demo), and --overwrite is false`). Each object
// is written as apply writes it (object_update.h: same validation, a concurrent change is read
// again); with --resource-version only if it is still at that version. Prints
// `sandbox/dev labeled` (`not labeled` when nothing changed); `annotated` / `not annotated`.
// Any error: exit 1 (objects before it stay changed, as kubectl). Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

enum class MetadataMap { kLabels, kAnnotations };

struct LabelCommandOptions {
  MetadataMap map = MetadataMap::kLabels;
  std::vector<std::string> args;  // KIND NAME… KEY=VALUE… KEY-…, or KIND/NAME…
  bool overwrite = false;         // --overwrite
  bool all = false;               // --all
  std::string selector;           // -l
  std::string resource_version;   // --resource-version
};

int RunLabel(CommandContext& ctx, const LabelCommandOptions& options);
void AddLabelCommand(CLI::App& app, CommandContext& ctx);
void AddAnnotateCommand(CLI::App& app, CommandContext& ctx);

}  // namespace sbx::cli
