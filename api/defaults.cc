#include "api/defaults.h"

#include <string>

#include "api/kinds.h"

namespace sbx::api {

namespace {

// What a sandbox spec defaults to whatever its name.
void ApplyUnnamedSandboxDefaults(SandboxSpec& spec) {
  if (spec.workspace_ref.empty()) {
    spec.workspace_ref = std::string(kDefaultWorkspaceRef);
  }
  if (spec.power == Power::kOnDemand && !spec.idle_stop.has_value()) {
    spec.idle_stop = kDefaultIdleStop;
  }
}

// An AgentWorker spec's defaults but its inline sandbox's.
void ApplyWorkerDefaults(AgentWorkerSpec& spec) {
  if (spec.workspace_directory.empty()) {
    spec.workspace_directory = std::string(kDefaultWorkspaceDirectory);
  }
  if (spec.executor.command.empty()) {
    spec.executor.command = "codex";
  }
}

}  // namespace

void ApplySandboxDefaults(SandboxSpec& spec, std::string_view namespace_, std::string_view name) {
  ApplyUnnamedSandboxDefaults(spec);
  if (spec.sandbox_id.empty()) {
    spec.sandbox_id = std::string(namespace_) + "-" + std::string(name);
  }
  if (spec.display_name.empty()) {
    spec.display_name = std::string(name);
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
  ApplyWorkerDefaults(spec);
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

// The template's sandbox is each replica's: its id and display name are the replica's, set when
// the replica is made (ApplyDefaults of the AgentWorker), so only the rest is defaulted here.
void DefaultAgentPool(Object& object) {
  AgentWorkerSpec& spec = object.agent_pool_spec().template_.spec;
  ApplyWorkerDefaults(spec);
  if (spec.sandbox.has_value()) {
    ApplyUnnamedSandboxDefaults(*spec.sandbox);
  }
}

// type webhook is the decoded default; nothing else has one.
void DefaultNotifier(Object&) {}

}  // namespace sbx::api
