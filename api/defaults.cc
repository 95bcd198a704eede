#include "api/defaults.h"

#include <string>

#include "api/kinds.h"

namespace sbx::api {

void ApplySandboxDefaults(SandboxSpec& spec, std::string_view namespace_, std::string_view name) {
  if (spec.workspace_ref.empty()) {
    spec.workspace_ref = std::string(kDefaultWorkspaceRef);
  }
  if (spec.sandbox_id.empty()) {
    spec.sandbox_id = std::string(namespace_) + "-" + std::string(name);
  }
  if (spec.display_name.empty()) {
    spec.display_name = std::string(name);
  }
  if (spec.power == Power::kOnDemand && !spec.idle_stop.has_value()) {
    spec.idle_stop = kDefaultIdleStop;
  }
}

void ApplyDefaults(Object& object) {
  ObjectMeta& meta = object.metadata;
  if (meta.namespace_.empty()) {
    meta.namespace_ = std::string(kDefaultNamespace);
  }
  KindInfoOf(object.kind).defaults(object);
}

// ---- Each kind's part (the kind table's entry points) ----------------------------------------

void DefaultWorkspace(Object&) {}

void DefaultSandbox(Object& object) {
  ApplySandboxDefaults(object.sandbox_spec(), object.metadata.namespace_, object.metadata.name);
}

void DefaultAgentWorker(Object& object) {
  AgentWorkerSpec& spec = object.agent_worker_spec();
  if (spec.workspace_directory.empty()) {
    spec.workspace_directory = std::string(kDefaultWorkspaceDirectory);
  }
  if (spec.executor.command.empty()) {
    spec.executor.command = "codex";
  }
  if (spec.sandbox.has_value()) {
    ApplySandboxDefaults(*spec.sandbox, object.metadata.namespace_, object.metadata.name);
  }
}

// timeout 30m and collect[].maxBytes 1Mi are the decoded defaults.
void DefaultAgentTask(Object&) {}

void DefaultGitSource(Object& object) {
  GitSourceSpec& spec = object.git_source_spec();
  if (spec.path.empty()) {
    spec.path = ".";
  }
  if (spec.applyset.empty()) {
    spec.applyset = "gitsource-" + object.metadata.namespace_ + "-" + object.metadata.name;
  }
}

}  // namespace sbx::api
