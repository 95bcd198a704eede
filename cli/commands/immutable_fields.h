// Warnings for spec changes the controller will refuse (DESIGN §3): a Sandbox's sandboxId and
// workspaceRef (and those of an AgentWorker's inline template) cannot change once its sandbox
// exists. `apply` stores such a change — the manifest is the user's — and exits 0, but says at
// once what the controller will do with it; `diff` says the same. Stateless; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "controller/store/store.h"

namespace sbx::cli {

// One line per refused change among `results` (as Store::Apply returns them, dry run or not):
// "sandbox/dev: spec.sandboxId changed from \"a\" to \"b\" after its sandbox was created; …".
std::vector<std::string> ImmutableFieldWarnings(
    controller::Store& store, const std::vector<controller::ApplyResult>& results);

}  // namespace sbx::cli
