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
//   3. the executor: one exec-sync probe script reports whether the pid in
//      /home/sandbox-agent/.sbx/<worker>/pid is alive for this environment and this boot, whether
//      the workspace directory and the command exist, and the log tail; a dead executor is
//      launched again, detached (setsid nohup) and idempotent (flock), with CODEX_API_KEY only
//      in the exec-sync envs — never argv, never logged (ExecutorRunning); an executor that
//      exited is diagnosed from its log into IPNotAuthorized, MissingScope,
//      WorkspaceDirectoryMissing, ExecutorNotFound or ExecutorExitedOnStart, with a
//      CrashLoopBackOff-style delay (long for auth reasons) instead of a hot loop;
//   4. the connection: GET /agents/environments/{id} (ExecutorConnected), every
//      `status_interval`; the exec-sync probe runs every `probe_interval`, right after a launch,
//      and at once when the sandbox booted again (its status.bootId changed).
// Deletion deletes the session, stops the executor and deletes the owned Sandbox object.
//
// Thread-safety: Reconcile may run concurrently for different keys. Collaborators must outlive
// the reconciler.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>

#include "api/resources.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/clock.h"
#include "controller/engine/dependency_index.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct AgentWorkerReconcilerOptions {
  std::chrono::milliseconds status_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds probe_interval{std::chrono::minutes(5)};
  // After a launch: probe again this soon to catch an executor that exits on start.
  std::chrono::milliseconds verify_after_launch{std::chrono::seconds(3)};
  // While launched but not yet connected: look at the environment this often.
  std::chrono::milliseconds connect_poll{std::chrono::seconds(5)};
  // Crash-loop backoff: base·2^(restarts-1), capped; auth failures wait auth_backoff.
  std::chrono::milliseconds crash_backoff_base{std::chrono::seconds(10)};
  std::chrono::milliseconds crash_backoff_cap{std::chrono::minutes(5)};
  std::chrono::milliseconds auth_backoff{std::chrono::minutes(10)};
  std::string boot_marker = "/tmp/.sbx-boot-id";  // written by the Sandbox reconciler
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
    bool verify_pending = false;  // probe on the next pass (after a launch, a disconnect, …)
    bool diagnosed = false;       // the last launch's exit has been diagnosed and backed off
  };

  api::StatusOr<ReconcileResult> Converge(Target& t);
  api::StatusOr<ReconcileResult> Finalize(Target& t);
  api::StatusOr<api::ObjectKey> EnsureSandboxObject(Target& t);
  api::StatusOr<bool> EnsureSession(Target& t, bool verify);
  api::StatusOr<Probe> ProbeExecutor(Target& t);
  api::Status LaunchExecutor(Target& t);
  api::StatusOr<ReconcileResult> HandleDeadExecutor(Target& t, const Probe& probe);

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
