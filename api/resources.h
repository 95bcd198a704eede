// The sbx resource model (apiVersion sbx.dev/v1alpha1): Workspace, Sandbox, AgentWorker,
// AgentTask, GitSource, AgentPool, Notifier.
//
// Plain value types, no I/O. `spec` is owned by the user (sbxctl writes it), `status` by the
// controller. Field meanings follow DESIGN.md §2; YAML/JSON field names are the camelCase
// forms noted beside each member. Defaulting and validation live in api/defaults.h and
// api/validation.h, (de)serialisation in api/codec.h. Thread-compatible values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/status.h"

namespace sbx::api {

inline constexpr std::string_view kApiVersion = "sbx.dev/v1alpha1";
inline constexpr std::string_view kDefaultNamespace = "default";
inline constexpr std::string_view kDefaultWorkspaceRef = "default";
inline constexpr std::string_view kDefaultWorkspaceDirectory = "/home/sandbox-agent/workspace";
// Finalizer the controller puts on objects that own external resources.
inline constexpr std::string_view kControllerFinalizer = "sbx.dev/controller";

// Annotation that asks the controller to cancel a running (or queued) AgentTask: any value
// (sbxctl cancel writes the RFC 3339 time of the request). The controller sends
// agent.session.input.cancel, waits for turn.cancelled and ends the task Cancelled; on a
// finished task it changes nothing. An annotation rather than a spec field so that it does not
// bump the generation and needs no spec edit (`sbxctl annotate` works too).
inline constexpr std::string_view kCancelRequestedAnnotation = "sbx.dev/cancel-requested";

// Every kind; the kind table (api/kinds.h) has one row for each, in this order. New kinds are
// appended: the numeric values of the others do not change.
enum class Kind {
  kWorkspace,
  kSandbox,
  kAgentWorker,
  kAgentTask,
  kGitSource,
  kAgentPool,
  kNotifier
};
inline constexpr Kind kAllKinds[] = {Kind::kWorkspace, Kind::kSandbox,   Kind::kAgentWorker,
                                     Kind::kAgentTask, Kind::kGitSource, Kind::kAgentPool,
                                     Kind::kNotifier};

// "Workspace", "Sandbox", "AgentWorker", "AgentTask", "GitSource", … (the kind table's names).
std::string_view KindName(Kind kind);
// Accepts the kind name in any case, its plural, and its short name (the kind table's):
// "sandbox", "Sandboxes", "sb" → kSandbox. kInvalidArgument names the accepted forms.
StatusOr<Kind> ParseKind(std::string_view text);

// A reference to a secret, resolved by the controller at the moment of use and never stored
// resolved. Exactly one of env/file is set in a valid reference; both empty means "unset".
struct SecretRef {
  std::string env{};   // {env: NAME}
  std::string file{};  // {file: NAME}, inside the controller's secrets directory
  bool empty() const { return env.empty() && file.empty(); }
  friend bool operator==(const SecretRef&, const SecretRef&) = default;
};

struct OwnerReference {
  Kind kind = Kind::kAgentWorker;
  std::string name;
  std::string uid;
  bool controller = true;
  friend bool operator==(const OwnerReference&, const OwnerReference&) = default;
};

struct ObjectMeta {
  // User-set.
  std::string name;
  std::string namespace_ = std::string(kDefaultNamespace);  // "namespace"
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // Server-set (ignored when read from a manifest).
  std::string uid;
  int64_t generation = 0;
  int64_t resource_version = 0;    // "resourceVersion": the store revision of the last write.
  std::string creation_timestamp;  // RFC 3339 UTC, "" when unset.
  std::string deletion_timestamp;  // RFC 3339 UTC, "" when not being deleted.
  std::vector<std::string> finalizers;
  std::vector<OwnerReference> owner_references;  // "ownerReferences"
  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

enum class ConditionStatus { kTrue, kFalse, kUnknown };
std::string_view ConditionStatusName(ConditionStatus s);  // "True", "False", "Unknown"

struct Condition {
  std::string type;  // "Ready", "Synced", …
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;  // CamelCase
  std::string message;
  std::string last_transition_time;  // "lastTransitionTime", RFC 3339
  int64_t observed_generation = 0;   // "observedGeneration"
  friend bool operator==(const Condition&, const Condition&) = default;
};

// ---- Workspace ------------------------------------------------------------------------------

struct DatabricksConnection {
  std::string host;
  std::string profile;
  std::string workspace_id;      // "workspaceId"
  SecretRef token_from;          // "tokenFrom"
  SecretRef client_id_from;      // "clientIdFrom"
  SecretRef client_secret_from;  // "clientSecretFrom"
  friend bool operator==(const DatabricksConnection&, const DatabricksConnection&) = default;
};

struct OpenAiConnection {
  std::string base_url;    // "baseUrl"
  SecretRef api_key_from;  // "apiKeyFrom"
  friend bool operator==(const OpenAiConnection&, const OpenAiConnection&) = default;
};

struct WorkspaceLimits {
  double requests_per_second = 0;  // "requestsPerSecond"; 0 = controller default
  int max_sandboxes = 0;           // "maxSandboxes"; 0 = no limit of ours (API caps at 100)
  // "maxConcurrentTasks": the most AgentTasks of the workspace Submitted or Running at once,
  // held in the store (Store::AcquireTaskSlot), so across sbxd replicas; 0 = no limit.
  int max_concurrent_tasks = 0;
  friend bool operator==(const WorkspaceLimits&, const WorkspaceLimits&) = default;
};

// A non-negative decimal amount in millionths ("micro-units"): prices and costs are kept as
// integers so that sums never drift (DESIGN §8.2). Written as a decimal string (api/usage.h).
using Micros = int64_t;

// Workspace.spec.pricing (DESIGN §8.2): currency-less prices; unset ones count 0, except a
// missing cached-input price, which is the input price.
struct WorkspacePricing {
  std::optional<Micros> compute_per_hour;                 // "computePerHour"
  std::optional<Micros> input_tokens_per_million;         // "inputTokensPerMillion"
  std::optional<Micros> cached_input_tokens_per_million;  // "cachedInputTokensPerMillion"
  std::optional<Micros> output_tokens_per_million;        // "outputTokensPerMillion"
  friend bool operator==(const WorkspacePricing&, const WorkspacePricing&) = default;
};

enum class BudgetPeriod { kDay, kMonth };  // UTC

// Workspace.spec.budget (DESIGN §8.2): any subset of the limits, per UTC period. When one is
// reached, new tasks of the workspace stay Queued (reason BudgetExceeded); running turns finish.
struct WorkspaceBudget {
  BudgetPeriod period = BudgetPeriod::kMonth;
  std::optional<int64_t> tokens;        // input + output tokens
  std::optional<Micros> compute_hours;  // "computeHours": the sandboxes' RUNNING hours (decimal)
  std::optional<Micros> cost;           // needs spec.pricing
  friend bool operator==(const WorkspaceBudget&, const WorkspaceBudget&) = default;
};

struct WorkspaceSpec {
  DatabricksConnection databricks;
  OpenAiConnection openai;
  WorkspaceLimits limits;
  std::optional<WorkspacePricing> pricing;
  std::optional<WorkspaceBudget> budget;
  friend bool operator==(const WorkspaceSpec&, const WorkspaceSpec&) = default;
};

// Workspace.status.usage: what the workspace's tasks consumed in the current budget period (the
// budget's, else the UTC month), from the usage ledger (Store::SumUsage), which keeps each
// attempt's usage after its task is deleted.
struct WorkspaceUsage {
  std::string period;               // "2026-12" (Month) or "2026-12-04" (Day)
  int64_t input_tokens = 0;         // "inputTokens"
  int64_t cached_input_tokens = 0;  // "cachedInputTokens"
  int64_t output_tokens = 0;        // "outputTokens"
  int64_t reasoning_tokens = 0;     // "reasoningTokens"
  // "computeSeconds" (milliseconds kept, written as seconds): RUNNING time of the workspace's
  // sandboxes in the period, as sbx observed it (what the compute bill counts).
  int64_t compute_millis = 0;
  int64_t tasks = 0;  // tasks that finished in the period
  std::string cost;   // "0.001250"; "" without spec.pricing
  friend bool operator==(const WorkspaceUsage&, const WorkspaceUsage&) = default;
};

struct WorkspaceStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;  // DatabricksReady, OpenAIReady, Ready, BudgetExceeded
  WorkspaceUsage usage;
  friend bool operator==(const WorkspaceStatus&, const WorkspaceStatus&) = default;
};

// ---- Sandbox --------------------------------------------------------------------------------

// Running: kept running. Stopped: kept stopped. OnDemand (DESIGN §7.2): running while its
// workers have work (a task, a session waiting for its executor, the first bring-up), stopped
// `idleStop` after the last of it.
enum class Power { kRunning, kStopped, kOnDemand };

// Sandbox.spec.idleStop: how long an OnDemand sandbox stays running once idle.
inline constexpr std::chrono::seconds kDefaultIdleStop{10 * 60};
inline constexpr std::chrono::seconds kMinIdleStop{1};
inline constexpr std::chrono::seconds kMaxIdleStop{24 * 60 * 60};
enum class DeletionPolicy { kDelete, kOrphan };

struct SetupStep {
  std::string name;
  std::string run;  // a bash script, run with /bin/bash -c after every boot; must be idempotent
  std::chrono::seconds timeout{300};
  friend bool operator==(const SetupStep&, const SetupStep&) = default;
};

struct SandboxSpec {
  std::string workspace_ref = std::string(kDefaultWorkspaceRef);  // "workspaceRef"
  std::string sandbox_id;    // "sandboxId"; defaulted to "<namespace>-<name>"
  std::string display_name;  // "displayName"
  std::optional<std::chrono::seconds> inactivity_timeout;  // "inactivityTimeout": "15m"
  std::string image;  // → spec.environment.image_uri; immutable once created
  Power power = Power::kRunning;
  // "idleStop": power OnDemand only; defaulted to 10m there (api/defaults.cc).
  std::optional<std::chrono::seconds> idle_stop;
  std::vector<SetupStep> setup;
  DeletionPolicy deletion_policy = DeletionPolicy::kDelete;  // "deletionPolicy"
  friend bool operator==(const SandboxSpec&, const SandboxSpec&) = default;
};

struct SetupResult {
  std::string name;
  std::string boot_id;  // "bootId": the boot this step ran in
  int exit_code = 0;    // "exitCode"
  bool succeeded = false;
  std::string message;      // tail of output on failure
  std::string finished_at;  // "finishedAt"
  friend bool operator==(const SetupResult&, const SetupResult&) = default;
};

// Sandbox.status.usage (DESIGN §8.2): the RUNNING time sbx observed since it created the
// sandbox (controller/reconcilers/sandbox_usage.h). Counted up to runningSince; the interval
// from there is open while the sandbox runs and is added on the next status write.
struct SandboxUsage {
  int64_t running_millis = 0;  // "runningSeconds" (milliseconds kept, written as seconds)
  std::string running_since;   // "runningSince": RFC 3339 with milliseconds; "" unless RUNNING
  friend bool operator==(const SandboxUsage&, const SandboxUsage&) = default;
};

struct SandboxStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;
  // What the sandbox was created as, recorded before the create call: "sandboxes/<id>" and the
  // Workspace it lives in. spec.sandboxId and spec.workspaceRef may not move away from them.
  std::string sandbox_name;   // "sandboxName": "sandboxes/<id>"
  std::string workspace_ref;  // "workspaceRef"
  std::string state;          // "RUNNING", "STOPPED", … (SANDBOX_STATE_ prefix dropped)
  std::string create_time;    // "createTime"
  std::string boot_id;        // "bootId"
  std::vector<SetupResult> setup;
  // Provisionings in a row that ended STOPPED instead of RUNNING, and when the next start may
  // go (the engine's Backoff over that count); both cleared once the sandbox runs.
  int32_t provisioning_failures = 0;  // "provisioningFailures"
  std::string next_start_after;       // "nextStartAfter", RFC 3339
  // Power OnDemand: since when nothing has needed the sandbox (RFC 3339; empty while something
  // does). Kept in status so that a restart of sbxd neither stops it early nor forgets to stop
  // it; the stop is due at idleSince + spec.idleStop.
  std::string idle_since;  // "idleSince"
  SandboxUsage usage;
  friend bool operator==(const SandboxStatus&, const SandboxStatus&) = default;
};

// ---- AgentWorker ----------------------------------------------------------------------------

enum class RestartPolicy { kAlways, kNever };

struct AgentSpec {
  std::string model;
  std::string instructions;
  friend bool operator==(const AgentSpec&, const AgentSpec&) = default;
};

// One environment variable of the executor: a plain `value`, or `valueFrom` a secret reference
// (resolved by the controller, passed through exec-sync envs only).
struct EnvVar {
  std::string name;
  std::string value;
  SecretRef value_from;  // "valueFrom"
  friend bool operator==(const EnvVar&, const EnvVar&) = default;
};

struct ExecutorSpec {
  std::string command = "codex";
  std::vector<std::string> args;
  std::vector<EnvVar> env;  // e.g. RUST_LOG; not CODEX_API_KEY, CODEX_HOME or SBX_*
  SecretRef api_key_from;   // "apiKeyFrom"; default: controller env OPENAI_EXECUTOR_API_KEY
  friend bool operator==(const ExecutorSpec&, const ExecutorSpec&) = default;
};

// How a worker's tasks use sessions: one standing session for all (Shared), or a fresh one per
// task (PerTask: its own session, workspace /home/sandbox-agent/tasks/<uid> and executor,
// closed when the task ends; DESIGN §8.1).
enum class SessionMode { kShared, kPerTask };

struct AgentWorkerSpec {
  std::string sandbox_ref;             // "sandboxRef"; exactly one of sandbox_ref / sandbox
  std::optional<SandboxSpec> sandbox;  // inline template: the worker owns a Sandbox named after it
  AgentSpec agent;
  std::string workspace_directory =
      std::string(kDefaultWorkspaceDirectory);  // "workspaceDirectory"
  ExecutorSpec executor;
  RestartPolicy restart_policy = RestartPolicy::kAlways;  // "restartPolicy"
  // "session"; a pool sets its replicas' from its own spec.session.
  SessionMode session = SessionMode::kShared;
  friend bool operator==(const AgentWorkerSpec&, const AgentWorkerSpec&) = default;
};

struct ExecutorStatus {
  int64_t pid = 0;
  std::string launched_at;  // "launchedAt"
  int restarts = 0;
  std::string last_exit_reason;  // "lastExitReason"
  // Hash of what the running executor was launched with (command, args, env, apiKeyFrom,
  // workspaceDirectory; references, never secret values): a different spec relaunches it.
  std::string spec_hash;  // "specHash"
  // The executor schedule (controller/reconcilers/executor_schedule.h), kept here so that a
  // restart of sbxd neither probes nor launches early: when the last probe (or launch report)
  // looked inside the sandbox, the sandbox boot it saw, and, after an exit was diagnosed, when
  // the next launch may go (the crash-loop delay; cleared by the launch).
  std::string last_probe_at;      // "lastProbeAt"
  std::string probed_boot_id;     // "probedBootId"
  std::string next_launch_after;  // "nextLaunchAfter"
  friend bool operator==(const ExecutorStatus&, const ExecutorStatus&) = default;
};

struct AgentWorkerStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;
  std::string session_id;      // "sessionId"
  std::string environment_id;  // "environmentId"
  std::string remote_url;      // "remoteUrl"
  // What the session was created (or last updated) with: agent.model and agent.instructions as
  // a hash (a change updates the session), and the workspace directory (a change replaces it:
  // the API cannot move a session's environment).
  std::string agent_hash;           // "agentHash"
  std::string workspace_directory;  // "workspaceDirectory"
  ExecutorStatus executor;
  std::string environment_status;  // "environmentStatus"
  // Power OnDemand. The environment the executor was last seen connected to: the worker's
  // bring-up is over once it equals environmentId (a new session needs one again).
  std::string connected_environment_id;  // "connectedEnvironmentId"
  // When sbx saw the session ask for its executor (a pending environment_connection in
  // required_actions: input sent straight to the session while the sandbox slept); cleared once
  // the executor is connected. Its sandbox wakes while it is set.
  std::string wake_requested_at;  // "wakeRequestedAt"
  friend bool operator==(const AgentWorkerStatus&, const AgentWorkerStatus&) = default;
};

// ---- AgentTask (DESIGN §7.1) ----------------------------------------------------------------

// Bounds of AgentTask.spec (validated; api/validation.h).
inline constexpr std::chrono::seconds kDefaultTaskTimeout{30 * 60};
inline constexpr std::chrono::seconds kMinTaskTimeout{1};
inline constexpr std::chrono::seconds kMaxTaskTimeout{24 * 60 * 60};
inline constexpr int64_t kDefaultCollectMaxBytes = int64_t{1} << 20;  // 1Mi
inline constexpr int64_t kMaxCollectBytes = int64_t{16} << 20;        // 16Mi, per file and task
// spec.backoffLimit: retries after the first attempt (DESIGN §8.1); at most this many.
inline constexpr int32_t kMaxTaskBackoffLimit = 100;
// The delay before retry n (n ≥ 1) is kFirstRetryDelay × 2^(n-1), capped at kMaxRetryDelay, and
// never shorter than a Retry-After the failed attempt was given.
inline constexpr std::chrono::seconds kFirstRetryDelay{10};
inline constexpr std::chrono::seconds kMaxRetryDelay{60 * 60};

// What a failed attempt counts as, for spec.retryOn (DESIGN §8.1). InfrastructureFailure: the
// executor or the sandbox was lost mid-turn, the input POST got a 5xx or a connection failure,
// or turn.failed came with one of the service's infrastructure codes (reference §2.3; the
// codes are in controller/reconcilers/task_attempts.h). Failed: any other failure,
// the agent's own (unknown codes included). TimedOut: spec.timeout passed.
enum class RetryOn { kInfrastructureFailure, kFailed, kTimedOut };

struct WorkerSelector {
  std::map<std::string, std::string> match_labels;  // "matchLabels"; all must match
  friend bool operator==(const WorkerSelector&, const WorkerSelector&) = default;
};

// One file read back from the sandbox after the turn, relative to the worker's
// workspaceDirectory.
struct CollectSpec {
  std::string path;
  int64_t max_bytes = kDefaultCollectMaxBytes;  // "maxBytes": 1048576 or "1Mi"; ≤ 16Mi
  friend bool operator==(const CollectSpec&, const CollectSpec&) = default;
};

struct AgentTaskSpec {
  std::string worker_ref;                         // "workerRef"; exactly one of these three
  std::optional<WorkerSelector> worker_selector;  // "workerSelector": any Ready worker
  std::string pool_ref;  // "poolRef": an idle Ready replica of that AgentPool (DESIGN §8.1)
  std::string input;     // the user message of the turn
  std::chrono::seconds timeout = kDefaultTaskTimeout;  // from submission; 1s–24h
  std::vector<CollectSpec> collect;
  std::optional<std::chrono::seconds> ttl_after_finished;  // "ttlAfterFinished"
  // Retries (DESIGN §8.1): "backoffLimit" is the number of retries (1 allows 2 attempts), of an
  // attempt whose failure is one of "retryOn". Each attempt is a new turn; spec.timeout counts
  // per attempt, from its submission.
  int32_t backoff_limit = 0;  // "backoffLimit", 0–100
  // "retryOn"; unset means [InfrastructureFailure] (RetriesOn), [] means never.
  std::optional<std::vector<RetryOn>> retry_on;
  // "keepWorkspace": on a PerTask worker, leave the task's directory in the sandbox when it ends.
  bool keep_workspace = false;
  friend bool operator==(const AgentTaskSpec&, const AgentTaskSpec&) = default;
};

// Whether spec.retryOn (or its default, [InfrastructureFailure]) names `kind`.
bool RetriesOn(const AgentTaskSpec& spec, RetryOn kind);

// Pending → Queued → Submitted → Running → Succeeded | Failed | Cancelled | TimedOut.
enum class TaskPhase {
  kPending,
  kQueued,
  kSubmitted,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut,
};
std::string_view TaskPhaseName(TaskPhase phase);  // "Pending", "Queued", …
// Succeeded, Failed, Cancelled and TimedOut: nothing changes the task any more (but TTL).
bool IsFinished(TaskPhase phase);

struct TaskError {
  std::string code;  // the service's error code ("connection_failed", …) or sbx's reason
  std::string message;
  friend bool operator==(const TaskError&, const TaskError&) = default;
};

// Token usage of the turn (the service's TokenUsage totals).
struct TaskUsage {
  int64_t input_tokens = 0;   // "inputTokens"
  int64_t output_tokens = 0;  // "outputTokens"
  int64_t total_tokens = 0;   // "totalTokens"
  friend bool operator==(const TaskUsage&, const TaskUsage&) = default;
};

// What a task consumed (DESIGN §8.2), summed over its attempts: the token usage its root turn
// reports, read from the turn after it ended (reference §2.4: null on the terminal events).
// Whether the service folds a subagent's turns into its root turn's usage is unconfirmed; sbx
// counts what the root turn reports, nothing more. Reasoning tokens are part of output tokens,
// cached ones of input tokens.
struct TaskUsageTotals {
  int64_t input_tokens = 0;         // "inputTokens"
  int64_t cached_input_tokens = 0;  // "cachedInputTokens"
  int64_t output_tokens = 0;        // "outputTokens"
  int64_t reasoning_tokens = 0;     // "reasoningTokens"
  // "computeSeconds" (milliseconds kept, written as seconds): its sandbox's RUNNING time while
  // each attempt needed it (from the attempt's wake or submission to its end), summed.
  int64_t compute_millis = 0;
  // "attemptStartRunningSeconds": the sandbox's usage.runningSeconds when the running attempt
  // began to need it (unset: not yet, or no attempt running); its compute is the growth since.
  std::optional<int64_t> attempt_start_running_millis;
  // At the workspace's prices when the attempt ended (6 places); "" without spec.pricing.
  std::string cost;
  friend bool operator==(const TaskUsageTotals&, const TaskUsageTotals&) = default;
};

struct TaskResult {
  std::string message;  // the last assistant message of the turn
  TaskError error;      // empty on success
  TaskUsage usage;
  friend bool operator==(const TaskResult&, const TaskResult&) = default;
};

// One collected file: its size and digest (the bytes are in the store, Store::GetArtifact), or
// why it could not be read.
// One attempt of a task (status.attempts[], DESIGN §8.1): written when the attempt ends.
struct TaskAttempt {
  int32_t attempt = 0;  // 1, 2, …
  std::string worker;
  std::string turn_id;                    // "turnId"; "" when no turn started
  TaskPhase phase = TaskPhase::kPending;  // Succeeded, Failed, Cancelled or TimedOut
  TaskError error;
  std::string started_at;    // "startedAt": the attempt's submission
  std::string completed_at;  // "completedAt"
  friend bool operator==(const TaskAttempt&, const TaskAttempt&) = default;
};

struct ArtifactStatus {
  std::string path;
  int64_t bytes = 0;
  std::string sha256;  // lowercase hex
  std::string error;   // "" when collected
  friend bool operator==(const ArtifactStatus&, const ArtifactStatus&) = default;
};

struct AgentTaskStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;  // Submitted, Completed
  TaskPhase phase = TaskPhase::kPending;
  std::string worker;      // the AgentWorker picked (name, same namespace)
  std::string session_id;  // "sessionId": that worker's session at submission
  std::string turn_id;     // "turnId": the root turn of this task
  int queue_position = 0;  // "queuePosition": 1 = next; 0 when not queued
  // Exactly once (DESIGN §7.1): the Idempotency-Key of the input POST (the task uid), written
  // together with phase=Submitted and submittedAt BEFORE the POST; a retry after a crash sends
  // the same key, so the service starts no second turn.
  std::string idempotency_key;  // "idempotencyKey"
  // Root turns of the session that existed just before the submission (the newest id), so that
  // recovery (reference §2.6) can tell this task's turn from older ones.
  std::string previous_turn_id;  // "previousTurnId"
  std::string submitted_at;      // "submittedAt", RFC 3339
  std::string started_at;        // "startedAt": turn.created/in_progress seen
  std::string completed_at;      // "completedAt": the phase became a finished one
  // When cancel (of a cancel request, timeout or deletion) was sent, and why: "Cancelled" or
  // "TimedOut"; the phase follows when turn.cancelled arrives.
  std::string cancel_requested_at;  // "cancelRequestedAt"
  std::string cancel_reason;        // "cancelReason"
  TaskResult result;
  int commands = 0;  // command_execution items of the turn
  std::vector<ArtifactStatus> artifacts;
  // One entry per attempt that has ended, the first included; the running attempt is number
  // attempts.size() + 1. Between attempts the task is Queued (reason Retrying) until
  // "nextAttemptAt" (RFC 3339; "" otherwise).
  std::vector<TaskAttempt> attempts;
  std::string next_attempt_at;  // "nextAttemptAt"
  // Summed as each attempt ends, in the status write that records it (so never twice).
  TaskUsageTotals usage;
  friend bool operator==(const AgentTaskStatus&, const AgentTaskStatus&) = default;
};

// ---- GitSource (DESIGN §7.3) ---------------------------------------------------------------

// GitSource.spec.interval: how often the repository is fetched (and re-applied).
inline constexpr std::chrono::seconds kDefaultGitInterval{60};
inline constexpr std::chrono::seconds kMinGitInterval{1};
inline constexpr std::chrono::seconds kMaxGitInterval{24 * 60 * 60};

// What to check out; exactly one field is set in a valid spec (there is no default branch).
struct GitRef {
  std::string branch;
  std::string tag;
  std::string commit;  // a full 40-hex commit id
  friend bool operator==(const GitRef&, const GitRef&) = default;
};

// spec.prune: `true`/`false`, or `{enabled, allowEmpty}`. Enabled: members of the applyset that
// are no longer in the path are deleted (sbxctl apply --prune). allowEmpty: a path with no
// manifests at all prunes every member instead of being refused (--prune-allow-empty).
// Deleting a GitSource with prune enabled deletes the members of its applyset (a finalizer);
// with prune disabled they stay.
struct GitPrune {
  bool enabled = false;
  bool allow_empty = false;  // "allowEmpty"
  friend bool operator==(const GitPrune&, const GitPrune&) = default;
};

// At most one is set. sshKeyFrom: a private key (an ssh:// or scp-like url); tokenFrom: an
// HTTPS token, sent as the password of basic authentication (user "x-access-token"). Secret
// references, resolved like every other one (api/validation.h ValidateSecretRef).
struct GitCredentials {
  SecretRef ssh_key_from;  // "sshKeyFrom"
  SecretRef token_from;    // "tokenFrom"
  friend bool operator==(const GitCredentials&, const GitCredentials&) = default;
};

struct GitSourceSpec {
  std::string url;  // https://, ssh://, user@host:path, or file:// (operator-enabled)
  GitRef ref;
  std::string path = ".";  // directory within the repository, read recursively
  std::chrono::seconds interval = kDefaultGitInterval;  // 1s–24h
  GitPrune prune;
  std::string applyset;  // defaulted to "gitsource-<namespace>-<name>"
  GitCredentials credentials;
  friend bool operator==(const GitSourceSpec&, const GitSourceSpec&) = default;
};

struct GitSourceStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;  // Synced, Ready
  std::string revision;               // the commit last applied
  std::string last_applied_at;        // "lastAppliedAt", RFC 3339
  int32_t objects = 0;                // objects in the last applied commit
  // The commit of the last attempt (applied or refused): a failing commit is retried only
  // after `interval`, like every sync.
  std::string last_attempted_revision;  // "lastAttemptedRevision"
  std::string last_attempt_at;          // "lastAttemptAt", RFC 3339
  friend bool operator==(const GitSourceStatus&, const GitSourceStatus&) = default;
};

// ---- AgentPool (DESIGN §8.1) ----------------------------------------------------------------

// Label on every replica of a pool: the pool's name.
inline constexpr std::string_view kPoolLabel = "sbx.dev/pool";
// Annotation on a pool replica while a task is bound to it: the task's uid. Written by the
// AgentTask reconciler with a resourceVersion check, so two tasks never hold one replica.
inline constexpr std::string_view kBoundTaskAnnotation = "sbx.dev/bound-task";
// Annotation on a pool replica: the pool's templateHash it was made from.
inline constexpr std::string_view kTemplateHashAnnotation = "sbx.dev/template-hash";
// Annotation on a pool replica: when its last binding was removed (RFC 3339), i.e. when it last
// became idle. The pool counts scaleDownAfter from it (or from the replica's creation), so it
// needs no finished task to know a replica's idle time.
inline constexpr std::string_view kIdleSinceAnnotation = "sbx.dev/idle-since";
inline constexpr std::chrono::seconds kDefaultScaleDownAfter{5 * 60};
inline constexpr std::chrono::seconds kDefaultProgressDeadline{10 * 60};
// Replicas a pool may have at most (spec.replicas.max).
inline constexpr int32_t kMaxPoolReplicas = 1000;

struct PoolTemplateMeta {
  std::map<std::string, std::string> labels;  // copied onto every replica
  friend bool operator==(const PoolTemplateMeta&, const PoolTemplateMeta&) = default;
};

// An AgentWorker spec with an inline sandbox: each replica owns its sandbox.
struct AgentPoolTemplate {
  PoolTemplateMeta metadata;
  AgentWorkerSpec spec;
  friend bool operator==(const AgentPoolTemplate&, const AgentPoolTemplate&) = default;
};

struct PoolReplicas {
  int32_t min = 0;
  int32_t max = 1;
  friend bool operator==(const PoolReplicas&, const PoolReplicas&) = default;
};

struct AgentPoolSpec {
  AgentPoolTemplate template_;  // "template"
  PoolReplicas replicas;
  int32_t warm = 0;  // idle Ready replicas kept ahead of demand (within max)
  std::chrono::seconds scale_down_after = kDefaultScaleDownAfter;  // "scaleDownAfter"
  SessionMode session = SessionMode::kPerTask;
  std::chrono::seconds progress_deadline = kDefaultProgressDeadline;  // "progressDeadline"
  friend bool operator==(const AgentPoolSpec&, const AgentPoolSpec&) = default;
};

struct AgentPoolStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;  // Ready, Progressing, ScalingLimited
  int32_t replicas = 0;               // replicas that exist
  int32_t ready = 0;                  // Ready (awake or asleep)
  int32_t busy = 0;                   // with a task bound
  int32_t idle = 0;                   // Ready, awake, no task
  int32_t sleeping = 0;               // Ready, their OnDemand sandbox asleep, no task
  int32_t queued = 0;                 // the pool's tasks not yet bound
  int32_t updated_replicas = 0;       // "updatedReplicas": made from the current template
  std::string template_hash;          // "templateHash"
  friend bool operator==(const AgentPoolStatus&, const AgentPoolStatus&) = default;
};

// ---- Notifier (DESIGN §8.3) -----------------------------------------------------------------

// How a notification is delivered. Webhook: a JSON POST signed as Standard Webhooks do
// (webhook-id, webhook-timestamp, webhook-signature), with spec.signingSecretFrom. Slack: a POST
// to a Slack incoming webhook, which is not signed.
enum class NotifierType { kWebhook, kSlack };
std::string_view NotifierTypeName(NotifierType type);  // "webhook", "slack"
// "webhook" or "slack"; kInvalidArgument names the accepted values.
StatusOr<NotifierType> ParseNotifierType(std::string_view text);

// The reasons a Notifier may subscribe to (spec.events), each sent once when it happens:
// TaskSucceeded, TaskFailed, TaskTimedOut and TaskCancelled at a task's final phase;
// WorkerNotReady when a worker's Ready has been False for 60 s; the others when their condition
// turns True.
inline constexpr std::string_view kNotifierEvents[] = {
    "TaskSucceeded",   "TaskFailed",     "TaskTimedOut",
    "TaskCancelled",   "WorkerNotReady", "ExecutorCrashLooping",
    "GitSourceFailed", "BudgetExceeded", "PoolScalingLimited"};
// Whether `reason` is one of kNotifierEvents (case-sensitive).
bool IsNotifierEvent(std::string_view reason);

// Which objects of the Notifier's namespace it hears about; empty: every one.
struct NotifierSelector {
  std::map<std::string, std::string> match_labels;  // "matchLabels"; all must match
  friend bool operator==(const NotifierSelector&, const NotifierSelector&) = default;
};

struct NotifierSpec {
  NotifierType type = NotifierType::kWebhook;
  // "urlFrom": the URL to POST to, a secret reference (a webhook URL is a credential); https://
  // unless its host is a loopback address, checked when it is resolved.
  SecretRef url_from;
  // "signingSecretFrom": the Standard Webhooks signing secret; required for webhook, not allowed
  // for slack.
  SecretRef signing_secret_from;
  std::vector<std::string> events;  // kNotifierEvents; at least one, no duplicates
  NotifierSelector selector;
  bool suspend = false;  // nothing is queued for delivery while set
  friend bool operator==(const NotifierSpec&, const NotifierSpec&) = default;
};

struct NotifierStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;  // Ready
  std::string last_delivered_at;      // "lastDeliveredAt", RFC 3339
  std::string last_error;             // "lastError": of the last failed delivery attempt
  int64_t pending = 0;                // notifications waiting for delivery
  int64_t delivered = 0;              // delivered since the Notifier was created
  int64_t dropped = 0;                // given up on (retries exhausted, or over the bound)
  friend bool operator==(const NotifierStatus&, const NotifierStatus&) = default;
};

// ---- The envelope ---------------------------------------------------------------------------

using Spec = std::variant<WorkspaceSpec, SandboxSpec, AgentWorkerSpec, AgentTaskSpec, GitSourceSpec,
                          AgentPoolSpec, NotifierSpec>;
using ResourceStatus =
    std::variant<WorkspaceStatus, SandboxStatus, AgentWorkerStatus, AgentTaskStatus,
                 GitSourceStatus, AgentPoolStatus, NotifierStatus>;

// One object of any kind. Invariant: spec and status hold the alternative matching `kind`
// (use MakeObject to get a consistent one).
struct Object {
  Kind kind = Kind::kSandbox;
  ObjectMeta metadata;
  Spec spec;
  ResourceStatus status;
  friend bool operator==(const Object&, const Object&) = default;

  // Typed accessors; abort if `kind` does not match (a bug).
  const SandboxSpec& sandbox_spec() const;
  SandboxSpec& sandbox_spec();
  const AgentWorkerSpec& agent_worker_spec() const;
  AgentWorkerSpec& agent_worker_spec();
  const WorkspaceSpec& workspace_spec() const;
  WorkspaceSpec& workspace_spec();
  const SandboxStatus& sandbox_status() const;
  SandboxStatus& sandbox_status();
  const AgentWorkerStatus& agent_worker_status() const;
  AgentWorkerStatus& agent_worker_status();
  const WorkspaceStatus& workspace_status() const;
  WorkspaceStatus& workspace_status();
  const AgentTaskSpec& agent_task_spec() const;
  AgentTaskSpec& agent_task_spec();
  const AgentTaskStatus& agent_task_status() const;
  AgentTaskStatus& agent_task_status();
  const GitSourceSpec& git_source_spec() const;
  GitSourceSpec& git_source_spec();
  const GitSourceStatus& git_source_status() const;
  GitSourceStatus& git_source_status();
  const AgentPoolSpec& agent_pool_spec() const;
  AgentPoolSpec& agent_pool_spec();
  const AgentPoolStatus& agent_pool_status() const;
  AgentPoolStatus& agent_pool_status();
  const NotifierSpec& notifier_spec() const;
  NotifierSpec& notifier_spec();
  const NotifierStatus& notifier_status() const;
  NotifierStatus& notifier_status();

  // The conditions of whichever status this object has.
  const std::vector<Condition>& conditions() const;
  std::vector<Condition>& conditions();
};

// An empty object of `kind` with default spec and status.
Object MakeObject(Kind kind, std::string name,
                  std::string namespace_ = std::string(kDefaultNamespace));

// Identity of an object in the store: kind + namespace + name.
struct ObjectKey {
  Kind kind = Kind::kSandbox;
  std::string namespace_ = std::string(kDefaultNamespace);
  std::string name;
  // clang-tidy 14 sees a literal 0 in the synthesized comparisons of a defaulted <=>.
  // NOLINTNEXTLINE(modernize-use-nullptr)
  friend auto operator<=>(const ObjectKey&, const ObjectKey&) = default;
  std::string ToString() const;  // "Sandbox/default/name"
};
ObjectKey KeyOf(const Object& object);

// The id of the sandbox a Sandbox object created: status.sandboxName without "sandboxes/"; ""
// before it created one.
std::string CreatedSandboxId(const SandboxStatus& status);

// Where a Sandbox object's sandbox lives: the Workspace it names and the sandbox id there.
struct SandboxIdentity {
  std::string workspace_ref;
  std::string sandbox_id;
};
// The sandbox sbx created (or claimed as its own) for this Sandbox object: status.sandboxName
// and status.workspaceRef, written only by the controller. Never spec.sandboxId/workspaceRef:
// their author may edit them after creation to point at a sandbox sbx never created (#24).
// Every path that execs in, reads from or launches into a sandbox resolves it here.
// FailedPrecondition if sbx has created none yet.
StatusOr<SandboxIdentity> CreatedSandbox(const Object& sandbox);
// The sandbox the Sandbox object stands for, created or still to be created: CreatedSandbox once
// there is one, else the spec. For the Sandbox reconciler and for indexes, never for a call into
// the sandbox.
SandboxIdentity PlannedSandbox(const Object& sandbox);

// Whether the object carries every label of `selector` with the same value (an empty selector
// matches everything).
bool MatchesLabels(const Object& object, const std::map<std::string, std::string>& selector);

// The AgentWorker an AgentTask was given (status.worker) or names (spec.workerRef); "" while a
// workerSelector or poolRef has not picked one.
std::string AssignedWorker(const Object& task);

// Whether the object's work is over and nothing but its TTL changes it any more: an AgentTask in
// a finished phase (IsFinished). No other kind ever finishes. The store indexes this
// (ListOptions::unfinished_only), so a reconciler can look at the live tasks alone.
bool HasFinished(const Object& object);

// Condition helpers (used by reconcilers and sbxctl).
const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type);
// The status of condition `type`; kUnknown when there is none.
ConditionStatus ConditionStatusOf(const std::vector<Condition>& conditions, std::string_view type);
// Sets or replaces the condition of that type; keeps last_transition_time when status is
// unchanged, else sets it to `now` (RFC 3339). Returns true if anything changed.
bool SetCondition(std::vector<Condition>& conditions, Condition condition, std::string_view now);

}  // namespace sbx::api
