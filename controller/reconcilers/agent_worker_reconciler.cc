#include "controller/reconcilers/agent_worker_reconciler.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "api/conditions.h"
#include "api/defaults.h"
#include "controller/base/classify_error.h"
#include "controller/base/inline_wait.h"
#include "controller/reconcilers/internal/agent_worker_target.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/internal/worker_fingerprints.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/reconcile_skeleton.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusCode;
using api::StatusOr;
using reconcilers_internal::AgentHash;
using reconcilers_internal::CreateOwned;
using reconcilers_internal::ExecutorSpecHash;
using reconcilers_internal::OwnedBy;
using reconcilers_internal::PacedOut;
using std::chrono::milliseconds;

}  // namespace

AgentWorkerReconciler::AgentWorkerReconciler(Store& store, CloudClients& clouds, Clock& clock,
                                             DependencyIndex* dependencies,
                                             AgentWorkerReconcilerOptions options)
    : store_(store),
      clouds_(clouds),
      clock_(clock),
      dependencies_(dependencies),
      events_(store, clock),
      options_(std::move(options)),
      sessions_(store, events_, clock),
      executor_(options_.boot_marker),
      schedule_(options_.schedule) {}

StatusOr<ReconcileResult> AgentWorkerReconciler::Reconcile(const api::ObjectKey& key,
                                                           std::stop_token stop) {
  ReconcileSteps<Target> steps;
  steps.prepare = [this](Target& t) {
    std::lock_guard lock(mu_);
    t.cache = caches_[t.key()];
    if (options_.wake_hints != nullptr && options_.wake_hints->Take(t.key())) {
      t.woken = true;
      t.cache.last_check.reset();  // the environment check is due at once
    }
  };
  steps.converge = [this](Target& t) { return Converge(t); };
  steps.finalize = [this](Target& t) { return Finalize(t); };
  steps.record_outcome = [this](Target& t, const Status& status) {
    RecordOutcome(t, status);
    std::lock_guard lock(mu_);
    caches_[t.key()] = t.cache;
  };
  steps.dependencies = dependencies_;
  steps.forget = [this](const api::ObjectKey& gone) {
    std::lock_guard lock(mu_);
    caches_.erase(gone);
  };
  return RunReconcile(store_, key, stop, steps);
}

// Synced says whether this pass could observe and act; Ready changes only on evidence. A
// transient error (a 503, a timeout, a probe that could not run) leaves Ready as the last pass
// found it until `failure_threshold` of them in a row; a terminal one sets it at once. Whatever
// the pass did, Ready is True whenever the four conditions it is made of are (it can never be
// False while they all are True). Secrets in messages (an executor that prints its key) are
// scrubbed by the ScrubbingStore sbxd writes through.
void AgentWorkerReconciler::RecordOutcome(Target& t, const Status& status) {
  if (status.ok()) {
    t.cache.failed_observations = 0;
    // A Sandbox whose own view is stale (its workspace's LIST sweeps fail) makes ours stale too.
    const api::Condition* sandbox = api::FindCondition(t.sandbox.conditions(), condition::kSynced);
    if (sandbox != nullptr && sandbox->status == ConditionStatus::kFalse) {
      Set(t, condition::kSynced, ConditionStatus::kFalse, sandbox->reason,
          "Sandbox " + t.sandbox.metadata.name + ": " + sandbox->message);
    } else {
      Set(t, condition::kSynced, ConditionStatus::kTrue, reason::kSynced, "");
    }
  } else {
    const ErrorClass error = ClassifyError(status);
    const std::string message = ConditionMessage(status);
    Set(t, condition::kSynced, ConditionStatus::kFalse, error.reason, message);
    if (!error.transient() || ++t.cache.failed_observations >= options_.failure_threshold) {
      Set(t, condition::kReady, ConditionStatus::kFalse, error.reason, message);
      return;
    }
  }
  for (std::string_view part : {condition::kSandboxReady, condition::kSessionReady,
                                condition::kExecutorRunning, condition::kExecutorConnected}) {
    if (api::ConditionStatusOf(t.status().conditions, part) != ConditionStatus::kTrue) {
      return;
    }
  }
  if (api::ConditionStatusOf(t.before().conditions, condition::kReady) != ConditionStatus::kTrue) {
    Milestone(options_.milestone, t.key(), "ready");
  }
  Set(t, condition::kReady, ConditionStatus::kTrue, reason::kReady, "executor connected");
}

StatusOr<ReconcileResult> AgentWorkerReconciler::Converge(Target& t) {
  // 1. The sandbox: nothing further happens until it is Ready.
  ASSIGN_OR_RETURN(std::optional<ReconcileResult> waiting, EnsureSandbox(t));
  if (waiting) {
    return *waiting;
  }
  t.facts = ExecutorFactsOf(t.status(), t.sandbox.sandbox_status().boot_id, t.cache.last_check,
                            t.cache.launched);
  if (t.spec().session == api::SessionMode::kPerTask) {
    return ConvergePerTask(t);
  }

  // 2. The session: created when missing; looked up again only before launching into it (the
  // environment status below reports a session lost later).
  const bool launch_now = ExecutorSchedule::LaunchNow(t.facts);
  const bool fresh =
      !t.cache.fresh_session.empty() && t.cache.fresh_session == t.status().session_id;
  ASSIGN_OR_RETURN(bool new_session, EnsureSession(t, /*verify=*/launch_now && !fresh));
  ASSIGN_OR_RETURN(std::optional<ReconcileResult> replaced, FollowSessionSpec(t, new_session));
  if (replaced) {
    return *replaced;
  }
  Set(t, condition::kSessionReady, ConditionStatus::kTrue, reason::kSessionReady, "");

  // 3. The executor, when nothing of ours can be running: a new session, or none launched since
  // the sandbox last (re)started. Launch at once; the launch script is idempotent and reports
  // what it found, so a probe first would only cost an exec-sync. A running executor launched
  // with another spec.executor (or workspaceDirectory) is relaunched. On a Manager worker a new
  // session is stored first and launched into on the next pass, whose first paced call the
  // launch then is: its wait for a Databricks token goes back to the work queue instead of
  // holding this thread (endpoint_pacing.h TakeOrDefer; issue #30). Where no wait can be given
  // back (sbxd --once) the launch follows in the same pass.
  if (new_session && !InlineWaitOwner().empty()) {
    t.cache.fresh_session = t.status().session_id;
    return ReconcileResult::Continue();
  }
  if (new_session || launch_now || fresh) {
    t.cache.fresh_session.clear();
    return Launch(t, /*relaunch=*/!t.status().executor.launched_at.empty());
  }
  if (ExecutorSpecChanged(t)) {
    return Launch(t, /*relaunch=*/true, /*replace=*/true);
  }

  // 4. The connection, from the cheap OpenAI status, on its cadence: a reconcile woken by
  // something else (our own status write, a resync) spends no call before it is due.
  if (const milliseconds wait = schedule_.UntilStatusCheck(t.facts, clock_.Steady());
      wait > milliseconds(0)) {
    return ReconcileResult::RequeueAfter(wait);
  }
  // A look at a connection seen by the last one is routine, like the probe below: skipped while
  // the API's calls are paced or a needed call waits out a 429 (a session create, another
  // worker's first look). Skipped or throttled, it changes nothing: the last look still vouches,
  // and the next is due on the cadence. Any other failure is looked at again as a needed look
  // (CheckEnvironment).
  const bool routine = ExecutorSchedule::RoutineStatusCheck(t.facts) && !t.woken;
  StatusOr<openai::Environment> checked = CheckEnvironment(t, routine);
  if (routine && PacedOut(checked.status())) {
    return ReconcileResult::RequeueAfter(schedule_.NextLook(/*connected=*/true));
  }
  ASSIGN_OR_RETURN(openai::Environment env, std::move(checked));
  if (env.status == openai::EnvironmentStatus::kExpired ||
      env.status == openai::EnvironmentStatus::kFailed) {
    return SessionLost(t, env);
  }
  if (IsOnDemand(t.sandbox)) {
    RETURN_IF_ERROR(CheckSession(t));  // keeps the sandbox awake while the session works
  }
  const bool connected = env.status == openai::EnvironmentStatus::kConnected;
  if (schedule_.InConnectGrace(t.facts, connected, clock_.Now())) {
    // Just launched: give it time to connect before looking inside the sandbox.
    t.facts.last_check = t.cache.last_check;
    return ReconcileResult::RequeueAfter(schedule_.DoubtCadence(t.facts));
  }

  // 5. The probe inside the sandbox: when the connection is in doubt, after a new boot, on the
  // probe cadence, and when the service asked for the executor (a webhook) and it is not
  // connected. A connected executor needs no probe to be believed.
  // A probe that only the cadence asks for is routine: it takes a spare token of the command
  // calls or waits for a later pass, so the launches of workers still coming up are never queued
  // behind the looks at those already connected (issue #25). Such a look that fails transiently
  // (skipped, a 503, a 429) changes nothing: the connection still vouches, the look is due again.
  if (schedule_.ProbeDue(t.facts, connected, clock_.Now()) || (t.woken && !connected)) {
    const bool routine = ExecutorSchedule::RoutineProbe(t.facts, connected) && !t.woken;
    StatusOr<ExecutorReport> probed = executor_.Probe(*t.sandboxes, t.executor(), t.stop, routine);
    if (routine && !probed.ok() && ClassifyError(probed.status()).transient() &&
        probed.status().code() != StatusCode::kCancelled) {
      return ReportConnection(t, env, connected);
    }
    RETURN_IF_ERROR(probed.status());
    const ExecutorReport& report = *probed;
    RecordLook(t);
    if (!report.Running(t.status().environment_id)) {
      return HandleDeadExecutor(t, report);
    }
    t.status().executor.pid = report.pid;
  }
  return ReportConnection(t, env, connected);
}

// session: PerTask (DESIGN §8.1): no standing session or executor; each task opens its own
// (task_session.h). The worker is Ready when its sandbox is and the executor's command is found
// there (a probe per boot, after a change of spec.executor and every probe_interval; on an
// OnDemand sandbox only while awake). A standing session left from session: Shared is deleted,
// and its executor stopped.
StatusOr<ReconcileResult> AgentWorkerReconciler::ConvergePerTask(Target& t) {
  if (!t.status().session_id.empty()) {
    executor_.Stop(*t.sandboxes, t.executor(), t.stop);
    RETURN_IF_ERROR(ReplaceSession(t, reason::kPerTask, "session: PerTask"));
    events_.Normal(t.key(), "SessionDeleted",
                   "session: PerTask: the standing session is deleted; each task opens its own");
    t.status().executor = {};
  }
  const std::string per_task = "each task opens its own session and executor";
  Set(t, condition::kSessionReady, ConditionStatus::kTrue, reason::kPerTask, per_task);
  Set(t, condition::kExecutorConnected, ConditionStatus::kUnknown, reason::kPerTask, per_task);
  // The probe looked for the command of status.executor.specHash: a changed spec.executor is
  // looked for at once.
  const std::string spec_hash = ExecutorSpecHash(t.spec());
  const bool due = t.facts.rebooted || !t.facts.last_probe_at ||
                   t.status().executor.spec_hash != spec_hash ||
                   clock_.Now() - *t.facts.last_probe_at >= options_.schedule.probe_interval;
  if (due ||
      api::ConditionStatusOf(t.status().conditions, condition::kReady) != ConditionStatus::kTrue) {
    ASSIGN_OR_RETURN(ExecutorReport report, executor_.Probe(*t.sandboxes, t.executor(), t.stop));
    RecordLook(t);
    t.status().executor.spec_hash = spec_hash;
    // Only the command: the worker's workspaceDirectory is not used, each task works in a
    // directory of its own that its launch creates.
    if (!report.command_found) {
      return ReportMissing(t, report, /*workspace_needed=*/false);
    }
  }
  Set(t, condition::kExecutorRunning, ConditionStatus::kUnknown, reason::kPerTask, per_task);
  Set(t, condition::kReady, ConditionStatus::kTrue, reason::kReady, per_task);
  return ReconcileResult::RequeueAfter(options_.schedule.probe_interval);
}

// sandboxRef → that Sandbox; inline template → a Sandbox named after the worker, owned by it.
// Returns a result while the worker has to wait for it (conditions say why).
StatusOr<std::optional<ReconcileResult>> AgentWorkerReconciler::EnsureSandbox(Target& t) {
  ASSIGN_OR_RETURN(api::ObjectKey sandbox_key, EnsureSandboxObject(t));
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(t.key(), {sandbox_key});
  }
  StatusOr<Object> sandbox = store_.Get(sandbox_key);
  if (sandbox.status().code() == StatusCode::kNotFound) {
    const std::string message =
        "Sandbox " + sandbox_key.namespace_ + "/" + sandbox_key.name + " does not exist";
    Set(t, condition::kSandboxReady, ConditionStatus::kFalse, reason::kSandboxNotFound, message);
    Set(t, condition::kReady, ConditionStatus::kFalse, reason::kSandboxNotFound, message);
    return std::optional(ReconcileResult::Done());  // the dependency index brings us back
  }
  RETURN_IF_ERROR(sandbox.status());
  t.sandbox = *std::move(sandbox);
  if (t.sandbox.sandbox_spec().power == api::Power::kStopped) {
    // Stopped on purpose: no session, no exec-sync (it would fail, or wake it), nothing to
    // diagnose. A change of the Sandbox's power enqueues this worker again.
    const std::string message = "Sandbox " + sandbox_key.name +
                                " has spec.power Stopped; the executor runs once it is Running";
    t.status().executor.pid = 0;
    Set(t, condition::kSandboxReady, ConditionStatus::kFalse, reason::kSandboxStopped, message);
    Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, reason::kSandboxStopped, message);
    Set(t, condition::kExecutorConnected, ConditionStatus::kUnknown, reason::kSandboxStopped,
        message);
    Set(t, condition::kReady, ConditionStatus::kFalse, reason::kSandboxStopped, message);
    return std::optional(ReconcileResult::Done());
  }
  if (IsOnDemand(t.sandbox) && BroughtUp(t.object) &&
      PowerStateOf(t.sandbox) != SandboxPower::kAwake) {
    ASSIGN_OR_RETURN(ReconcileResult asleep, Asleep(t));
    return std::optional(asleep);
  }
  const api::Condition* ready = api::FindCondition(t.sandbox.conditions(), condition::kReady);
  // An OnDemand sandbox is Ready (True, Sleeping) while stopped: usable only once awake.
  if (ready == nullptr || ready->status != ConditionStatus::kTrue ||
      PowerStateOf(t.sandbox) != SandboxPower::kAwake) {
    const std::string message =
        "Sandbox " + sandbox_key.name + " is not Ready" +
        (ready != nullptr ? " (" + ready->reason + ": " + ready->message + ")" : "");
    Set(t, condition::kSandboxReady, ConditionStatus::kFalse, reason::kSandboxNotReady, message);
    Set(t, condition::kReady, ConditionStatus::kFalse, reason::kSandboxNotReady, message);
    if (t.sandbox.sandbox_status().state != "RUNNING") {
      // No process survives a stop: whatever ran there is gone until the next launch.
      t.status().executor.pid = 0;
      Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, reason::kSandboxNotRunning,
          message);
      Set(t, condition::kExecutorConnected, ConditionStatus::kUnknown, reason::kSandboxNotRunning,
          message);
    }
    return std::optional(ReconcileResult::Done());  // a change of the Sandbox enqueues us
  }
  Set(t, condition::kSandboxReady, ConditionStatus::kTrue, reason::kSandboxReady, "");
  ASSIGN_OR_RETURN(t.created, api::CreatedSandbox(t.sandbox));
  const std::string& workspace_ref = t.created.workspace_ref;
  ASSIGN_OR_RETURN(t.sandboxes, clouds_.Sandboxes(t.object.metadata.namespace_, workspace_ref));
  ASSIGN_OR_RETURN(t.agents, clouds_.Agents(t.object.metadata.namespace_, workspace_ref));
  return std::optional<ReconcileResult>();
}

// Power OnDemand, the sandbox asleep (or being woken) after the worker's bring-up: nothing of sbx
// touches the sandbox (no launch, no probe: an exec-sync would count as activity and keep it
// from its sleep). Health comes from the OpenAI side only, on the status cadence: the
// environment (expired or failed → a new session, whose bring-up wakes the sandbox) and the
// session (input sent straight to it asks for the executor → status.wakeRequestedAt, which
// wakes the sandbox); a session: PerTask worker has neither, and makes no call at all.
// Ready=True reason Sleeping: the worker can take work.
StatusOr<ReconcileResult> AgentWorkerReconciler::Asleep(Target& t) {
  const bool waking = PowerStateOf(t.sandbox) == SandboxPower::kWaking;
  const std::string message =
      "Sandbox " + t.sandbox.metadata.name +
      (waking ? " is being started for work (power OnDemand)"
              : " sleeps (power OnDemand); it is started when a task needs it");
  // No process survives a stop: the next start launches the executor anew.
  t.status().executor.pid = 0;
  const std::string_view why = waking ? reason::kWaking : reason::kSleeping;
  Set(t, condition::kSandboxReady, waking ? ConditionStatus::kFalse : ConditionStatus::kTrue, why,
      message);
  Set(t, condition::kExecutorRunning, ConditionStatus::kFalse, reason::kSandboxNotRunning, message);
  Set(t, condition::kExecutorConnected, ConditionStatus::kUnknown, reason::kSandboxNotRunning,
      message);
  Set(t, condition::kReady, waking ? ConditionStatus::kFalse : ConditionStatus::kTrue, why,
      message);
  if (t.spec().session == api::SessionMode::kPerTask) {
    // No standing session to look after: each task opens its own once the sandbox is awake
    // (its wake is a change of the Sandbox, which brings the worker back).
    return ReconcileResult::Done();
  }
  ASSIGN_OR_RETURN(t.agents, clouds_.Agents(t.object.metadata.namespace_,
                                            api::PlannedSandbox(t.sandbox).workspace_ref));
  const milliseconds interval = options_.schedule.status_interval;
  if (t.cache.last_check && clock_.Steady() - *t.cache.last_check < interval) {
    return ReconcileResult::RequeueAfter(
        std::chrono::ceil<milliseconds>(interval - (clock_.Steady() - *t.cache.last_check)));
  }
  ASSIGN_OR_RETURN(openai::Environment env, CheckEnvironment(t));
  if (env.status == openai::EnvironmentStatus::kExpired ||
      env.status == openai::EnvironmentStatus::kFailed) {
    return SessionLost(t, env);
  }
  RETURN_IF_ERROR(CheckSession(t));
  return ReconcileResult::RequeueAfter(interval);
}

// Power OnDemand: whether the session needs its executor (SessionNeedsExecutor), recorded as
// status.wakeRequestedAt — the sandbox is woken, or kept awake, while it is set.
Status AgentWorkerReconciler::CheckSession(Target& t) {
  ASSIGN_OR_RETURN(openai::Session session, t.agents->GetSession(t.status().session_id, t.stop));
  std::string& requested = t.status().wake_requested_at;
  if (!SessionNeedsExecutor(session)) {
    requested.clear();
    return Status();
  }
  if (requested.empty()) {
    requested = FormatRfc3339(clock_.Now());
    if (PowerStateOf(t.sandbox) != SandboxPower::kAwake) {
      events_.Normal(t.key(), "WakeRequested",
                     "session " + session.id + " needs its executor (" + session.status_raw +
                         "); waking Sandbox " + t.sandbox.metadata.name);
    }
  }
  return Status();
}

StatusOr<api::ObjectKey> AgentWorkerReconciler::EnsureSandboxObject(Target& t) {
  const std::string& ns = t.object.metadata.namespace_;
  if (!t.spec().sandbox) {
    return api::ObjectKey{api::Kind::kSandbox, ns, t.spec().sandbox_ref};
  }
  api::ObjectKey key{api::Kind::kSandbox, ns, t.object.metadata.name};
  const api::OwnerReference owner{api::Kind::kAgentWorker, t.object.metadata.name,
                                  t.object.metadata.uid, true};
  StatusOr<Object> existing = store_.Get(key);
  if (existing.ok() && !OwnedBy(*existing, t.object.metadata.uid)) {
    const std::string message = "a Sandbox named " + key.name +
                                " already exists and is not owned by this worker; rename "
                                "the worker or use sandboxRef";
    Set(t, condition::kSandboxReady, ConditionStatus::kFalse, reason::kSandboxNameConflict,
        message);
    return api::FailedPreconditionError(message);
  }
  if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }
  Object desired = api::MakeObject(api::Kind::kSandbox, key.name, ns);
  desired.sandbox_spec() = *t.spec().sandbox;
  api::ApplySandboxDefaults(desired.sandbox_spec(), ns, key.name);
  desired.metadata.labels = {{"sbx.dev/agent-worker", t.object.metadata.name}};
  // Apply writes nothing when the template did not change.
  const bool created = existing.status().code() == StatusCode::kNotFound;
  RETURN_IF_ERROR(CreateOwned(store_, std::move(desired), owner).status());
  if (created) {
    events_.Normal(t.key(), "SandboxCreated", "created Sandbox " + key.name + " from the template");
  }
  return key;
}

// Returns true when a new session was created (or adopted) in this call. `verify`: look the
// recorded session up first (it is about to get an executor).
StatusOr<bool> AgentWorkerReconciler::EnsureSession(Target& t, bool verify) {
  api::AgentWorkerStatus& status = t.status();
  if (!status.session_id.empty() && verify) {
    ASSIGN_OR_RETURN(bool there, sessions_.Verify(t.owner(), *t.agents, status.session_id, t.stop));
    if (!there) {
      status.session_id.clear();
      status.environment_id.clear();
      status.remote_url.clear();
    }
  }
  if (!status.session_id.empty()) {
    return false;
  }
  ASSIGN_OR_RETURN(
      openai::Session session,
      sessions_.Ensure(t.owner(), *t.agents,
                       SessionRequestOf(t.spec().agent, t.spec().workspace_directory), t.stop));
  status.session_id = session.id;
  status.environment_id = session.environment.id;
  status.remote_url = session.environment.remote_url;
  status.executor.pid = 0;  // the executor must (re)connect to the new environment
  Milestone(options_.milestone, t.key(), "session_created");
  return true;
}

// The session follows the spec: agent.model and agent.instructions are updated in place (the API
// can); a new workspaceDirectory replaces the session (the API cannot move an environment), with
// an event saying so. Returns a result when the session was replaced (the next pass creates the
// new one).
StatusOr<std::optional<ReconcileResult>> AgentWorkerReconciler::FollowSessionSpec(
    Target& t, bool new_session) {
  api::AgentWorkerStatus& status = t.status();
  const std::string agent_hash = AgentHash(t.spec().agent);
  if (new_session || status.workspace_directory.empty() || status.agent_hash.empty()) {
    // Made just now with this spec — or by an older sbxd, whose spec we take as it is.
    status.workspace_directory = t.spec().workspace_directory;
    status.agent_hash = agent_hash;
    return std::optional<ReconcileResult>();
  }
  if (status.workspace_directory != t.spec().workspace_directory) {
    const std::string old_session = status.session_id;
    const std::string old_directory = status.workspace_directory;
    RETURN_IF_ERROR(ReplaceSession(t, reason::kSessionReplaced, "spec.workspaceDirectory changed"));
    events_.Normal(t.key(), "SessionReplaced",
                   "spec.workspaceDirectory changed from " + old_directory + " to " +
                       t.spec().workspace_directory +
                       "; the API cannot move a session's environment, so session " + old_session +
                       " was replaced");
    return std::optional(ReconcileResult::Continue());
  }
  if (status.agent_hash != agent_hash) {
    RETURN_IF_ERROR(t.agents
                        ->UpdateSessionAgent(status.session_id, t.spec().agent.model,
                                             t.spec().agent.instructions, t.stop)
                        .status());
    status.agent_hash = agent_hash;
    events_.Normal(t.key(), "SessionUpdated",
                   "agent.model or agent.instructions changed; session " + status.session_id +
                       " updated for the turns to come");
  }
  return std::optional<ReconcileResult>();
}

// The session is of no use any more (its environment expired or failed, or the spec needs a new
// one): delete it (abandoned if the service refuses), so that it neither lingers nor gets
// adopted again, and forget it. The next pass creates a new session and launches into it.
Status AgentWorkerReconciler::ReplaceSession(Target& t, std::string_view why,
                                             const std::string& message) {
  api::AgentWorkerStatus& status = t.status();
  RETURN_IF_ERROR(sessions_.DeleteLost(t.owner(), *t.agents, status.session_id, t.stop));
  status.session_id.clear();
  status.environment_id.clear();
  status.remote_url.clear();
  status.workspace_directory.clear();
  status.agent_hash.clear();
  Set(t, condition::kSessionReady, ConditionStatus::kFalse, why, message);
  return Status();
}

// A running executor launched with another spec.executor (or workspaceDirectory) is replaced.
bool AgentWorkerReconciler::ExecutorSpecChanged(Target& t) {
  const std::string spec_hash = ExecutorSpecHash(t.spec());
  std::string& recorded = t.status().executor.spec_hash;
  if (recorded.empty()) {
    recorded = spec_hash;  // launched by an older sbxd: take it as it is
    return false;
  }
  if (recorded == spec_hash) {
    return false;
  }
  events_.Normal(t.key(), "ExecutorRelaunched",
                 "spec.executor or spec.workspaceDirectory changed; relaunching the executor");
  return true;
}

// What the launch needs: the key and the env values resolved. Secrets enter the sandbox only
// through envs: the key, and env[].valueFrom.
StatusOr<ExecutorLaunch> AgentWorkerReconciler::LaunchSpec(Target& t, bool replace) {
  ASSIGN_OR_RETURN(ExecutorLaunch launch,
                   ResolveExecutorLaunch(clouds_, t.object, t.created.workspace_ref));
  launch.replace = replace;
  launch.envs.emplace("SBX_REMOTE_URL", t.status().remote_url);
  launch.envs.emplace("SBX_ENVIRONMENT_ID", t.status().environment_id);
  return launch;
}

// Runs the launch script and records what it did. `relaunch`: an executor was launched before
// (this counts as a restart).
StatusOr<ReconcileResult> AgentWorkerReconciler::Launch(Target& t, bool relaunch, bool replace) {
  ASSIGN_OR_RETURN(ExecutorLaunch launch, LaunchSpec(t, replace));
  Milestone(options_.milestone, t.key(), "launch_sent");
  ASSIGN_OR_RETURN(ExecutorReport report,
                   executor_.Launch(*t.sandboxes, t.executor(), launch, t.stop));
  Milestone(options_.milestone, t.key(), "launch_answered");
  RecordLook(t);
  if (report.action == "missing") {
    return ReportMissing(t, report);
  }
  api::ExecutorStatus& executor = t.status().executor;
  executor.spec_hash = ExecutorSpecHash(t.spec());
  executor.pid = report.pid;
  executor.next_launch_after.clear();
  t.cache.last_check = clock_.Steady();  // the first status check is verify_first away
  t.cache.launched = t.cache.last_check;
  if (report.action == "running") {
    // Ours already runs for this environment (launched by a pass whose status write was lost).
    Set(t, condition::kExecutorRunning, ConditionStatus::kTrue, reason::kRunning, "");
    return ReconcileResult::Continue();
  }
  if (relaunch) {
    ++executor.restarts;
    ++executor_relaunches_total_;
  }
  executor.launched_at = FormatRfc3339(clock_.Now());
  events_.Normal(t.key(), "ExecutorLaunched",
                 "launched " + t.spec().executor.command + " exec-server in sandbox " +
                     t.sandbox_id() + " for environment " + t.status().environment_id);
  Set(t, condition::kExecutorRunning, ConditionStatus::kUnknown, reason::kLaunching,
      "executor launched");
  Set(t, condition::kReady, ConditionStatus::kFalse, reason::kLaunching, "executor launched");
  return ReconcileResult::RequeueAfter(options_.schedule.verify_first);
}

// A probe or launch report looked inside the sandbox now, in this boot.
void AgentWorkerReconciler::RecordLook(Target& t) {
  t.status().executor.last_probe_at = FormatRfc3339(clock_.Now());
  t.status().executor.probed_boot_id = t.sandbox.sandbox_status().boot_id;
}

// Deletion: the sessions (an active turn cancelled first; one the service keeps refusing is
// abandoned after a bounded time), the executor (best effort), and the owned Sandbox object.
StatusOr<std::optional<ReconcileResult>> AgentWorkerReconciler::Finalize(Target& t) {
  const std::string& ns = t.object.metadata.namespace_;
  const api::ObjectKey sandbox_key{
      api::Kind::kSandbox, ns, t.spec().sandbox ? t.object.metadata.name : t.spec().sandbox_ref};
  StatusOr<Object> sandbox = store_.Get(sandbox_key);
  std::string workspace_ref =
      t.spec().sandbox ? t.spec().sandbox->workspace_ref : std::string(api::kDefaultWorkspaceRef);
  if (sandbox.ok()) {
    t.sandbox = *sandbox;
    workspace_ref = api::PlannedSandbox(t.sandbox).workspace_ref;
  }

  // The session (and one a crash may have left behind an intent for).
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> rows,
                   sessions_.Recorded(WorkspaceId(ns, workspace_ref), t.object.metadata.uid));
  std::optional<std::vector<openai::Session>> listed;
  bool settled = true;
  for (const Store::InventoryRecord& row : rows) {
    ASSIGN_OR_RETURN(t.agents, clouds_.Agents(ns, workspace_ref));
    ASSIGN_OR_RETURN(
        SessionLifecycle::RowDeletion done,
        sessions_.DeleteRecorded(
            row, *t.agents, listed, options_.session_delete, t.stop,
            [&](const std::string& id, const reconcilers_internal::SessionDeleteResult& result) {
              if (result.cancelled) {
                events_.Normal(
                    t.key(), "TurnCancelled",
                    "cancelled the active turn of session " + id + " before deleting it");
              }
              if (result.deleted) {
                events_.Normal(t.key(), "SessionDeleted", "deleted session " + id);
              }
            }));
    settled = settled && done.settled;
  }
  if (!settled) {
    return std::optional(ReconcileResult::RequeueAfter(options_.session_delete.retry_after));
  }

  // The executor: best effort, only while the sandbox runs (a stop kills it anyway).
  if (sandbox.ok() && t.sandbox.sandbox_status().state == "RUNNING") {
    if (StatusOr<api::SandboxIdentity> created = api::CreatedSandbox(t.sandbox); created.ok()) {
      t.created = *std::move(created);
      if (StatusOr<databricks::SandboxApi*> api = clouds_.Sandboxes(ns, t.created.workspace_ref);
          api.ok()) {
        executor_.Stop(**api, t.executor(), t.stop);
      }
    }
  }

  // The owned sandbox goes with its owner (its own finalizer deletes the Databricks sandbox).
  if (t.spec().sandbox && sandbox.ok() && OwnedBy(t.sandbox, t.object.metadata.uid)) {
    StatusOr<DeleteOutcome> deleted = store_.Delete(sandbox_key);
    if (!deleted.ok() && deleted.status().code() != StatusCode::kNotFound) {
      return deleted.status();
    }
  }
  return std::optional<ReconcileResult>();  // cleaned up: the finalizer comes off
}

void AgentWorkerReconciler::Set(Target& t, std::string_view type, ConditionStatus status,
                                std::string_view why, std::string message) {
  reconcilers_internal::SetCondition(t.object, type, status, why, std::move(message), clock_);
}

}  // namespace sbx::controller
