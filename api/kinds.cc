#include "api/kinds.h"

#include "api/defaults.h"
#include "api/text.h"
#include "api/validation.h"

namespace sbx::api {

namespace {

template <typename Spec, typename KindStatus>
void Make(Object& object) {
  object.spec = Spec{};
  object.status = KindStatus{};
}

// One row per kind, in kAllKinds order (kinds_test checks both).
const KindInfo kKinds[] = {
    {Kind::kWorkspace, "Workspace", "workspace", "workspaces", "ws", "workspace.schema.json",
     &Make<WorkspaceSpec, WorkspaceStatus>, &DefaultWorkspace, &ValidateWorkspaceObject},
    {Kind::kSandbox, "Sandbox", "sandbox", "sandboxes", "sb", "sandbox.schema.json",
     &Make<SandboxSpec, SandboxStatus>, &DefaultSandbox, &ValidateSandboxObject},
    {Kind::kAgentWorker, "AgentWorker", "agentworker", "agentworkers", "aw",
     "agentworker.schema.json", &Make<AgentWorkerSpec, AgentWorkerStatus>, &DefaultAgentWorker,
     &ValidateAgentWorkerObject},
    {Kind::kAgentTask, "AgentTask", "agenttask", "agenttasks", "at", "agenttask.schema.json",
     &Make<AgentTaskSpec, AgentTaskStatus>, &DefaultAgentTask, &ValidateAgentTaskObject},
    {Kind::kGitSource, "GitSource", "gitsource", "gitsources", "gs", "gitsource.schema.json",
     &Make<GitSourceSpec, GitSourceStatus>, &DefaultGitSource, &ValidateGitSourceObject},
    {Kind::kAgentPool, "AgentPool", "agentpool", "agentpools", "ap", "agentpool.schema.json",
     &Make<AgentPoolSpec, AgentPoolStatus>, &DefaultAgentPool, &ValidateAgentPoolObject},
    {Kind::kNotifier, "Notifier", "notifier", "notifiers", "nt", "notifier.schema.json",
     &Make<NotifierSpec, NotifierStatus>, &DefaultNotifier, &ValidateNotifierObject},
};

// The `field` of every row, joined with ", " (the last with `last_separator`).
std::string Join(std::string (*field)(const KindInfo&), std::string_view last_separator = ", ") {
  std::string out;
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    out += i == 0 ? "" : i + 1 == std::size(kKinds) ? std::string(last_separator) : ", ";
    out += field(kKinds[i]);
  }
  return out;
}

}  // namespace

std::span<const KindInfo> Kinds() { return kKinds; }

const KindInfo& KindInfoOf(Kind kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind == kind) {
      return info;
    }
  }
  return kKinds[0];  // unreachable for a valid enumerator: kinds_test covers every one
}

const KindInfo* FindKind(std::string_view word) {
  // singular, plural and short name are lower case (kinds_test checks it).
  const std::string lower = Lower(word);
  for (const KindInfo& info : kKinds) {
    if (lower == info.singular || lower == info.plural || lower == info.short_name) {
      return &info;
    }
  }
  return nullptr;
}

std::string KindNameList() {
  return Join([](const KindInfo& k) { return std::string(k.name); });
}

std::string KindWordList() {
  return Join(
      [](const KindInfo& k) { return std::string(k.name) + "|" + std::string(k.short_name); },
      " or ");
}

std::string PluralList() {
  return Join([](const KindInfo& k) { return std::string(k.plural); });
}

}  // namespace sbx::api
