#include "api/kinds.h"

#include <algorithm>
#include <cctype>

#include "api/defaults.h"
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
};

bool SameWord(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
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
  for (const KindInfo& info : kKinds) {
    if (SameWord(word, info.name) || SameWord(word, info.plural) ||
        SameWord(word, info.short_name)) {
      return &info;
    }
  }
  return nullptr;
}

std::string KindNameList() {
  std::string out;
  for (const KindInfo& info : kKinds) {
    out += (out.empty() ? "" : ", ") + std::string(info.name);
  }
  return out;
}

std::string KindWordList() {
  std::string out;
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    const std::string_view sep = i == 0 ? "" : i + 1 == std::size(kKinds) ? " or " : ", ";
    out += std::string(sep) + std::string(kKinds[i].name) + "|" + std::string(kKinds[i].short_name);
  }
  return out;
}

std::string PluralList() {
  std::string out;
  for (const KindInfo& info : kKinds) {
    out += (out.empty() ? "" : ", ") + std::string(info.plural);
  }
  return out;
}

}  // namespace sbx::api
