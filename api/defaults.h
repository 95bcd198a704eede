// Defaulting of sbx objects: fills in what a manifest may leave out, before validation and
// before the object is stored (sbxctl apply: decode → ApplyDefaults → Validate → store).
//
// Defaults (idempotent; a set field is never changed):
//   metadata.namespace          "default"
//   Sandbox  workspaceRef       "default"
//            sandboxId          "<namespace>-<name>" (deterministic: a retried create is
//                               idempotent, DESIGN §3)
//            displayName        the object name, so the sandbox is recognisable in the
//                               Databricks UI instead of showing an API-chosen name
//            setup[].timeout    5m (already the decoded default; an explicit 0 is left for
//                               validation to reject)
//   AgentWorker workspaceDirectory "/home/sandbox-agent/workspace", executor.command "codex";
//            an inline sandbox template gets the Sandbox defaults for the Sandbox the worker
//            owns, which is named after the worker (sandboxId "<namespace>-<worker name>").
//   GitSource path "." , applyset "gitsource-<namespace>-<name>" (interval 1m is the decoded
//            default)
//   Notifier nothing (type webhook is the decoded default)
// Stateless functions; thread-safe.
#pragma once

#include <string_view>

#include "api/resources.h"

namespace sbx::api {

void ApplyDefaults(Object& object);

// The Sandbox defaults for a sandbox named `name` in `namespace_` (also used for the Sandbox
// an AgentWorker owns through its inline template).
void ApplySandboxDefaults(SandboxSpec& spec, std::string_view namespace_, std::string_view name);

// Each kind's part of ApplyDefaults, after the namespace (the kind table's entry points,
// api/kinds.h).
void DefaultWorkspace(Object& object);
void DefaultSandbox(Object& object);
void DefaultAgentWorker(Object& object);
void DefaultAgentTask(Object& object);
void DefaultGitSource(Object& object);
void DefaultAgentPool(Object& object);
void DefaultNotifier(Object& object);

}  // namespace sbx::api
