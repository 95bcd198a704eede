#include "api/resources.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "api/kinds.h"
#include "api/text.h"

namespace sbx::api {
namespace {

[[noreturn]] void KindMismatch(const Object& o, std::string_view wanted) {
  std::fprintf(stderr, "sbx: fatal: object %s is a %s, not a %.*s\n", o.metadata.name.c_str(),
               std::string(KindName(o.kind)).c_str(), static_cast<int>(wanted.size()),
               wanted.data());
  std::abort();
}

// T is the alternative type without const; V may be const.
template <typename T, typename V>
auto& GetAs(V& v, const Object& o, std::string_view wanted) {
  if (auto* p = std::get_if<T>(&v)) {
    return *p;
  }
  KindMismatch(o, wanted);
}

}  // namespace

std::string_view KindName(Kind kind) { return KindInfoOf(kind).name; }

StatusOr<Kind> ParseKind(std::string_view text) {
  if (const KindInfo* info = FindKind(text)) {
    return info->kind;
  }
  return InvalidArgumentError("unknown kind \"" + std::string(text) + "\" (expected " +
                              KindWordList() + ")");
}

std::string_view ConditionStatusName(ConditionStatus s) {
  switch (s) {
    case ConditionStatus::kTrue:
      return "True";
    case ConditionStatus::kFalse:
      return "False";
    case ConditionStatus::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

const SandboxSpec& Object::sandbox_spec() const {
  return GetAs<SandboxSpec>(spec, *this, "Sandbox");
}
SandboxSpec& Object::sandbox_spec() { return GetAs<SandboxSpec>(spec, *this, "Sandbox"); }
const AgentWorkerSpec& Object::agent_worker_spec() const {
  return GetAs<AgentWorkerSpec>(spec, *this, "AgentWorker");
}
AgentWorkerSpec& Object::agent_worker_spec() {
  return GetAs<AgentWorkerSpec>(spec, *this, "AgentWorker");
}
const WorkspaceSpec& Object::workspace_spec() const {
  return GetAs<WorkspaceSpec>(spec, *this, "Workspace");
}
WorkspaceSpec& Object::workspace_spec() { return GetAs<WorkspaceSpec>(spec, *this, "Workspace"); }
const SandboxStatus& Object::sandbox_status() const {
  return GetAs<SandboxStatus>(status, *this, "Sandbox");
}
SandboxStatus& Object::sandbox_status() { return GetAs<SandboxStatus>(status, *this, "Sandbox"); }
const AgentWorkerStatus& Object::agent_worker_status() const {
  return GetAs<AgentWorkerStatus>(status, *this, "AgentWorker");
}
AgentWorkerStatus& Object::agent_worker_status() {
  return GetAs<AgentWorkerStatus>(status, *this, "AgentWorker");
}
const WorkspaceStatus& Object::workspace_status() const {
  return GetAs<WorkspaceStatus>(status, *this, "Workspace");
}
WorkspaceStatus& Object::workspace_status() {
  return GetAs<WorkspaceStatus>(status, *this, "Workspace");
}

const AgentTaskSpec& Object::agent_task_spec() const {
  return GetAs<AgentTaskSpec>(spec, *this, "AgentTask");
}
AgentTaskSpec& Object::agent_task_spec() { return GetAs<AgentTaskSpec>(spec, *this, "AgentTask"); }
const AgentTaskStatus& Object::agent_task_status() const {
  return GetAs<AgentTaskStatus>(status, *this, "AgentTask");
}
AgentTaskStatus& Object::agent_task_status() {
  return GetAs<AgentTaskStatus>(status, *this, "AgentTask");
}

const GitSourceSpec& Object::git_source_spec() const {
  return GetAs<GitSourceSpec>(spec, *this, "GitSource");
}
GitSourceSpec& Object::git_source_spec() { return GetAs<GitSourceSpec>(spec, *this, "GitSource"); }
const GitSourceStatus& Object::git_source_status() const {
  return GetAs<GitSourceStatus>(status, *this, "GitSource");
}
GitSourceStatus& Object::git_source_status() {
  return GetAs<GitSourceStatus>(status, *this, "GitSource");
}
const AgentPoolSpec& Object::agent_pool_spec() const {
  return GetAs<AgentPoolSpec>(spec, *this, "AgentPool");
}
AgentPoolSpec& Object::agent_pool_spec() { return GetAs<AgentPoolSpec>(spec, *this, "AgentPool"); }
const AgentPoolStatus& Object::agent_pool_status() const {
  return GetAs<AgentPoolStatus>(status, *this, "AgentPool");
}
AgentPoolStatus& Object::agent_pool_status() {
  return GetAs<AgentPoolStatus>(status, *this, "AgentPool");
}
const NotifierSpec& Object::notifier_spec() const {
  return GetAs<NotifierSpec>(spec, *this, "Notifier");
}
NotifierSpec& Object::notifier_spec() { return GetAs<NotifierSpec>(spec, *this, "Notifier"); }
const NotifierStatus& Object::notifier_status() const {
  return GetAs<NotifierStatus>(status, *this, "Notifier");
}
NotifierStatus& Object::notifier_status() {
  return GetAs<NotifierStatus>(status, *this, "Notifier");
}

std::string_view NotifierTypeName(NotifierType type) {
  switch (type) {
    case NotifierType::kWebhook:
      return "webhook";
    case NotifierType::kSlack:
      return "slack";
  }
  return "webhook";
}

StatusOr<NotifierType> ParseNotifierType(std::string_view text) {
  for (NotifierType type : {NotifierType::kWebhook, NotifierType::kSlack}) {
    if (text == NotifierTypeName(type)) {
      return type;
    }
  }
  return InvalidArgumentError("unsupported notifier type \"" + std::string(text) +
                              "\" (expected webhook|slack)");
}

bool IsNotifierEvent(std::string_view reason) {
  return std::find(std::begin(kNotifierEvents), std::end(kNotifierEvents), reason) !=
         std::end(kNotifierEvents);
}

std::string_view TaskPhaseName(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kPending:
      return "Pending";
    case TaskPhase::kQueued:
      return "Queued";
    case TaskPhase::kSubmitted:
      return "Submitted";
    case TaskPhase::kRunning:
      return "Running";
    case TaskPhase::kSucceeded:
      return "Succeeded";
    case TaskPhase::kFailed:
      return "Failed";
    case TaskPhase::kCancelled:
      return "Cancelled";
    case TaskPhase::kTimedOut:
      return "TimedOut";
  }
  return "Unknown";
}

bool IsFinished(TaskPhase phase) {
  return phase == TaskPhase::kSucceeded || phase == TaskPhase::kFailed ||
         phase == TaskPhase::kCancelled || phase == TaskPhase::kTimedOut;
}

bool RetriesOn(const AgentTaskSpec& spec, RetryOn kind) {
  if (!spec.retry_on) {
    return kind == RetryOn::kInfrastructureFailure;
  }
  return std::find(spec.retry_on->begin(), spec.retry_on->end(), kind) != spec.retry_on->end();
}

const std::vector<Condition>& Object::conditions() const {
  return std::visit([](const auto& s) -> const std::vector<Condition>& { return s.conditions; },
                    status);
}
std::vector<Condition>& Object::conditions() {
  return std::visit([](auto& s) -> std::vector<Condition>& { return s.conditions; }, status);
}

Object MakeObject(Kind kind, std::string name, std::string namespace_) {
  Object o;
  o.kind = kind;
  o.metadata.name = std::move(name);
  o.metadata.namespace_ = std::move(namespace_);
  KindInfoOf(kind).make(o);
  return o;
}

std::string ObjectKey::ToString() const {
  return std::string(KindName(kind)) + "/" + namespace_ + "/" + name;
}

std::string CreatedSandboxId(const SandboxStatus& status) {
  const size_t slash = status.sandbox_name.find('/');
  return slash == std::string::npos ? status.sandbox_name : status.sandbox_name.substr(slash + 1);
}

StatusOr<SandboxIdentity> CreatedSandbox(const Object& sandbox) {
  const SandboxStatus& status = sandbox.sandbox_status();
  if (status.sandbox_name.empty()) {
    return FailedPreconditionError(
        "sandbox " + sandbox.metadata.name +
        " has not been created by sbx yet (status.sandboxName is empty)");
  }
  return SandboxIdentity{
      status.workspace_ref.empty() ? std::string(kDefaultWorkspaceRef) : status.workspace_ref,
      CreatedSandboxId(status)};
}

SandboxIdentity PlannedSandbox(const Object& sandbox) {
  StatusOr<SandboxIdentity> created = CreatedSandbox(sandbox);
  if (created.ok()) {
    return *std::move(created);
  }
  const SandboxSpec& spec = sandbox.sandbox_spec();
  return SandboxIdentity{spec.workspace_ref, spec.sandbox_id};
}

ObjectKey KeyOf(const Object& object) {
  return ObjectKey{object.kind, object.metadata.namespace_, object.metadata.name};
}

bool MatchesLabels(const Object& object, const std::map<std::string, std::string>& selector) {
  for (const auto& [label, value] : selector) {
    auto it = object.metadata.labels.find(label);
    if (it == object.metadata.labels.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

std::string AssignedWorker(const Object& task) {
  const AgentTaskStatus& st = task.agent_task_status();
  return !st.worker.empty() ? st.worker : task.agent_task_spec().worker_ref;
}

bool HasFinished(const Object& object) {
  return object.kind == Kind::kAgentTask && IsFinished(object.agent_task_status().phase);
}

const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type) {
  for (const Condition& c : conditions) {
    if (c.type == type) {
      return &c;
    }
  }
  return nullptr;
}

ConditionStatus ConditionStatusOf(const std::vector<Condition>& conditions, std::string_view type) {
  const Condition* c = FindCondition(conditions, type);
  return c != nullptr ? c->status : ConditionStatus::kUnknown;
}

bool SetCondition(std::vector<Condition>& conditions, Condition condition, std::string_view now) {
  for (Condition& c : conditions) {
    if (c.type != condition.type) {
      continue;
    }
    condition.last_transition_time =
        c.status == condition.status ? c.last_transition_time : std::string(now);
    if (c == condition) {
      return false;
    }
    c = std::move(condition);
    return true;
  }
  condition.last_transition_time = std::string(now);
  conditions.push_back(std::move(condition));
  return true;
}

}  // namespace sbx::api
