#include "api/defaults.h"

#include <string>

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
  switch (object.kind) {
    case Kind::kWorkspace:
      break;
    case Kind::kSandbox:
      ApplySandboxDefaults(object.sandbox_spec(), meta.namespace_, meta.name);
      break;
    case Kind::kAgentWorker: {
      AgentWorkerSpec& spec = object.agent_worker_spec();
      if (spec.workspace_directory.empty()) {
        spec.workspace_directory = std::string(kDefaultWorkspaceDirectory);
      }
      if (spec.executor.command.empty()) {
        spec.executor.command = "codex";
      }
      if (spec.sandbox.has_value()) {
        ApplySandboxDefaults(*spec.sandbox, meta.namespace_, meta.name);
      }
      break;
    }
    case Kind::kAgentTask:
      break;  // timeout 30m and collect[].maxBytes 1Mi are the decoded defaults
    case Kind::kGitSource: {
      GitSourceSpec& spec = object.git_source_spec();
      if (spec.path.empty()) {
        spec.path = ".";
      }
      if (spec.applyset.empty()) {
        spec.applyset = "gitsource-" + meta.namespace_ + "-" + meta.name;
      }
      break;
    }
  }
}

}  // namespace sbx::api
