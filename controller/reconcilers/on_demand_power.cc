#include "controller/reconcilers/on_demand_power.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "api/conditions.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::StatusOr;

const api::Condition* ReadyOf(const Object& o) {
  return api::FindCondition(o.conditions(), condition::kReady);
}

// Reasons of a worker's Ready=False that no amount of running the sandbox fixes: the user has
// to change something. The bring-up showed them; the sandbox may sleep.
bool ConfigurationError(std::string_view why) {
  static constexpr std::array<std::string_view, 13> kReasons = {reason::kIpNotAuthorized,
                                                                reason::kMissingScope,
                                                                reason::kWorkspaceDirectoryMissing,
                                                                reason::kExecutorNotFound,
                                                                reason::kExecutorExitedOnStart,
                                                                reason::kMissingExecutorKey,
                                                                reason::kCredentialsMissing,
                                                                reason::kSecretNotAllowed,
                                                                reason::kPermissionDenied,
                                                                reason::kUnauthenticated,
                                                                reason::kInvalidSpec,
                                                                reason::kFailedPrecondition,
                                                                reason::kSandboxNameConflict};
  return std::find(kReasons.begin(), kReasons.end(), why) != kReasons.end();
}

// The worker's Ready=False when it names a configuration error; else null.
const api::Condition* DiagnosedError(const Object& worker) {
  const api::Condition* ready = ReadyOf(worker);
  return ready != nullptr && ready->status == ConditionStatus::kFalse &&
                 ConfigurationError(ready->reason)
             ? ready
             : nullptr;
}

// A task that will still run a turn (or is running one).
bool WantsTurn(const Object& task) {
  const api::TaskPhase phase = task.agent_task_status().phase;
  if (api::IsFinished(phase)) {
    return false;
  }
  const bool submitted = phase == api::TaskPhase::kSubmitted || phase == api::TaskPhase::kRunning;
  // Cancelled before submission: ends without a turn.
  return submitted ||
         task.metadata.annotations.count(std::string(api::kCancelRequestedAnnotation)) == 0;
}

}  // namespace

bool IsOnDemand(const Object& sandbox) {
  return sandbox.kind == api::Kind::kSandbox &&
         sandbox.sandbox_spec().power == api::Power::kOnDemand;
}

std::string SandboxNameOf(const Object& worker) {
  const auto& spec = worker.agent_worker_spec();
  return spec.sandbox ? worker.metadata.name : spec.sandbox_ref;
}

bool BroughtUp(const Object& worker) {
  const auto& st = worker.agent_worker_status();
  if (worker.agent_worker_spec().session == api::SessionMode::kPerTask) {
    // No standing session to connect: each task launches its own executor. The bring-up is the
    // probe that looked for the executor's command inside the sandbox (found or not: a missing
    // one is a configuration error, shown in Ready).
    if (!st.executor.last_probe_at.empty()) {
      return true;
    }
  } else if (!st.session_id.empty() && !st.environment_id.empty() &&
             st.connected_environment_id == st.environment_id) {
    return true;
  }
  return DiagnosedError(worker) != nullptr;
}

bool SessionNeedsExecutor(const openai::Session& session) {
  const bool connection_wanted = std::any_of(
      session.required_actions.begin(), session.required_actions.end(),
      [](const openai::RequiredAction& a) { return a.type_raw == "environment_connection"; });
  return connection_wanted || session.status == openai::SessionStatus::kInProgress ||
         session.status == openai::SessionStatus::kRequiresAction;
}

SandboxPower PowerStateOf(const Object& sandbox) {
  if (!IsOnDemand(sandbox)) {
    return SandboxPower::kAwake;
  }
  const api::Condition* ready = ReadyOf(sandbox);
  if (ready == nullptr) {
    return SandboxPower::kWaking;
  }
  if (ready->reason == reason::kSleeping || ready->reason == reason::kStopping) {
    return SandboxPower::kAsleep;
  }
  if (ready->status == ConditionStatus::kTrue && sandbox.sandbox_status().state == "RUNNING") {
    return SandboxPower::kAwake;
  }
  return SandboxPower::kWaking;
}

StatusOr<SandboxDemand> DemandOf(Store& store, const Object& sandbox) {
  SandboxDemand demand;
  ListOptions same_ns;
  same_ns.namespace_ = sandbox.metadata.namespace_;
  same_ns.kind = api::Kind::kAgentWorker;
  ASSIGN_OR_RETURN(std::vector<Object> workers, store.List(same_ns));
  std::erase_if(workers, [&](const Object& w) {
    return SandboxNameOf(w) != sandbox.metadata.name || !w.metadata.deletion_timestamp.empty();
  });
  if (workers.empty()) {
    return demand;
  }
  std::vector<std::string> names;
  for (const Object& w : workers) {
    names.push_back(w.metadata.name);
    demand.sources.push_back(api::KeyOf(w));
    if (!demand.why.empty()) {
      continue;
    }
    if (!BroughtUp(w)) {
      demand.why = "bring-up of AgentWorker " + w.metadata.name;
    } else if (!w.agent_worker_status().wake_requested_at.empty()) {
      demand.why = "the session of AgentWorker " + w.metadata.name + " needs its executor";
    }
  }
  same_ns.kind = api::Kind::kAgentTask;
  same_ns.unfinished_only = true;  // a finished task wants no turn (WantsTurn)
  ASSIGN_OR_RETURN(std::vector<Object> tasks, store.List(same_ns));
  for (const Object& task : tasks) {
    const std::string worker = api::AssignedWorker(task);
    if (!WantsTurn(task) || std::find(names.begin(), names.end(), worker) == names.end()) {
      continue;
    }
    demand.sources.push_back(api::KeyOf(task));
    if (demand.why.empty()) {
      demand.why = "AgentTask " + task.metadata.name + " for AgentWorker " + worker;
    }
  }
  return demand;
}

void OnDemandPower::Attach(WakeFn wake, DependencyIndex* dependencies) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
  dependencies_ = dependencies;
}

StatusOr<SandboxDemand> OnDemandPower::Demand(const Object& sandbox) {
  ASSIGN_OR_RETURN(SandboxDemand demand, DemandOf(store_, sandbox));
  std::lock_guard lock(mu_);
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(api::KeyOf(sandbox), demand.sources);
  }
  return demand;
}

StatusOr<std::string> OnDemandPower::BeginStop(const Object& sandbox) {
  const api::ObjectKey key = api::KeyOf(sandbox);
  {
    std::lock_guard lock(mu_);
    if (holds_[key] > 0) {
      return std::string("a task is being submitted");
    }
    stopping_[key] = true;
  }
  // A submission that took its Hold before the announcement has written its phase by now (the
  // Hold outlives the write): read again.
  StatusOr<SandboxDemand> demand = DemandOf(store_, sandbox);
  if (!demand.ok() || !demand->why.empty()) {
    EndStop(key);
    RETURN_IF_ERROR(demand.status());
    return demand->why;
  }
  return std::string();
}

void OnDemandPower::EndStop(const api::ObjectKey& sandbox) {
  std::lock_guard lock(mu_);
  stopping_.erase(sandbox);
}

OnDemandPower::Hold::Hold(OnDemandPower* power, api::ObjectKey sandbox)
    : power_(power), sandbox_(std::move(sandbox)) {}

OnDemandPower::Hold::Hold(Hold&& other) noexcept
    : power_(std::exchange(other.power_, nullptr)), sandbox_(std::move(other.sandbox_)) {}

OnDemandPower::Hold& OnDemandPower::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    power_ = std::exchange(other.power_, nullptr);
    sandbox_ = std::move(other.sandbox_);
  }
  return *this;
}

OnDemandPower::Hold::~Hold() { Release(); }

void OnDemandPower::Hold::Release() {
  if (power_ == nullptr) {
    return;
  }
  std::lock_guard lock(power_->mu_);
  if (--power_->holds_[sandbox_] <= 0) {
    power_->holds_.erase(sandbox_);
  }
  power_ = nullptr;
}

std::optional<OnDemandPower::Hold> OnDemandPower::TryHold(const api::ObjectKey& sandbox) {
  std::lock_guard lock(mu_);
  if (stopping_.count(sandbox) != 0) {
    return std::nullopt;
  }
  ++holds_[sandbox];
  return std::optional<Hold>(std::in_place, this, sandbox);
}

void OnDemandPower::Wake(const api::ObjectKey& sandbox) {
  WakeFn wake;
  {
    std::lock_guard lock(mu_);
    wake = wake_;
  }
  if (wake) {
    wake(sandbox);
  }
}

TaskAdmission AdmitTask(OnDemandPower* power, const Object& worker, const Object& sandbox) {
  TaskAdmission a;
  const api::Condition* ready = ReadyOf(worker);
  // A PerTask worker holds no standing session: each task opens its own (task_session.h).
  const bool per_task = worker.agent_worker_spec().session == api::SessionMode::kPerTask;
  const bool worker_ready = ready != nullptr && ready->status == ConditionStatus::kTrue &&
                            (per_task || !worker.agent_worker_status().session_id.empty());
  const std::string name = worker.metadata.name;
  if (!IsOnDemand(sandbox)) {
    a.gate = worker_ready ? TaskGate::kSubmit : TaskGate::kWaitForWorker;
    a.message = worker_ready ? "" : "worker " + name + " is not Ready";
    return a;
  }
  const bool awake = worker_ready && ready->reason != reason::kSleeping &&
                     ready->reason != reason::kWaking &&
                     sandbox.sandbox_status().state == "RUNNING";
  if (awake) {
    if (power == nullptr) {
      a.gate = TaskGate::kSubmit;
      return a;
    }
    a.hold = power->TryHold(api::KeyOf(sandbox));
    if (a.hold) {
      a.gate = TaskGate::kSubmit;
      return a;
    }
    a.gate = TaskGate::kWaitForWake;
    a.message = "sandbox " + sandbox.metadata.name + " of worker " + name +
                " is being stopped; it is started again once STOPPED";
  } else if (!BroughtUp(worker)) {
    a.gate = TaskGate::kWaitForWorker;
    a.message = "worker " + name + " is not Ready";
    return a;
  } else if (const api::Condition* error = DiagnosedError(worker)) {
    // Waking will not help until the user fixes it: say what the worker says. The sandbox is
    // still woken (the task is its demand), so the worker looks again on a fresh boot.
    a.gate = TaskGate::kWaitForWorker;
    a.message = "worker " + name + " is not Ready (" + error->reason + ": " + error->message + ")";
  } else {
    a.gate = TaskGate::kWaitForWake;
    a.message = "sandbox " + sandbox.metadata.name + " of worker " + name +
                " is being woken (power OnDemand); the input is sent once the executor is "
                "connected";
  }
  if (power != nullptr) {
    power->Wake(api::KeyOf(sandbox));
  }
  return a;
}

}  // namespace sbx::controller
