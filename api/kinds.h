// The kind registry: one row per kind of sbx.dev/v1alpha1, and every place that names kinds
// reads it. The manifest's `kind:`, sbxctl's type words (singular, plural, short name, any case),
// the REST collection of the API server and its client, the completion words, the error texts
// that list the kinds, the JSON Schema sbxctl embeds for `explain`, and the per-kind entry points
// of MakeObject, ApplyDefaults and Validate all come from here.
//
// Adding a kind: its types (resources.h: the enumerator, kAllKinds, spec and status), one row
// below (kinds.cc), a schema file manifests/schema/<singular>.schema.json, a reconciler. The
// codec reads and writes a spec or status by its type (codec.cc's Struct<T> field tables), so it
// needs the field table of each new struct and nothing per kind.
// Immutable after static initialisation; thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::api {

struct ValidationOptions;  // api/validation.h

struct KindInfo {
  Kind kind;
  std::string_view name;        // "AgentWorker": the manifest's kind, KindName
  std::string_view singular;    // "agentworker": sbxctl's type word ("agentworker/w")
  std::string_view plural;      // "agentworkers": the API's collection, kubectl's resource name
  std::string_view short_name;  // "aw"
  std::string_view schema;      // "agentworker.schema.json", in manifests/schema/
  // Sets the kind's empty spec and status (MakeObject).
  void (*make)(Object& object);
  // The kind's part of ApplyDefaults, after the namespace is defaulted.
  void (*defaults)(Object& object);
  // The kind's part of Validate, after the metadata passed.
  Status (*validate)(const Object& object, const ValidationOptions& options);
};

// Every kind, in kAllKinds order.
std::span<const KindInfo> Kinds();
const KindInfo& KindInfoOf(Kind kind);
// The kind whose name, singular, plural or short name `word` is, in any case; null if none.
const KindInfo* FindKind(std::string_view word);

// For messages: "Workspace, Sandbox, AgentWorker, AgentTask, GitSource".
std::string KindNameList();
// For messages: "Workspace|ws, Sandbox|sb, …, AgentTask|at or GitSource|gs".
std::string KindWordList();
// For messages: "workspaces, sandboxes, agentworkers, agenttasks, gitsources".
std::string PluralList();

}  // namespace sbx::api
