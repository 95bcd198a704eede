#include "controller/reconcilers/agent_worker_reconciler.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <utility>

#include "api/defaults.h"
#include "api/text.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/internal/session_deletion.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusCode;
using api::StatusOr;

constexpr char kResourceSession[] = "session";
constexpr char kMetaWorker[] = "sbx.dev/worker";
constexpr char kMetaUid[] = "sbx.dev/uid";

// The two exec-sync scripts below report in the same form, key=value lines then the log tail:
//   action=probed|running|launched|missing  pid=  alive=0|1  env=  boot=  current_boot=
//   workspace=0|1  command=0|1  ---log---  <tail of the executor log>
// `env` and `boot` are what the last launch recorded (environment id, boot id); `current_boot` is
// the marker of the running boot.
constexpr char kReportSh[] =
    R"sh(get() { v=; read -r v < "$1"; } 2>/dev/null
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat=; read -r stat < "/proc/$1/stat" 2>/dev/null
  [[ "${stat##*) }" != Z* ]]
}
report() {
  get "$d/pid"; pid=$v; a=0
  if [ -n "$pid" ] && alive "$pid"; then a=1; fi
  echo "action=$1"
  echo "pid=$pid"
  echo "alive=$a"
  get "$d/env"; echo "env=$v"
  get "$d/boot"; echo "boot=$v"
  get "$m"; echo "current_boot=$v"
  if [ -d "$ws" ] && [ -w "$ws" ]; then echo "workspace=1"; else echo "workspace=0"; fi
  if command -v "$cmd" >/dev/null 2>&1; then echo "command=1"; else echo "command=0"; fi
  echo "---log---"
  if [ "$1" != launched ] && [ "$1" != running ]; then tail -c 4000 "$d/log" 2>/dev/null; fi
  exit 0
}
)sh";

// Looks only. $1 executor dir, $2 workspace dir, $3 command, $4 boot marker.
constexpr char kProbeScript[] = R"sh(d=$1; ws=$2; cmd=$3; m=$4
report probed
)sh";

// Launches the executor detached, unless ours already runs; idempotent, so it needs no probe
// first. The key arrives as CODEX_API_KEY in the exec-sync envs (inherited by the executor, never
// in any argv); the remote URL and environment id as SBX_REMOTE_URL / SBX_ENVIRONMENT_ID. A live
// executor of this boot for another environment (an old session) is stopped first. Nothing is
// launched when the workspace dir or the command is missing (action=missing). flock keeps a
// racing second launch out. $1 executor dir, $2 workspace dir, $3 boot marker, $4 command, $5…
// extra args.
constexpr char kLaunchArgsSh[] = "d=$1; ws=$2; m=$3; cmd=$4; shift 4\n";
constexpr char kLaunchScript[] = R"sh([ -d "$d" ] || mkdir -p "$d" || exit 2
get "$m"; boot=$v
get "$d/pid"; pid=$v
get "$d/boot"
if [ -n "$pid" ] && [ "$v" = "$boot" ] && alive "$pid"; then
  get "$d/env"
  if [ "$v" = "$SBX_ENVIRONMENT_ID" ] && [ -z "$SBX_RELAUNCH" ]; then report running; fi
  kill "$pid" 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do alive "$pid" || break; sleep 0.2; done
fi
# sbx knows the workspace directory: it creates it where the sandbox's home is (the only place
# that survives a stop), and insists on a directory it can write.
case "$ws" in /home/sandbox-agent/*) [ -d "$ws" ] || mkdir -p "$ws" 2>/dev/null ;; esac
if [ ! -d "$ws" ] || [ ! -w "$ws" ] || ! command -v "$cmd" >/dev/null 2>&1; then report missing; fi
if [ -f "$d/log" ]; then mv -f "$d/log" "$d/log.1"; fi
if [ -e "$d/pid" ]; then rm -f "$d/pid"; fi
# codex keeps its state in CODEX_HOME (the seed uses a fresh directory): one per worker, under the
# home that survives a stop.
export CODEX_HOME="$d/codex-home"
mkdir -p "$CODEX_HOME" || exit 2
printf '%s\n' "$SBX_ENVIRONMENT_ID" > "$d/env"
printf '%s\n' "$boot" > "$d/boot"
cd "$ws" || report missing
setsid nohup /bin/bash -c 'exec 9>"$0/lock"; flock -n 9 || exit 0; echo $$ > "$0/pid"; exec "$@"' \
  "$d" "$cmd" exec-server --remote "$SBX_REMOTE_URL" --environment-id "$SBX_ENVIRONMENT_ID" "$@" \
  >> "$d/log" 2>&1 < /dev/null &
# "launched" means the pid is on disk: a probe right after must not take the gap for an exit.
# (Checked every 20 ms for up to 3 s: the detached shell usually writes it within milliseconds.)
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 150 ]; do sleep 0.02; i=$((i + 1)); done
report launched
)sh";

// $1 executor dir, $2 boot marker.
constexpr char kStopScript[] = R"sh(d=$1; marker=$2
pid=$(cat "$d/pid" 2>/dev/null)
if [ -n "$pid" ] && [ "$(cat "$d/boot" 2>/dev/null)" = "$(cat "$marker" 2>/dev/null)" ]; then
  kill "$pid" 2>/dev/null
fi
rm -f "$d/pid"
exit 0
)sh";

// FNV-1a, 64 bits, as 16 hex digits: a stable fingerprint across processes and builds (unlike
// std::hash), for the status fields that record what a session or an executor was made with.
std::string Fingerprint(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h = (h ^ c) * 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string RefText(const api::SecretRef& ref) {
  return ref.empty() ? "" : (ref.env.empty() ? "file:" + ref.file : "env:" + ref.env);
}

// What the executor is launched with (references, never secret values).
std::string ExecutorSpecHash(const api::AgentWorkerSpec& s) {
  std::string text = s.executor.command + '\0' + s.workspace_directory + '\0' +
                     RefText(s.executor.api_key_from) + '\0';
  for (const std::string& arg : s.executor.args) {
    text += "arg=" + arg + '\0';
  }
  for (const api::EnvVar& var : s.executor.env) {
    text += "env=" + var.name + '=' + var.value + '\0' + RefText(var.value_from) + '\0';
  }
  return Fingerprint(text);
}

std::string AgentHash(const api::AgentSpec& agent) {
  return Fingerprint(agent.model + '\0' + agent.instructions);
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// The last non-empty line of a log, for messages.
std::string LastLine(const std::string& log) {
  std::istringstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      last = line;
    }
  }
  return last.size() > 300 ? last.substr(last.size() - 300) : last;
}

// The Sandbox a worker created from its template carries the worker's uid.
constexpr char kAnnotationCreatedBy[] = "sbx.dev/created-by-uid";

bool CreatedBy(const Object& sandbox, const std::string& uid) {
  auto it = sandbox.metadata.annotations.find(kAnnotationCreatedBy);
  return it != sandbox.metadata.annotations.end() && it->second == uid;
}

bool IsAuthReason(const std::string& reason) {
  return reason == "IPNotAuthorized" || reason == "MissingScope" || reason == "MissingExecutorKey";
}

std::string CamelCase(std::string_view snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out.empty() ? "Unknown" : out;
}

}  // namespace

std::string DiagnoseExecutorLog(const std::string& log_tail) {
  const std::string log = api::Lower(log_tail);
  if (Contains(log, "ip is not authorized") || Contains(log, "ip not authorized")) {
    return "IPNotAuthorized";
  }
  if (Contains(log, "api.agents.environments.connect") ||
      (Contains(log, "403") && Contains(log, "missing") && Contains(log, "scope"))) {
    return "MissingScope";
  }
  if (Contains(log, "requires chatgpt authentication or api key authentication")) {
    return "MissingExecutorKey";
  }
  if (Contains(log, "workspace directory") && Contains(log, "does not exist")) {
    return "WorkspaceDirectoryMissing";
  }
  if (Contains(log, "command not found") || Contains(log, "no such file or directory")) {
    return "ExecutorNotFound";
  }
  return "";
}

// What the probe or launch script reported (see kReportSh).
struct AgentWorkerReconciler::Probe {
  std::string action;  // probed, running, launched, missing
  bool alive = false;
  int64_t pid = 0;
  std::string env;
  std::string boot;
  std::string current_boot;
  bool workspace_exists = false;
  bool command_found = false;
  std::string log_tail;

  // Our executor for this environment in this boot, alive.
  bool Running(const std::string& environment_id) const {
    return alive && env == environment_id && boot == current_boot && !boot.empty();
  }
  // We launched one for this environment in this boot (it may have died since).
  bool LaunchedThisBoot(const std::string& environment_id) const {
    return env == environment_id && boot == current_boot && !boot.empty();
  }
};

struct AgentWorkerReconciler::Target {
  Object object;
  api::ResourceStatus original_status;
  std::stop_token stop;
  bool gone = false;
  Memory memory;
  Object sandbox;
  databricks::SandboxApi* sandboxes = nullptr;
  openai::AgentsApi* agents = nullptr;
  std::string executor_key;  // resolved at launch, memory only

  const api::AgentWorkerSpec& spec() const { return object.agent_worker_spec(); }
  api::AgentWorkerStatus& status() { return object.agent_worker_status(); }
  api::ObjectKey key() const { return api::KeyOf(object); }
  std::string sandbox_id() const { return sandbox.sandbox_spec().sandbox_id; }
};

AgentWorkerReconciler::AgentWorkerReconciler(Store& store, CloudClients& clouds, Clock& clock,
                                             DependencyIndex* dependencies,
                                             AgentWorkerReconcilerOptions options)
    : store_(store),
      clouds_(clouds),
      clock_(clock),
      dependencies_(dependencies),
      events_(store, clock),
      options_(std::move(options)) {}

std::string AgentWorkerReconciler::ExecutorDir(const Target& t) const {
  return "/home/sandbox-agent/.sbx/" + t.object.metadata.name;
}

StatusOr<ReconcileResult> AgentWorkerReconciler::Reconcile(const api::ObjectKey& key,
                                                           std::stop_token stop) {
  StatusOr<Object> object = store_.Get(key);
  if (object.status().code() == StatusCode::kNotFound) {
    if (dependencies_ != nullptr) {
      dependencies_->Untrack(key);
    }
    std::lock_guard lock(mu_);
    memory_.erase(key);
    return ReconcileResult::Done();
  }
  RETURN_IF_ERROR(object.status());

  Target t;
  t.object = *std::move(object);
  t.original_status = t.object.status;
  t.stop = stop;
  {
    std::lock_guard lock(mu_);
    t.memory = memory_[key];
  }
  StatusOr<ReconcileResult> result = Converge(t);
  if (!t.gone) {
    RecordOutcome(t, result.status());
  }
  {
    std::lock_guard lock(mu_);
    if (t.gone) {
      memory_.erase(key);
    } else {
      memory_[key] = t.memory;
    }
  }
  if (t.gone) {
    return result;
  }
  t.status().observed_generation = t.object.metadata.generation;
  RETURN_IF_ERROR(internal::WriteStatusIfChanged(store_, t.object, t.original_status));
  return result;
}

// Synced says whether this pass could observe and act; Ready changes only on evidence. A
// transient error (a 503, a timeout, a probe that could not run) leaves Ready as the last pass
// found it until `failure_threshold` of them in a row; a terminal one sets it at once. Whatever
// the pass did, Ready is True whenever the four conditions it is made of are (it can never be
// False while they all are True). Secrets in messages (an executor that prints its key) are
// scrubbed by the ScrubbingStore sbxd writes through.
void AgentWorkerReconciler::RecordOutcome(Target& t, const Status& status) {
  if (status.ok()) {
    t.memory.failed_observations = 0;
    // A Sandbox whose own view is stale (its workspace's LIST sweeps fail) makes ours stale too.
    const api::Condition* sandbox = api::FindCondition(t.sandbox.conditions(), "Synced");
    if (sandbox != nullptr && sandbox->status == ConditionStatus::kFalse) {
      Set(t, "Synced", ConditionStatus::kFalse, sandbox->reason,
          "Sandbox " + t.sandbox.metadata.name + ": " + sandbox->message);
    } else {
      Set(t, "Synced", ConditionStatus::kTrue, "Synced", "");
    }
  } else {
    const ErrorClass error = ClassifyError(status);
    const std::string message = ConditionMessage(status);
    Set(t, "Synced", ConditionStatus::kFalse, error.reason, message);
    if (!error.transient() || ++t.memory.failed_observations >= options_.failure_threshold) {
      Set(t, "Ready", ConditionStatus::kFalse, error.reason, message);
      return;
    }
  }
  for (const char* part :
       {"SandboxReady", "SessionReady", "ExecutorRunning", "ExecutorConnected"}) {
    const api::Condition* c = api::FindCondition(t.status().conditions, part);
    if (c == nullptr || c->status != ConditionStatus::kTrue) {
      return;
    }
  }
  Set(t, "Ready", ConditionStatus::kTrue, "Ready", "executor connected");
}

StatusOr<ReconcileResult> AgentWorkerReconciler::Converge(Target& t) {
  if (!t.object.metadata.deletion_timestamp.empty()) {
    return Finalize(t);
  }
  RETURN_IF_ERROR(internal::EnsureFinalizer(store_, t.object));

  // 1. The sandbox.
  ASSIGN_OR_RETURN(api::ObjectKey sandbox_key, EnsureSandboxObject(t));
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(t.key(), {sandbox_key});
  }
  StatusOr<Object> sandbox = store_.Get(sandbox_key);
  if (sandbox.status().code() == StatusCode::kNotFound) {
    const std::string message =
        "Sandbox " + sandbox_key.namespace_ + "/" + sandbox_key.name + " does not exist";
    Set(t, "SandboxReady", ConditionStatus::kFalse, "SandboxNotFound", message);
    Set(t, "Ready", ConditionStatus::kFalse, "SandboxNotFound", message);
    return ReconcileResult::Done();  // the dependency index brings us back when it appears
  }
  RETURN_IF_ERROR(sandbox.status());
  t.sandbox = *std::move(sandbox);
  if (t.sandbox.sandbox_spec().power == api::Power::kStopped) {
    // Stopped on purpose: no session, no exec-sync (it would fail, or wake it), nothing to
    // diagnose. A change of the Sandbox's power enqueues this worker again.
    const std::string message = "Sandbox " + sandbox_key.name +
                                " has spec.power Stopped; the executor runs once it is Running";
    t.status().executor.pid = 0;
    t.memory.verify_pending = false;
    Set(t, "SandboxReady", ConditionStatus::kFalse, "SandboxStopped", message);
    Set(t, "ExecutorRunning", ConditionStatus::kFalse, "SandboxStopped", message);
    Set(t, "ExecutorConnected", ConditionStatus::kUnknown, "SandboxStopped", message);
    Set(t, "Ready", ConditionStatus::kFalse, "SandboxStopped", message);
    return ReconcileResult::Done();
  }
  const api::Condition* sandbox_ready = api::FindCondition(t.sandbox.conditions(), "Ready");
  if (sandbox_ready == nullptr || sandbox_ready->status != ConditionStatus::kTrue) {
    const std::string message = "Sandbox " + sandbox_key.name + " is not Ready" +
                                (sandbox_ready != nullptr ? " (" + sandbox_ready->reason + ": " +
                                                                sandbox_ready->message + ")"
                                                          : "");
    Set(t, "SandboxReady", ConditionStatus::kFalse, "SandboxNotReady", message);
    Set(t, "Ready", ConditionStatus::kFalse, "SandboxNotReady", message);
    if (t.sandbox.sandbox_status().state != "RUNNING") {
      // No process survives a stop: whatever ran there is gone until the next launch.
      t.status().executor.pid = 0;
      t.memory.verify_pending = false;
      Set(t, "ExecutorRunning", ConditionStatus::kFalse, "SandboxNotRunning", message);
      Set(t, "ExecutorConnected", ConditionStatus::kUnknown, "SandboxNotRunning", message);
    }
    return ReconcileResult::Done();  // a change of the Sandbox enqueues this worker
  }
  Set(t, "SandboxReady", ConditionStatus::kTrue, "SandboxReady", "");
  const std::string& workspace_ref = t.sandbox.sandbox_spec().workspace_ref;
  ASSIGN_OR_RETURN(t.sandboxes, clouds_.Sandboxes(t.object.metadata.namespace_, workspace_ref));
  ASSIGN_OR_RETURN(t.agents, clouds_.Agents(t.object.metadata.namespace_, workspace_ref));

  // 2. The session: created when missing; looked up again only before launching into it (the
  // environment status below reports a session lost later).
  const Clock::SteadyTime now = clock_.Steady();
  const std::string& boot = t.sandbox.sandbox_status().boot_id;
  const bool nothing_runs = t.status().executor.pid == 0 && !t.memory.verify_pending;
  ASSIGN_OR_RETURN(bool new_session, EnsureSession(t, nothing_runs));
  ASSIGN_OR_RETURN(std::optional<ReconcileResult> replaced, FollowSessionSpec(t, new_session));
  if (replaced) {
    return *replaced;
  }
  Set(t, "SessionReady", ConditionStatus::kTrue, "SessionReady", "");

  // 3. The executor, when nothing of ours can be running: a new session, or none launched since
  // the sandbox last (re)started. Launch at once; the launch script is idempotent and reports
  // what it found, so a probe first would only cost an exec-sync. A running executor launched
  // with another spec.executor (or workspaceDirectory) is relaunched.
  if (new_session || nothing_runs) {
    return Launch(t, /*relaunch=*/!t.status().executor.launched_at.empty());
  }
  const std::string spec_hash = ExecutorSpecHash(t.spec());
  if (t.status().executor.spec_hash.empty()) {
    t.status().executor.spec_hash = spec_hash;  // launched by an older sbxd: take it as it is
  } else if (t.status().executor.spec_hash != spec_hash) {
    events_.Normal(t.key(), "ExecutorRelaunched",
                   "spec.executor or spec.workspaceDirectory changed; relaunching the executor");
    return Launch(t, /*relaunch=*/true, /*replace=*/true);
  }

  // 4. The connection, from the cheap OpenAI status, on its cadence: a reconcile woken by
  // something else (our own status write, a resync) spends no call before it is due. A new boot
  // is looked at at once.
  const bool rebooted = t.memory.probed_boot != boot;
  const std::chrono::milliseconds cadence = t.memory.verify_pending ? options_.verify_after_launch
                                            : t.memory.connected    ? options_.status_interval
                                                                    : options_.connect_poll;
  if (!rebooted && now - t.memory.last_status < cadence) {
    return ReconcileResult::RequeueAfter(std::chrono::duration_cast<std::chrono::milliseconds>(
        t.memory.last_status + cadence - now));
  }
  StatusOr<openai::Environment> got = t.agents->GetEnvironment(t.status().environment_id, t.stop);
  if (!got.ok() && got.status().code() != StatusCode::kNotFound) {
    // Not evidence either way: the connection is unknown until the status can be read again
    // (Ready keeps its last value; see RecordOutcome).
    Set(t, "ExecutorConnected", ConditionStatus::kUnknown, ClassifyError(got.status()).reason,
        "the environment status cannot be read: " + ConditionMessage(got.status()));
    return got.status();
  }
  t.memory.last_status = now;
  openai::Environment env;
  if (got.ok()) {
    env = *std::move(got);
  } else {
    env.id = t.status().environment_id;
    env.status = openai::EnvironmentStatus::kExpired;
    env.status_raw = "not found";
  }
  t.status().environment_status = env.status_raw;
  t.memory.connected = env.status == openai::EnvironmentStatus::kConnected;
  if (env.status == openai::EnvironmentStatus::kExpired ||
      env.status == openai::EnvironmentStatus::kFailed) {
    const std::string lost = t.status().session_id;
    RETURN_IF_ERROR(ReplaceSession(t, "SessionLost", "environment " + env.status_raw));
    events_.Warning(t.key(), "SessionLost",
                    "environment " + env.id + " is " + env.status_raw + "; session " + lost +
                        " deleted, creating a new one");
    Set(t, "Ready", ConditionStatus::kFalse, "SessionLost", "environment " + env.status_raw);
    return ReconcileResult::RequeueAfter(std::chrono::milliseconds(0));
  }
  const bool connected = env.status == openai::EnvironmentStatus::kConnected;
  if (!connected && t.memory.verify_pending && now - t.memory.launched < options_.connect_grace) {
    // Just launched: give it time to connect before looking inside the sandbox.
    return ReconcileResult::RequeueAfter(options_.verify_after_launch);
  }

  // 5. The probe inside the sandbox: when the connection is in doubt, after a new boot, and on
  // the probe cadence. A connected executor needs no probe to be believed.
  const bool probe_due = (t.memory.verify_pending && !connected) || rebooted ||
                         now - t.memory.last_probe >= options_.probe_interval;
  if (probe_due) {
    ASSIGN_OR_RETURN(Probe probe, ProbeExecutor(t));
    t.memory.last_probe = now;
    t.memory.probed_boot = boot;
    if (!probe.Running(t.status().environment_id)) {
      return HandleDeadExecutor(t, probe);
    }
    t.status().executor.pid = probe.pid;
  }
  if (connected && t.status().executor.pid == 0) {
    t.status().executor.pid = t.memory.launched_pid;  // the connection vouches for the launch
  }
  Set(t, "ExecutorRunning", ConditionStatus::kTrue, "Running", "");
  if (connected) {
    t.memory.verify_pending = false;
    Set(t, "ExecutorConnected", ConditionStatus::kTrue, "Connected", "");
    Set(t, "Ready", ConditionStatus::kTrue, "Ready", "executor connected");
    return ReconcileResult::RequeueAfter(options_.status_interval);
  }
  const std::string reason = CamelCase(env.status_raw);
  Set(t, "ExecutorConnected", ConditionStatus::kFalse, reason,
      "environment " + env.id + " is " + env.status_raw);
  Set(t, "Ready", ConditionStatus::kFalse, "ExecutorNotConnected",
      "environment " + env.id + " is " + env.status_raw);
  // Running but not connected: the probe has vouched for the process; look at it again only if
  // the environment reports a disconnect.
  t.memory.verify_pending = env.status == openai::EnvironmentStatus::kDisconnected;
  return ReconcileResult::RequeueAfter(options_.connect_poll);
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
    RETURN_IF_ERROR(ReplaceSession(t, "SessionReplaced", "spec.workspaceDirectory changed"));
    events_.Normal(t.key(), "SessionReplaced",
                   "spec.workspaceDirectory changed from " + old_directory + " to " +
                       t.spec().workspace_directory +
                       "; the API cannot move a session's environment, so session " + old_session +
                       " was replaced");
    return std::optional<ReconcileResult>(
        ReconcileResult::RequeueAfter(std::chrono::milliseconds(0)));
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
// one): delete it (ours, recorded in inventory; abandoned if the service refuses), so that it
// neither lingers nor gets adopted again, and forget it. The next pass creates a new session and
// launches into it.
Status AgentWorkerReconciler::ReplaceSession(Target& t, const std::string& reason,
                                             const std::string& message) {
  RETURN_IF_ERROR(DeleteLostSession(
      t, WorkspaceId(t.object.metadata.namespace_, t.sandbox.sandbox_spec().workspace_ref)));
  api::AgentWorkerStatus& status = t.status();
  status.session_id.clear();
  status.environment_id.clear();
  status.remote_url.clear();
  status.workspace_directory.clear();
  status.agent_hash.clear();
  t.memory.verify_pending = true;
  Set(t, "SessionReady", ConditionStatus::kFalse, reason, message);
  return Status();
}

// sandboxRef → that Sandbox. Inline template → a Sandbox named after the worker, owned by it.
StatusOr<api::ObjectKey> AgentWorkerReconciler::EnsureSandboxObject(Target& t) {
  const std::string& ns = t.object.metadata.namespace_;
  if (!t.spec().sandbox) {
    return api::ObjectKey{api::Kind::kSandbox, ns, t.spec().sandbox_ref};
  }
  const api::ObjectKey key{api::Kind::kSandbox, ns, t.object.metadata.name};
  const api::OwnerReference owner{api::Kind::kAgentWorker, t.object.metadata.name,
                                  t.object.metadata.uid, true};
  StatusOr<Object> existing = store_.Get(key);
  if (existing.ok()) {
    // Ours: the owner reference, or — when the owner-reference write after the create was lost
    // (a conflict with the Sandbox reconciler's finalizer write) — our uid from the create.
    const auto& refs = existing->metadata.owner_references;
    if (std::find(refs.begin(), refs.end(), owner) == refs.end() &&
        !(refs.empty() && CreatedBy(*existing, t.object.metadata.uid))) {
      const std::string message = "a Sandbox named " + key.name +
                                  " already exists and is not owned by this worker; rename "
                                  "the worker or use sandboxRef";
      Set(t, "SandboxReady", ConditionStatus::kFalse, "SandboxNameConflict", message);
      return api::FailedPreconditionError(message);
    }
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }
  Object desired = api::MakeObject(api::Kind::kSandbox, key.name, ns);
  desired.sandbox_spec() = *t.spec().sandbox;
  api::ApplySandboxDefaults(desired.sandbox_spec(), ns, key.name);
  desired.metadata.labels = {{"sbx.dev/agent-worker", t.object.metadata.name}};
  // Written by the create itself, so that the Sandbox is recognisably ours even before the
  // owner reference (a second write, which can lose a race) is in place.
  desired.metadata.annotations = {{kAnnotationCreatedBy, t.object.metadata.uid}};
  // Apply writes nothing when the template did not change.
  ASSIGN_OR_RETURN(std::vector<ApplyResult> applied, store_.Apply({desired}, ApplyOptions{}));
  if (applied.at(0).action == ApplyAction::kCreated) {
    events_.Normal(t.key(), "SandboxCreated", "created Sandbox " + key.name + " from the template");
  }
  Object stored = applied.at(0).object;
  // The Sandbox reconciler adds its finalizer concurrently: read again on a conflict.
  for (int attempt = 0; stored.metadata.owner_references.empty(); ++attempt) {
    stored.metadata.owner_references.push_back(owner);
    StatusOr<Object> updated = store_.UpdateControllerMetadata(stored);
    if (updated.ok() || updated.status().code() != StatusCode::kAborted || attempt == 2) {
      RETURN_IF_ERROR(updated.status());
      break;
    }
    ASSIGN_OR_RETURN(stored, store_.Get(key));
  }
  return key;
}

// Returns true when a new session was created (or adopted) in this call.
StatusOr<bool> AgentWorkerReconciler::EnsureSession(Target& t, bool verify) {
  const std::string workspace =
      WorkspaceId(t.object.metadata.namespace_, t.sandbox.sandbox_spec().workspace_ref);
  if (!t.status().session_id.empty() && verify) {
    StatusOr<openai::Session> session = t.agents->GetSession(t.status().session_id, t.stop);
    const bool gone = session.status().code() == StatusCode::kNotFound ||
                      (session.ok() && session->status == openai::SessionStatus::kFailed);
    if (!session.ok() && !gone) {
      return session.status();
    }
    if (gone) {
      events_.Warning(
          t.key(), "SessionLost",
          "session " + t.status().session_id + " is gone or failed; creating a new one");
      RETURN_IF_ERROR(store_.DeleteInventory(workspace, kResourceSession, t.status().session_id));
      t.status().session_id.clear();
      t.status().environment_id.clear();
      t.status().remote_url.clear();
    }
  }
  if (!t.status().session_id.empty()) {
    return false;
  }

  // The session id is only known after the create, so the intent is keyed by the worker's uid;
  // after a crash the session is found again by the uid in its metadata.
  const std::string pending = "pending:" + t.object.metadata.uid;
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> intent,
                   store_.GetInventory(workspace, kResourceSession, pending));
  std::optional<openai::Session> session;
  if (intent) {
    ASSIGN_OR_RETURN(std::vector<openai::Session> all, t.agents->ListAllSessions({}, t.stop));
    for (openai::Session& s : all) {
      auto uid = s.metadata.find(kMetaUid);
      if (uid != s.metadata.end() && uid->second == t.object.metadata.uid &&
          s.status != openai::SessionStatus::kFailed) {
        session = std::move(s);
        break;
      }
    }
  } else {
    // A create that finished, was recorded live, and then sbxd died before the id reached the
    // status: inventory still knows the session. Adopt it rather than create a second one.
    ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(workspace));
    for (const Store::InventoryRecord& r : records) {
      if (r.resource_type != kResourceSession || r.owner_uid != t.object.metadata.uid ||
          r.state != Store::InventoryState::kLive) {
        continue;
      }
      StatusOr<openai::Session> s = t.agents->GetSession(r.external_id, t.stop);
      if (s.ok() && s->status != openai::SessionStatus::kFailed) {
        session = *std::move(s);
        break;
      }
      if (!s.ok() && s.status().code() != StatusCode::kNotFound) {
        return s.status();
      }
      RETURN_IF_ERROR(store_.DeleteInventory(workspace, kResourceSession, r.external_id));
    }
  }
  const std::string now = FormatRfc3339(clock_.Now());
  Store::InventoryRecord record;
  record.workspace = workspace;
  record.resource_type = kResourceSession;
  record.owner = t.key();
  record.owner_uid = t.object.metadata.uid;
  record.created_at = record.updated_at = now;
  if (!session) {
    record.external_id = pending;
    record.state = Store::InventoryState::kIntent;
    RETURN_IF_ERROR(store_.PutInventory(record));
    openai::CreateSessionRequest request;
    request.model = t.spec().agent.model;
    if (!t.spec().agent.instructions.empty()) {
      request.instructions = t.spec().agent.instructions;
    }
    request.workspace_directory = t.spec().workspace_directory;
    request.metadata = {{kMetaWorker, t.object.metadata.namespace_ + "/" + t.object.metadata.name},
                        {kMetaUid, t.object.metadata.uid}};
    ASSIGN_OR_RETURN(openai::Session created, t.agents->CreateSession(request, t.stop));
    session = std::move(created);
    events_.Normal(t.key(), "SessionCreated", "created session " + session->id);
  } else {
    events_.Normal(t.key(), "SessionAdopted", "adopted session " + session->id);
  }
  record.external_id = session->id;
  record.state = Store::InventoryState::kLive;
  RETURN_IF_ERROR(store_.PutInventory(record));
  RETURN_IF_ERROR(store_.DeleteInventory(workspace, kResourceSession, pending));
  t.status().session_id = session->id;
  t.status().environment_id = session->environment.id;
  t.status().remote_url = session->environment.remote_url;
  t.status().executor.pid = 0;  // the executor must (re)connect to the new environment
  t.memory.verify_pending = true;
  return true;
}

StatusOr<AgentWorkerReconciler::Probe> AgentWorkerReconciler::ProbeExecutor(Target& t) {
  databricks::ExecRequest request;
  request.cmd = "/bin/bash";
  request.args = {"-c",
                  std::string(kReportSh) + kProbeScript,
                  "sbx-probe",
                  ExecutorDir(t),
                  t.spec().workspace_directory,
                  t.spec().executor.command,
                  options_.boot_marker};
  request.execution_timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(databricks::ExecResult r,
                   t.sandboxes->ExecSync(t.sandbox_id(), request, t.stop));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    return api::UnavailableError("executor probe in sandbox " + t.sandbox_id() +
                                 " failed: " + LastLine(r.stderr_text));
  }
  return ParseReport(r.stdout_text);
}

AgentWorkerReconciler::Probe AgentWorkerReconciler::ParseReport(const std::string& out) {
  Probe p;
  const std::string marker = "---log---\n";
  const size_t log_at = out.find(marker);
  std::istringstream in(out.substr(0, log_at));
  if (log_at != std::string::npos) {
    p.log_tail = out.substr(log_at + marker.size());
  }
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string k = line.substr(0, eq);
    const std::string v = line.substr(eq + 1);
    if (k == "action") {
      p.action = v;
    } else if (k == "pid") {
      p.pid = std::atoll(v.c_str());
    } else if (k == "alive") {
      p.alive = v == "1";
    } else if (k == "env") {
      p.env = v;
    } else if (k == "boot") {
      p.boot = v;
    } else if (k == "current_boot") {
      p.current_boot = v;
    } else if (k == "workspace") {
      p.workspace_exists = v == "1";
    } else if (k == "command") {
      p.command_found = v == "1";
    }
  }
  return p;
}

// The workspace dir or the command is missing: nothing can be launched until the user fixes it.
StatusOr<ReconcileResult> AgentWorkerReconciler::ReportMissing(Target& t, const Probe& probe) {
  std::string reason, message;
  if (!probe.workspace_exists) {
    reason = "WorkspaceDirectoryMissing";
    message = "workspace directory " + t.spec().workspace_directory +
              " does not exist in sandbox " + t.sandbox_id() +
              " or is not writable (sbx creates it only under /home/sandbox-agent; elsewhere "
              "create it in the Sandbox's setup)";
  } else {
    reason = "ExecutorNotFound";
    message = "command \"" + t.spec().executor.command + "\" not found on PATH in sandbox " +
              t.sandbox_id() + " (install @openai/codex under /home/sandbox-agent)";
  }
  t.status().executor.pid = 0;
  Set(t, "ExecutorRunning", ConditionStatus::kFalse, reason, message);
  Set(t, "ExecutorConnected", ConditionStatus::kFalse, "ExecutorNotRunning", "");
  Set(t, "Ready", ConditionStatus::kFalse, reason, message);
  t.memory.verify_pending = true;
  t.memory.launched = Clock::SteadyTime{};  // nothing launched: the next pass probes
  return ReconcileResult::RequeueAfter(std::chrono::seconds(30));
}

StatusOr<ReconcileResult> AgentWorkerReconciler::HandleDeadExecutor(Target& t, const Probe& probe) {
  api::ExecutorStatus& executor = t.status().executor;
  // A probe saw it alive after its launch: it ran, then died (killed, crashed later) — not an
  // exit on start, so no crash-loop delay unless its log names an auth failure.
  const bool ran = executor.pid != 0;
  executor.pid = 0;
  Set(t, "ExecutorConnected", ConditionStatus::kFalse, "ExecutorNotRunning", "");
  if (!probe.workspace_exists || !probe.command_found) {
    return ReportMissing(t, probe);
  }

  const Clock::SteadyTime now = clock_.Steady();
  if (probe.LaunchedThisBoot(t.status().environment_id) && !t.memory.diagnosed) {
    // It ran and exited: say why, then back off before the next launch (no hot loop).
    std::string reason = DiagnoseExecutorLog(probe.log_tail);
    if (reason.empty()) {
      reason = ran ? "ExecutorExited" : "ExecutorExitedOnStart";
    }
    const std::string message = LastLine(probe.log_tail);
    executor.last_exit_reason = reason;
    events_.Warning(t.key(), reason, "executor exited: " + message);
    t.memory.diagnosed = true;
    std::chrono::milliseconds delay = options_.auth_backoff;
    if (ran && !IsAuthReason(reason)) {
      delay = std::chrono::milliseconds(0);
    } else if (!IsAuthReason(reason)) {
      delay = options_.crash_backoff_base;
      for (int i = 1; i < executor.restarts && delay < options_.crash_backoff_cap; ++i) {
        delay *= 2;
      }
      delay = std::min(delay, options_.crash_backoff_cap);
    }
    t.memory.next_launch_allowed = now + delay;
    Set(t, "ExecutorRunning", ConditionStatus::kFalse, reason, message);
    Set(t, "Ready", ConditionStatus::kFalse, reason, message);
  }
  if (probe.LaunchedThisBoot(t.status().environment_id) &&
      t.spec().restart_policy == api::RestartPolicy::kNever) {
    return ReconcileResult::Done();
  }
  if (now < t.memory.next_launch_allowed) {
    t.memory.verify_pending = true;
    return ReconcileResult::RequeueAfter(
        std::chrono::duration_cast<std::chrono::milliseconds>(t.memory.next_launch_allowed - now));
  }
  return Launch(t,
                probe.LaunchedThisBoot(t.status().environment_id) || !executor.launched_at.empty());
}

// Runs the launch script and records what it did. `relaunch`: an executor was launched before
// (this counts as a restart).
StatusOr<ReconcileResult> AgentWorkerReconciler::Launch(Target& t, bool relaunch, bool replace) {
  ASSIGN_OR_RETURN(
      t.executor_key,
      clouds_.ExecutorKey(t.object.metadata.namespace_, t.sandbox.sandbox_spec().workspace_ref,
                          t.spec().executor.api_key_from,
                          "AgentWorker " + t.object.metadata.name + " spec.executor.apiKeyFrom"));
  databricks::ExecRequest request;
  request.cmd = "/bin/bash";
  request.args = {
      "-c",
      std::string(kReportSh) + kLaunchArgsSh + internal::kEnsureBootMarkerSh + kLaunchScript,
      "sbx-launch",
      ExecutorDir(t),
      t.spec().workspace_directory,
      options_.boot_marker,
      t.spec().executor.command};
  request.args.insert(request.args.end(), t.spec().executor.args.begin(),
                      t.spec().executor.args.end());
  // Secrets enter the sandbox only through envs: the key, and env[].valueFrom.
  request.envs = {{"CODEX_API_KEY", t.executor_key},
                  {"SBX_REMOTE_URL", t.status().remote_url},
                  {"SBX_ENVIRONMENT_ID", t.status().environment_id}};
  if (replace) {
    request.envs.emplace("SBX_RELAUNCH", "1");
  }
  for (size_t i = 0; i < t.spec().executor.env.size(); ++i) {
    const api::EnvVar& var = t.spec().executor.env[i];
    std::string value = var.value;
    if (!var.value_from.empty()) {
      ASSIGN_OR_RETURN(
          value, clouds_.Secret(var.value_from, "AgentWorker " + t.object.metadata.name +
                                                    " spec.executor.env[" + std::to_string(i) +
                                                    "].valueFrom"));
    }
    request.envs.emplace(var.name, std::move(value));
  }
  request.execution_timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(databricks::ExecResult r,
                   t.sandboxes->ExecSync(t.sandbox_id(), request, t.stop));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    return api::UnavailableError("executor launch in sandbox " + t.sandbox_id() + " failed (exit " +
                                 std::to_string(r.exit_code.value_or(-1)) +
                                 "): " + LastLine(r.stderr_text + "\n" + r.stdout_text));
  }
  const Probe report = ParseReport(r.stdout_text);
  const Clock::SteadyTime now = clock_.Steady();
  t.memory.last_probe = now;
  t.memory.probed_boot = t.sandbox.sandbox_status().boot_id;
  if (report.action == "missing") {
    return ReportMissing(t, report);
  }
  api::ExecutorStatus& executor = t.status().executor;
  t.memory.verify_pending = true;
  t.memory.launched = now;
  t.memory.last_status = now;  // the first look at the environment is verify_after_launch away
  t.memory.connected = false;
  t.memory.launched_pid = report.pid;
  executor.spec_hash = ExecutorSpecHash(t.spec());
  if (report.action == "running") {
    // Ours already runs for this environment (launched by a pass whose status write was lost).
    executor.pid = report.pid;
    Set(t, "ExecutorRunning", ConditionStatus::kTrue, "Running", "");
    return ReconcileResult::RequeueAfter(std::chrono::milliseconds(0));
  }
  if (relaunch) {
    ++executor.restarts;
  }
  executor.launched_at = FormatRfc3339(clock_.Now());
  t.memory.diagnosed = false;
  events_.Normal(t.key(), "ExecutorLaunched",
                 "launched " + t.spec().executor.command + " exec-server in sandbox " +
                     t.sandbox_id() + " for environment " + t.status().environment_id);
  Set(t, "ExecutorRunning", ConditionStatus::kUnknown, "Launching", "executor launched");
  Set(t, "Ready", ConditionStatus::kFalse, "Launching", "executor launched");
  return ReconcileResult::RequeueAfter(options_.verify_after_launch);
}

StatusOr<ReconcileResult> AgentWorkerReconciler::Finalize(Target& t) {
  if (!internal::HasFinalizer(t.object)) {
    return ReconcileResult::Done();
  }
  const std::string& ns = t.object.metadata.namespace_;
  const api::ObjectKey sandbox_key{
      api::Kind::kSandbox, ns, t.spec().sandbox ? t.object.metadata.name : t.spec().sandbox_ref};
  StatusOr<Object> sandbox = store_.Get(sandbox_key);
  std::string workspace_ref =
      t.spec().sandbox ? t.spec().sandbox->workspace_ref : std::string(api::kDefaultWorkspaceRef);
  if (sandbox.ok()) {
    t.sandbox = *sandbox;
    workspace_ref = t.sandbox.sandbox_spec().workspace_ref;
  }
  const std::string workspace = WorkspaceId(ns, workspace_ref);

  // The session (and one a crash may have left behind an intent for).
  ASSIGN_OR_RETURN(bool sessions_done, DeleteSessions(t, workspace, workspace_ref));
  if (!sessions_done) {
    return ReconcileResult::RequeueAfter(options_.session_delete.retry_after);
  }

  // The executor: best effort, only while the sandbox runs (a stop kills it anyway).
  if (sandbox.ok() && t.sandbox.sandbox_status().state == "RUNNING") {
    StatusOr<databricks::SandboxApi*> api = clouds_.Sandboxes(ns, workspace_ref);
    if (api.ok()) {
      databricks::ExecRequest request;
      request.cmd = "/bin/bash";
      request.args = {"-c", kStopScript, "sbx-stop", ExecutorDir(t), options_.boot_marker};
      request.execution_timeout = std::chrono::seconds(30);
      (void)(*api)->ExecSync(t.sandbox_id(), request, t.stop);
    }
  }

  // The owned sandbox goes with its owner (its own finalizer deletes the Databricks sandbox).
  if (t.spec().sandbox && sandbox.ok()) {
    const auto& refs = t.sandbox.metadata.owner_references;
    const bool owned =
        std::any_of(refs.begin(), refs.end(),
                    [&](const api::OwnerReference& r) { return r.uid == t.object.metadata.uid; }) ||
        (refs.empty() && CreatedBy(t.sandbox, t.object.metadata.uid));
    if (owned) {
      StatusOr<DeleteOutcome> deleted = store_.Delete(sandbox_key);
      if (!deleted.ok() && deleted.status().code() != StatusCode::kNotFound) {
        return deleted.status();
      }
    }
  }

  RETURN_IF_ERROR(internal::RemoveFinalizer(store_, t.object));
  if (dependencies_ != nullptr) {
    dependencies_->Untrack(t.key());
  }
  t.gone = true;
  return ReconcileResult::Done();
}

// Deletes every session recorded for this worker: an active turn is cancelled first, and a
// session the service keeps refusing to delete is abandoned after a bounded time (see
// internal/session_deletion.h). False while a refused session is still being retried.
StatusOr<bool> AgentWorkerReconciler::DeleteSessions(Target& t, const std::string& workspace,
                                                     const std::string& workspace_ref) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(workspace));
  bool done = true;
  for (const Store::InventoryRecord& r : records) {
    if (r.resource_type != kResourceSession || r.owner_uid != t.object.metadata.uid ||
        r.state == Store::InventoryState::kAbandoned) {
      continue;
    }
    ASSIGN_OR_RETURN(t.agents, clouds_.Agents(t.object.metadata.namespace_, workspace_ref));
    std::vector<std::string> ids;
    if (r.state == Store::InventoryState::kIntent) {
      ASSIGN_OR_RETURN(std::vector<openai::Session> all, t.agents->ListAllSessions({}, t.stop));
      for (const openai::Session& s : all) {
        auto uid = s.metadata.find(kMetaUid);
        if (uid != s.metadata.end() && uid->second == t.object.metadata.uid) {
          ids.push_back(s.id);
        }
      }
    } else {
      ids.push_back(r.external_id);
    }
    bool keep_row = false;
    for (const std::string& id : ids) {
      ASSIGN_OR_RETURN(internal::SessionDeleteResult result,
                       internal::CancelThenDeleteSession(*t.agents, id, t.stop));
      if (result.cancelled) {
        events_.Normal(t.key(), "TurnCancelled",
                       "cancelled the active turn of session " + id + " before deleting it");
      }
      if (result.deleted) {
        events_.Normal(t.key(), "SessionDeleted", "deleted session " + id);
        continue;
      }
      ASSIGN_OR_RETURN(bool abandoned,
                       internal::RecordSessionRefusal(store_, events_, r, id, result.refusal,
                                                      clock_.Now(), options_.session_delete));
      done = done && abandoned;
      keep_row = keep_row || id == r.external_id;  // its row now says deleting or abandoned
    }
    if (!keep_row) {
      RETURN_IF_ERROR(store_.DeleteInventory(workspace, kResourceSession, r.external_id));
    }
  }
  return done;
}

// The session of an expired or failed environment: deleted (an active turn cancelled first)
// and forgotten; one the service refuses to delete is abandoned at once — it is of no use any
// more, so retrying would only hold up its replacement.
Status AgentWorkerReconciler::DeleteLostSession(Target& t, const std::string& workspace) {
  const std::string& id = t.status().session_id;
  ASSIGN_OR_RETURN(internal::SessionDeleteResult result,
                   internal::CancelThenDeleteSession(*t.agents, id, t.stop));
  if (result.deleted) {
    return store_.DeleteInventory(workspace, kResourceSession, id);
  }
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> row,
                   store_.GetInventory(workspace, kResourceSession, id));
  Store::InventoryRecord record;
  if (row) {
    record = *std::move(row);
  } else {
    record.workspace = workspace;
    record.resource_type = kResourceSession;
    record.owner = t.key();
    record.owner_uid = t.object.metadata.uid;
    record.created_at = FormatRfc3339(clock_.Now());
  }
  return internal::AbandonSession(store_, events_, std::move(record), id, result.refusal,
                                  clock_.Now());
}

void AgentWorkerReconciler::Set(Target& t, const char* type, ConditionStatus status,
                                std::string reason, std::string message) {
  internal::SetCondition(t.object, type, status, std::move(reason), std::move(message), clock_);
}

}  // namespace sbx::controller
