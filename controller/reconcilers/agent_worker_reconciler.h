// AgentWorkerReconciler: keeps one OpenAI agent session's `codex exec-server` running and
// connected inside a Databricks sandbox (DESIGN §3, the AgentWorker contract).
//
// Every reconcile, top to bottom:
//   1. the sandbox: the one named by spec.sandboxRef, or the Sandbox this worker owns (created
//      from the inline spec.sandbox template, named after the worker, with an ownerReference);
//      nothing further happens until it is Ready (SandboxReady);
//   2. the session: created once (self_hosted, spec.workspaceDirectory) behind an inventory
//      intent, adopted by its metadata after a crash, re-created when it is gone or failed
//      (SessionReady);
//   3. the executor, when nothing of ours can run (a new session, or the sandbox started since the
//      last launch): one exec-sync of the launch script, which launches `codex exec-server`
//      detached (setsid nohup) and idempotently (flock) unless ours already runs, with
//      CODEX_API_KEY only in the exec-sync envs — never argv, never logged — and reports like the
//      probe; no probe comes first;
//   4. the connection: GET /agents/environments/{id} (ExecutorConnected) every `status_interval`,
//      and every `verify_after_launch` after a launch until connected;
//   5. the probe, one exec-sync reporting whether the pid in /home/sandbox-agent/.sbx/<worker>/pid
//      is alive for this environment and this boot, whether the workspace directory and the
//      command exist, and the log tail: when a launched executor is not connected within
//      `connect_grace`, when the environment reports a disconnect, when the sandbox booted again
//      (status.bootId changed), and every `probe_interval`. An executor that exited is diagnosed
//      from its log into IPNotAuthorized, MissingScope, WorkspaceDirectoryMissing,
//      ExecutorNotFound or ExecutorExitedOnStart, with a CrashLoopBackOff-style delay (long for
//      auth reasons) instead of a hot loop, then launched again.
// In the common case a worker costs one exec-sync (the launch) to become Ready.
// Conditions: SandboxReady, SessionReady, ExecutorRunning, ExecutorConnected, and Ready derived
// from them (True whenever all four are); Synced says whether the last pass could observe and
// act. A transient API error marks the observation stale (Synced=False) and flips Ready only
// after `failure_threshold` of them in a row; a terminal one flips it at once.
// Deletion cancels an active turn and deletes the session, stops the executor and deletes the
// owned Sandbox object. A session the service refuses to delete (409, e.g. one that never ran a
// turn: "no durably bound CCA root") is retried every `session_delete.retry_after` and, after
// `session_delete.give_up_after`, recorded as abandoned (inventory kAbandoned, Warning
// SessionNotDeletable); the finalizer then completes.
//
// Thread-safety: Reconcile may run concurrently for different keys. Collaborators must outlive
// the reconciler.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "api/resources.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/clock.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/session_deletion.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct AgentWorkerReconcilerOptions {
  std::chrono::milliseconds status_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds probe_interval{std::chrono::minutes(5)};
  // After a launch: look at the environment this often until it is connected ...
  std::chrono::milliseconds verify_after_launch{std::chrono::seconds(1)};
  // ... or until this long has passed; then probe the executor inside the sandbox (an executor
  // that exits on start is diagnosed then). A connected executor needs no probe.
  std::chrono::milliseconds connect_grace{std::chrono::seconds(5)};
  // While launched but not yet connected: look at the environment this often.
  std::chrono::milliseconds connect_poll{std::chrono::seconds(5)};
  // Crash-loop backoff: base·2^(restarts-1), capped; auth failures wait auth_backoff.
  std::chrono::milliseconds crash_backoff_base{std::chrono::seconds(10)};
  std::chrono::milliseconds crash_backoff_cap{std::chrono::minutes(5)};
  std::chrono::milliseconds auth_backoff{std::chrono::minutes(10)};
  // Marker file of the current boot (see internal/boot_marker.h); the launch script writes it
  // when the Sandbox reconciler had no setup to run and so never did.
  std::string boot_marker = internal::kDefaultBootMarker;
  // An API error while observing is not evidence that the executor is down: Ready turns False
  // only after this many consecutive transient failures (Kubernetes' failureThreshold); until
  // then Synced=False says the observation is stale and the Manager retries with backoff.
  int failure_threshold = 3;
  // Deleting the session (Finalize): retry cadence and when a refused session is abandoned.
  internal::SessionDeletePolicy session_delete{};
};

// What the executor's log says went wrong; "" when it says nothing we recognise.
std::string DiagnoseExecutorLog(const std::string& log_tail);

class AgentWorkerReconciler final : public Reconciler {
 public:
  AgentWorkerReconciler(Store& store, CloudClients& clouds, Clock& clock,
                        DependencyIndex* dependencies, AgentWorkerReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kAgentWorker; }
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

 private:
  struct Target;
  struct Probe;
  // What the reconciler remembers between calls (lost on restart: then it probes at once).
  struct Memory {
    Clock::SteadyTime last_probe{};
    Clock::SteadyTime last_status{};
    std::string probed_boot;
    Clock::SteadyTime next_launch_allowed{};
    Clock::SteadyTime launched{};  // the last launch
    int64_t launched_pid = 0;      // its pid, believed once the environment is connected
    bool connected = false;        // the last environment status said connected
    bool verify_pending = false;   // check on the next pass (after a launch, a disconnect, …)
    bool diagnosed = false;        // the last launch's exit has been diagnosed and backed off
    // Consecutive reconciles that failed with a transient error (a cache: losing it on a restart
    // only delays Ready=False by a few failures).
    int failed_observations = 0;
  };

  api::StatusOr<ReconcileResult> Converge(Target& t);
  void RecordOutcome(Target& t, const api::Status& status);
  api::StatusOr<ReconcileResult> Finalize(Target& t);
  api::StatusOr<bool> DeleteSessions(Target& t, const std::string& workspace,
                                     const std::string& workspace_ref);
  api::Status DeleteLostSession(Target& t, const std::string& workspace);
  api::StatusOr<api::ObjectKey> EnsureSandboxObject(Target& t);
  api::StatusOr<bool> EnsureSession(Target& t, bool verify);
  api::StatusOr<Probe> ProbeExecutor(Target& t);
  static Probe ParseReport(const std::string& script_output);
  api::StatusOr<std::optional<ReconcileResult>> FollowSessionSpec(Target& t, bool new_session);
  api::Status ReplaceSession(Target& t, const std::string& reason, const std::string& message);
  // `replace`: stop an executor of ours that runs for this environment and launch anew (its
  // spec changed).
  api::StatusOr<ReconcileResult> Launch(Target& t, bool relaunch, bool replace = false);
  api::StatusOr<ReconcileResult> HandleDeadExecutor(Target& t, const Probe& probe);
  api::StatusOr<ReconcileResult> ReportMissing(Target& t, const Probe& probe);

  void Set(Target& t, const char* type, api::ConditionStatus status, std::string reason,
           std::string message);
  std::string ExecutorDir(const Target& t) const;

  Store& store_;
  CloudClients& clouds_;
  Clock& clock_;
  DependencyIndex* dependencies_;
  EventRecorder events_;
  const AgentWorkerReconcilerOptions options_;

  std::mutex mu_;
  std::map<api::ObjectKey, Memory> memory_;  // Guarded by mu_.
};

}  // namespace sbx::controller
