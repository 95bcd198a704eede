// The condition vocabulary: every condition type and reason sbx writes to a status, in one place.
// Reconcilers set them, ClassifyError maps errors onto them, and sbxctl's printers and `wait`
// read them; all of them name these constants instead of spelling the strings. A reason is
// CamelCase (Kubernetes' convention) and may be shown to users; changing one changes the API.
// Constants only; thread-safe.
#pragma once

#include <string_view>

namespace sbx::api {

// Condition types.
namespace condition {
// Every kind: whether the object is what its spec asks (derived from the kind's other
// conditions where it has some), and whether the last reconcile could observe and act.
inline constexpr std::string_view kReady = "Ready";
inline constexpr std::string_view kSynced = "Synced";
// AgentWorker: the parts Ready is made of.
inline constexpr std::string_view kSandboxReady = "SandboxReady";
inline constexpr std::string_view kSessionReady = "SessionReady";
inline constexpr std::string_view kExecutorRunning = "ExecutorRunning";
inline constexpr std::string_view kExecutorConnected = "ExecutorConnected";
// Workspace: one per configured cloud, and the wait for its users while it is deleted.
inline constexpr std::string_view kDatabricksReady = "DatabricksReady";
inline constexpr std::string_view kOpenAiReady = "OpenAIReady";
inline constexpr std::string_view kDeleting = "Deleting";
// Workspace (DESIGN §8.2): a limit of spec.budget is reached in the current period (True, reason
// BudgetExceeded); new tasks of the workspace are held until it is not (False, WithinBudget).
inline constexpr std::string_view kBudgetExceeded = "BudgetExceeded";
// AgentTask: the input was POSTed (True) or is waiting (False: queued, worker not ready); the
// task reached its outcome (True, reason = the final phase) or not yet (False).
inline constexpr std::string_view kSubmitted = "Submitted";
inline constexpr std::string_view kCompleted = "Completed";
// AgentPool (DESIGN §8.1): a rollout of a new template is under way (True), done (True, reason
// RolloutComplete) or stuck (False); queued work is held at spec.replicas.max (True).
inline constexpr std::string_view kProgressing = "Progressing";
inline constexpr std::string_view kScalingLimited = "ScalingLimited";
}  // namespace condition

// Condition reasons.
namespace reason {
// Success of the condition of the same name.
inline constexpr std::string_view kReady = "Ready";
inline constexpr std::string_view kSynced = "Synced";
inline constexpr std::string_view kSandboxReady = "SandboxReady";
inline constexpr std::string_view kSessionReady = "SessionReady";
inline constexpr std::string_view kRunning = "Running";
inline constexpr std::string_view kConnected = "Connected";
inline constexpr std::string_view kAuthenticated = "Authenticated";
// A PerTask worker: sessions and executors are each task's (SessionReady, ExecutorRunning and
// ExecutorConnected say so rather than report a standing one).
inline constexpr std::string_view kPerTask = "PerTask";

// ClassifyError's classes (controller/base/classify_error.h): transient …
inline constexpr std::string_view kOk = "Ok";
inline constexpr std::string_view kUnavailable = "Unavailable";
inline constexpr std::string_view kTimeout = "Timeout";
inline constexpr std::string_view kRateLimited = "RateLimited";
inline constexpr std::string_view kConflict = "Conflict";
inline constexpr std::string_view kInternalError = "InternalError";
inline constexpr std::string_view kUnknown = "Unknown";
inline constexpr std::string_view kCancelled = "Cancelled";
inline constexpr std::string_view kDataLoss = "DataLoss";
// … a call's retry handed back to the work queue rather than waited inline
// (controller/base/inline_wait.h): not an observation, so reconcilers keep what they last saw
// (classify_error.h RetryScheduled).
inline constexpr std::string_view kRetryScheduled = "RetryScheduled";
// … and terminal.
inline constexpr std::string_view kInvalidSpec = "InvalidSpec";
inline constexpr std::string_view kFailedPrecondition = "FailedPrecondition";
inline constexpr std::string_view kPermissionDenied = "PermissionDenied";
inline constexpr std::string_view kUnauthenticated = "Unauthenticated";
inline constexpr std::string_view kAlreadyExists = "AlreadyExists";
inline constexpr std::string_view kNotFound = "NotFound";
inline constexpr std::string_view kUnimplemented = "Unimplemented";
// Reasons terminal errors carry (Status::reason, set by the cloud clients).
inline constexpr std::string_view kCredentialsMissing = "CredentialsMissing";
inline constexpr std::string_view kSecretNotAllowed = "SecretNotAllowed";

// Sandbox.
inline constexpr std::string_view kPending = "Pending";
inline constexpr std::string_view kCreating = "Creating";
inline constexpr std::string_view kStarting = "Starting";
inline constexpr std::string_view kStopping = "Stopping";
inline constexpr std::string_view kStopped = "Stopped";
inline constexpr std::string_view kUnknownState = "UnknownState";
inline constexpr std::string_view kSetupRunning = "SetupRunning";
inline constexpr std::string_view kSetupFailed = "SetupFailed";
inline constexpr std::string_view kQuotaExceeded = "QuotaExceeded";
// PENDING → STOPPING/STOPPED without reaching RUNNING: the API has no FAILED state, this is how a
// failed provisioning shows (reference §4).
inline constexpr std::string_view kProvisioningFailed = "ProvisioningFailed";
inline constexpr std::string_view kImmutableFieldChanged = "ImmutableFieldChanged";
inline constexpr std::string_view kSandboxIdConflict = "SandboxIdConflict";
// Power OnDemand (Sandbox and AgentWorker): stopped because nothing needs it — Ready=True, it can
// take work — and being started (or waiting for STOPPED to start again) because something does.
inline constexpr std::string_view kSleeping = "Sleeping";
inline constexpr std::string_view kWaking = "Waking";

// AgentWorker: its sandbox …
inline constexpr std::string_view kSandboxNotFound = "SandboxNotFound";
inline constexpr std::string_view kSandboxNotReady = "SandboxNotReady";
inline constexpr std::string_view kSandboxNotRunning = "SandboxNotRunning";
inline constexpr std::string_view kSandboxStopped = "SandboxStopped";
inline constexpr std::string_view kSandboxNameConflict = "SandboxNameConflict";
// … its session …
inline constexpr std::string_view kSessionLost = "SessionLost";
inline constexpr std::string_view kSessionReplaced = "SessionReplaced";
// … and its executor (the exit diagnoses of DiagnoseExecutorLog among them).
inline constexpr std::string_view kLaunching = "Launching";
inline constexpr std::string_view kExecutorNotRunning = "ExecutorNotRunning";
inline constexpr std::string_view kExecutorNotConnected = "ExecutorNotConnected";
inline constexpr std::string_view kExecutorExited = "ExecutorExited";
inline constexpr std::string_view kExecutorExitedOnStart = "ExecutorExitedOnStart";
inline constexpr std::string_view kExecutorNotFound = "ExecutorNotFound";
inline constexpr std::string_view kWorkspaceDirectoryMissing = "WorkspaceDirectoryMissing";
inline constexpr std::string_view kIpNotAuthorized = "IPNotAuthorized";
inline constexpr std::string_view kMissingScope = "MissingScope";
inline constexpr std::string_view kMissingExecutorKey = "MissingExecutorKey";
// ExecutorConnected=False carries the environment's own status in CamelCase
// (openai::EnvironmentStatus, e.g. "Pending", "Disconnected"); the one the reconciler acts on:
inline constexpr std::string_view kDisconnected = "Disconnected";

// AgentTask: why it waits (Submitted=False) …
inline constexpr std::string_view kWaitingForWorker = "WaitingForWorker";  // not Ready, no session
inline constexpr std::string_view kNoMatchingWorker = "NoMatchingWorker";  // workerSelector
inline constexpr std::string_view kWorkerNotFound = "WorkerNotFound";
inline constexpr std::string_view kQueued = "Queued";  // behind other tasks of its worker
inline constexpr std::string_view kWaitingForExecutor = "WaitingForExecutor";  // executor gone
inline constexpr std::string_view kWaitingForWake = "WaitingForWake";  // OnDemand sandbox asleep
inline constexpr std::string_view kPoolNotFound = "PoolNotFound";      // poolRef
inline constexpr std::string_view kWaitingForReplica = "WaitingForReplica";  // no idle replica
// An attempt failed and a retry is left: Queued until status.nextAttemptAt (DESIGN §8.1).
inline constexpr std::string_view kRetrying = "Retrying";
// Its workspace's budget is used up for the period (also the Workspace's BudgetExceeded
// condition's reason, and its event); the task starts when the period rolls over or the budget
// is raised. Not demand for a pool.
inline constexpr std::string_view kBudgetExceeded = "BudgetExceeded";
// AgentTask Queued: its Workspace has spec.limits.maxConcurrentTasks tasks Submitted or Running.
inline constexpr std::string_view kConcurrencyLimited = "ConcurrencyLimited";
// … what it is doing (Submitted=True, Completed=False) …
inline constexpr std::string_view kSubmittedReason = "Submitted";
inline constexpr std::string_view kTurnRunning = "TurnRunning";
inline constexpr std::string_view kCancelling = "Cancelling";
// … and how it ended (Completed=True; the final phase's name).
inline constexpr std::string_view kSucceeded = "Succeeded";
inline constexpr std::string_view kFailed = "Failed";
inline constexpr std::string_view kTimedOut = "TimedOut";
// (Cancelled is reason::kCancelled above.)

// AgentPool.
inline constexpr std::string_view kNoReplicas = "NoReplicas";  // Ready=False: none is Ready
inline constexpr std::string_view kScalingUp = "ScalingUp";    // Ready=False: the first comes up
inline constexpr std::string_view kScaledToZero = "ScaledToZero";  // Ready=True: none needed
inline constexpr std::string_view kRollingOut = "RollingOut";
inline constexpr std::string_view kRolloutComplete = "RolloutComplete";
inline constexpr std::string_view kRolloutStuck = "RolloutStuck";
inline constexpr std::string_view kAtMaxReplicas = "AtMaxReplicas";
inline constexpr std::string_view kWithinLimits = "WithinLimits";
inline constexpr std::string_view kDeletingReplicas = "DeletingReplicas";

// Workspace.
inline constexpr std::string_view kUnreachable = "Unreachable";
inline constexpr std::string_view kNothingToCheck = "NothingToCheck";
inline constexpr std::string_view kInUse = "InUse";
inline constexpr std::string_view kWithinBudget = "WithinBudget";  // BudgetExceeded=False

// GitSource: the commit was applied; or why not (nothing was applied then).
inline constexpr std::string_view kApplied = "Applied";
inline constexpr std::string_view kFetchFailed = "FetchFailed";          // git fetch, ref, path
inline constexpr std::string_view kInvalidManifest = "InvalidManifest";  // file:line:col in message
inline constexpr std::string_view kObjectNotAllowed = "ObjectNotAllowed";  // other namespace, kind
inline constexpr std::string_view kEmptyPath = "EmptyPath";  // no manifests, prune not allowEmpty
inline constexpr std::string_view kApplyFailed = "ApplyFailed";  // the store refused the apply
inline constexpr std::string_view kApplysetConflict = "ApplysetConflict";  // shared, or members
                                                                           // in other namespaces
}  // namespace reason

}  // namespace sbx::api
