#include "cli/commands/immutable_fields.h"

#include "cli/commands/command_context.h"

namespace sbx::cli {
namespace {

// "" when nothing the controller refuses changed; else the warning text after "<name>: ".
std::string Compare(const std::string& field_prefix, const api::SandboxSpec& desired,
                    const api::SandboxStatus& created) {
  if (created.sandbox_name.empty()) {
    return "";  // no sandbox yet: anything may change
  }
  const std::string id = api::CreatedSandboxId(created);
  std::string change;
  if (desired.sandbox_id != id) {
    change =
        field_prefix + ".sandboxId changed from \"" + id + "\" to \"" + desired.sandbox_id + "\"";
  } else if (!created.workspace_ref.empty() && desired.workspace_ref != created.workspace_ref) {
    change = field_prefix + ".workspaceRef changed from \"" + created.workspace_ref + "\" to \"" +
             desired.workspace_ref + "\"";
  } else {
    return "";
  }
  return change +
         " after its sandbox was created; the controller refuses it (Synced=False, "
         "reason=ImmutableFieldChanged) and creates or deletes nothing until it is changed back";
}

}  // namespace

std::vector<std::string> ImmutableFieldWarnings(
    controller::Store& store, const std::vector<controller::ApplyResult>& results) {
  std::vector<std::string> warnings;
  for (const controller::ApplyResult& r : results) {
    if (r.action == controller::ApplyAction::kPruned) {
      continue;
    }
    std::string warning;
    if (r.object.kind == api::Kind::kSandbox) {
      // The result carries the stored status: apply writes spec and metadata only.
      api::StatusOr<api::Object> stored = store.Get(r.key);
      if (stored.ok()) {
        warning = Compare("spec", r.object.sandbox_spec(), stored->sandbox_status());
      }
    } else if (r.object.kind == api::Kind::kAgentWorker && r.object.agent_worker_spec().sandbox) {
      // The worker's owned Sandbox is named after it and takes the template's spec.
      api::StatusOr<api::Object> owned =
          store.Get({api::Kind::kSandbox, r.key.namespace_, r.key.name});
      if (owned.ok()) {
        warning =
            Compare("spec.sandbox", *r.object.agent_worker_spec().sandbox, owned->sandbox_status());
      }
    }
    if (!warning.empty()) {
      warnings.push_back(QualifiedName(r.key) + ": " + warning);
    }
  }
  return warnings;
}

}  // namespace sbx::cli
