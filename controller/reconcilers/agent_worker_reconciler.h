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
//      and after a launch until connected every `verify_after_launch` (sooner at first:
//      ExecutorSchedule's verify_first, doubling);
//   5. the probe, one exec-sync reporting whether the pid in /home/sandbox-agent/.sbx/<worker>/pid
//      is alive for this environment and this boot, whether the workspace directory and the
//      command exist, and the log tail: when a launched executor is not connected within
//      `connect_grace`, when the environment reports a disconnect, when the sandbox booted again
//      (the Sandbox's status.bootId is not status.executor.probedBootId), and every
//      `probe_interval`. An executor that exited is diagnosed
//      from its log into IPNotAuthorized, MissingScope, WorkspaceDirectoryMissing,
//      ExecutorNotFound or ExecutorExitedOnStart, with a CrashLoopBackOff-style delay (long for
//      auth reasons) instead of a hot loop, then launched again.
// In the common case a worker costs one exec-sync (the launch) to become Ready.
// The parts: SessionLifecycle (session_lifecycle.h) creates, adopts, verifies and deletes the
// session; ExecutorControl (executor_control.h) runs the probe, launch and stop scripts
// (scripts/*.sh) and parses their reports; ExecutorSchedule (executor_schedule.h) says when a
// launch, a status check or a probe is due. What the reconciler must remember across reconciles
// is in status (conditions, status.executor: pid — of the launched executor, 0 once found down —
// launchedAt, lastProbeAt, probedBootId, restarts, nextLaunchAfter), so `sbxctl describe` shows
// it and a restart of sbxd keeps the schedule; in memory are only caches (the time of the last
// status check, the count of failed observations).
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

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "api/resources.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/engine/wake_hints.h"
#include "controller/reconcilers/executor_control.h"
#include "controller/reconcilers/executor_schedule.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/session_deletion.h"
#include "controller/reconcilers/milestones.h"
#include "controller/reconcilers/session_lifecycle.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct AgentWorkerReconcilerOptions {
  // When a launch, a status check and a probe are due; the crash-loop delay.
  ExecutorScheduleOptions schedule{};
  // Marker file of the current boot (see internal/boot_marker.h); the launch script writes it
  // when the Sandbox reconciler had no setup to run and so never did.
  std::string boot_marker = reconcilers_internal::kDefaultBootMarker;
  // An API error while observing is not evidence that the executor is down: Ready turns False
  // only after this many consecutive transient failures (Kubernetes' failureThreshold); until
  // then Synced=False says the observation is stale and the Manager retries with backoff.
  int failure_threshold = 3;
  // Deleting the session (Finalize): retry cadence and when a refused session is abandoned.
  reconcilers_internal::SessionDeletePolicy session_delete{};
  // Optional (sbxd --webhook-addr): a worker marked here (the service asked for its environment
  // connection) checks its environment at once instead of on the status cadence.
  WakeHints* wake_hints = nullptr;
  // Told session_created, launch_sent, launch_answered, connected_seen and ready (milestones.h).
  MilestoneFn milestone;
};

class AgentWorkerReconciler final : public Reconciler {
 public:
  AgentWorkerReconciler(Store& store, CloudClients& clouds, Clock& clock,
                        DependencyIndex* dependencies, AgentWorkerReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kAgentWorker; }
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

  // Executors sbx launched and then found exited (each exit once, before its crash-loop delay),
  // and relaunches made (sbx_executor_exits_total, sbx_executor_relaunches_total).
  int64_t executor_exits_total() const { return executor_exits_total_.load(); }
  int64_t executor_relaunches_total() const { return executor_relaunches_total_.load(); }

 private:
  struct Target;
  // Kept in memory between reconciles; pure caches, whose loss on a restart costs one early
  // environment status check, or delays Ready=False by a few failures.
  struct Cache {
    std::optional<Clock::SteadyTime> last_check;  // the last environment status GET
    std::optional<Clock::SteadyTime> launched;    // the last launch this sbxd made
    int failed_observations = 0;                  // consecutive transient failures
    // The session this sbxd created on the pass before, not yet launched into: it needs no
    // lookup before the launch (a lost cache costs that one lookup).
    std::string fresh_session;
  };

  // The five steps, in the order Converge runs them.
  api::StatusOr<ReconcileResult> Converge(Target& t);
  api::StatusOr<ReconcileResult> ConvergePerTask(Target& t);
  api::StatusOr<std::optional<ReconcileResult>> EnsureSandbox(Target& t);
  api::StatusOr<api::ObjectKey> EnsureSandboxObject(Target& t);
  // Power OnDemand: the sandbox sleeps or is being woken; OpenAI-side checks only.
  api::StatusOr<ReconcileResult> Asleep(Target& t);
  api::Status CheckSession(Target& t);
  api::StatusOr<bool> EnsureSession(Target& t, bool verify);
  api::StatusOr<std::optional<ReconcileResult>> FollowSessionSpec(Target& t, bool new_session);
  bool ExecutorSpecChanged(Target& t);
  // `replace`: stop an executor of ours that runs for this environment and launch anew.
  api::StatusOr<ReconcileResult> Launch(Target& t, bool relaunch, bool replace = false);
  api::StatusOr<openai::Environment> CheckEnvironment(Target& t, bool routine = false);
  api::StatusOr<ReconcileResult> SessionLost(Target& t, const openai::Environment& env);
  api::StatusOr<ReconcileResult> HandleDeadExecutor(Target& t, const ExecutorReport& report);
  // Ready=False: the workspace directory (unless !workspace_needed) or the command is missing.
  ReconcileResult ReportMissing(Target& t, const ExecutorReport& report,
                                bool workspace_needed = true);
  ReconcileResult ReportConnection(Target& t, const openai::Environment& env, bool connected);

  api::Status ReplaceSession(Target& t, std::string_view reason, const std::string& message);
  api::StatusOr<ExecutorLaunch> LaunchSpec(Target& t, bool replace);
  void RecordLook(Target& t);
  void RecordOutcome(Target& t, const api::Status& status);
  api::StatusOr<std::optional<ReconcileResult>> Finalize(Target& t);

  void Set(Target& t, std::string_view type, api::ConditionStatus status, std::string_view reason,
           std::string message);

  Store& store_;
  CloudClients& clouds_;
  Clock& clock_;
  DependencyIndex* dependencies_;
  EventRecorder events_;
  const AgentWorkerReconcilerOptions options_;
  SessionLifecycle sessions_;
  const ExecutorControl executor_;
  const ExecutorSchedule schedule_;

  std::atomic<int64_t> executor_exits_total_{0};
  std::atomic<int64_t> executor_relaunches_total_{0};

  std::mutex mu_;
  std::map<api::ObjectKey, Cache> caches_;  // Guarded by mu_.
};

}  // namespace sbx::controller
