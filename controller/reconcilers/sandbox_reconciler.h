// SandboxReconciler: makes one Databricks sandbox match a `Sandbox` object (DESIGN §3, the
// Sandbox contract table).
//
// Level-based and idempotent: every call reads the object from the store and the live sandbox
// from the SandboxCache (a GET only when the cache does not know, and before any create), acts
// on the difference with at most one mutating call, records what it saw in status, and returns.
// Crash safety: an `intent` inventory row is written before every create and settled (adopted
// by GET) on the next reconcile, so a crash at any moment neither duplicates nor leaks a
// sandbox; only sandboxes recorded in inventory as ours are ever adopted, changed or deleted.
//
// Provisioning failures (reference §4: the API has no FAILED state; a failed provisioning shows
// as PENDING → STOPPING → STOPPED): a sandbox this object created or started that is found
// STOPPING or STOPPED without having run (Ready was Creating, Starting or Pending) is confirmed
// with one GET, then reported as Ready=False, reason ProvisioningFailed, with a Warning event,
// and started again only after a backoff over status.provisioningFailures (recorded with
// status.nextStartAfter, so a restart of sbxd keeps it): never a hot start loop, never a second
// create. The Databricks API's own quota refusal of a create (429 RESOURCE_EXHAUSTED with a
// QuotaFailure detail, the per-user quota) is Ready=False and Synced=False with reason
// QuotaExceeded and the service's message; the intent row is dropped (nothing was created) and
// the create is retried on the engine's per-key backoff. A 409 ABORTED on a PATCH (a concurrent
// update) is a transient Conflict: Synced=False with the service's message, PATCHed again on the
// per-key backoff if the drift is still there.
//
// Conditions: Ready (live state matches spec and setup ran for this boot), Synced (the last
// reconcile reached the API without error; reason names the error class or a terminal problem
// such as ImmutableFieldChanged or AlreadyExists). A create that would exceed the Workspace's
// spec.limits.maxSandboxes (counted in inventory: what sbx created there, intents included) is
// not sent: Synced=False and Ready=False with reason QuotaExceeded, looked at again every
// `quota_recheck` until a slot frees up. While the LIST sweeps of its workspace fail
// (SandboxCache::FailingSweep), a reconcile makes no API call and changes nothing: it sets
// Synced=False with the cache's reason (Unavailable for an outage) and message, and leaves Ready
// and status.state as last observed; the sweeper enqueues the object when a LIST succeeds again.
// An AgentWorker (or anyone) can tell a stale observation from Synced.
// Power OnDemand (DESIGN §7.2, on_demand_power.h): running while something needs it (a worker's
// first bring-up or wake request, an unfinished task of its workers; Ready=False reason Waking
// until running and set up), stopped spec.idleStop after it became idle (status.idleSince, so a
// restart keeps the clock), and then Ready=True reason Sleeping with no call at all: no setup,
// no boot-marker read.
//
// Thread-safety: Reconcile may run on several workers at once for different keys. All
// collaborators must outlive the reconciler.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/cloud/databricks/sandbox_api.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/unsent_creates.h"
#include "controller/reconcilers/milestones.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/sandbox_cache.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct SandboxReconcilerOptions {
  // While a sandbox is PENDING or STOPPING: look again after this long at the latest. The
  // sweeper's fast sweep usually enqueues it sooner, with one LIST for the whole workspace.
  std::chrono::milliseconds transition_requeue{10'000};
  // Marker file of the current boot; outside /home/sandbox-agent, so a stop wipes it.
  std::string boot_marker = reconcilers_internal::kDefaultBootMarker;
  // A sandbox with setup steps has its boot marker read again this often, and once after every
  // sbxd start: a stop and start that happened between two sweeps, or while sbxd was down, is
  // noticed and setup runs for the new boot.
  std::chrono::milliseconds boot_check_interval{std::chrono::minutes(5)};
  // A Sandbox waiting for a slot of its Workspace's spec.limits.maxSandboxes (QuotaExceeded)
  // looks again this often: two store reads, no API call.
  std::chrono::milliseconds quota_recheck{std::chrono::seconds(10)};
  // A RUNNING sandbox's open interval of RUNNING time is counted (status.usage, the usage
  // ledger) on every status write, and on a pass that finds it this old (sandbox_usage.h): so
  // at the latest on the first resync after it, and the workspace's compute lags by no more.
  std::chrono::milliseconds usage_checkpoint{std::chrono::seconds(60)};
  // Told create_sent, created and running_observed (milestones.h).
  MilestoneFn milestone;
  // A provisioning that ended STOPPED instead of RUNNING is started again after
  // base·2^(failures-1), capped (the engine's Backoff, no jitter), counted in
  // status.provisioningFailures; the count resets once the sandbox runs.
  BackoffPolicy provisioning_backoff{std::chrono::seconds(10), std::chrono::minutes(5), 0.0};
  // Power OnDemand: shared with the AgentTask reconciler, so that a stop and a task's
  // submission never cross (on_demand_power.h). Null: a private one (no task coordination).
  OnDemandPower* power = nullptr;
};

class SandboxReconciler final : public Reconciler {
 public:
  SandboxReconciler(Store& store, CloudClients& clouds, SandboxCache& cache, Clock& clock,
                    SandboxReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kSandbox; }
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

 private:
  struct Target;  // one reconcile's object, API client and identifiers

  // The steps of one reconcile, in the order they run.
  api::StatusOr<ReconcileResult> Converge(Target& t);
  api::StatusOr<std::optional<ReconcileResult>> Finalize(Target& t);
  api::StatusOr<std::optional<databricks::Sandbox>> Observe(Target& t);
  bool RefuseIdentityChange(Target& t);
  api::StatusOr<ReconcileResult> Create(Target& t);
  api::StatusOr<bool> FindEarlierSandbox(Target& t);
  api::StatusOr<bool> ClaimOwnership(Target& t);
  api::Status PatchDrift(Target& t, const databricks::Sandbox& live);
  api::StatusOr<ReconcileResult> RunSetup(Target& t, const databricks::Sandbox& live);
  api::StatusOr<std::optional<ReconcileResult>> CheckProvisioning(Target& t,
                                                                  const databricks::Sandbox& live);
  // Starts a STOPPED sandbox; `demand` names what an OnDemand sandbox is woken for (empty: a
  // Running one auto-stopped or stopped from outside).
  api::StatusOr<ReconcileResult> StartStopped(Target& t, const std::string& demand);
  api::StatusOr<ReconcileResult> CreateRefusedByQuota(Target& t, const api::Status& refused);
  api::StatusOr<ReconcileResult> StopWhenIdle(Target& t, ReconcileResult result);
  // After converging or finalizing: counts the RUNNING time up to now (sandbox_usage.h) into
  // status.usage and the usage ledger. `gone`: the sandbox is deleted or no longer ours.
  api::Status CountRunningTime(Target& t, bool gone);

  void SetReady(Target& t, api::ConditionStatus status, std::string_view reason,
                std::string message);
  void SetSynced(Target& t, api::ConditionStatus status, std::string_view reason,
                 std::string message);

  Store& store_;
  CloudClients& clouds_;
  SandboxCache& cache_;
  Clock& clock_;
  EventRecorder events_;
  const SandboxReconcilerOptions options_;
  const Backoff provisioning_backoff_;
  OnDemandPower own_power_;
  OnDemandPower* power_;

  std::mutex mu_;
  std::map<api::ObjectKey, Clock::SteadyTime> boot_checked_;  // last boot-marker read; mu_
  // When a pass last saw the sandbox not RUNNING (the lower bound of RunningBegan); mu_.
  std::map<api::ObjectKey, Clock::WallTime> not_running_seen_;
  // Held across counting a workspace's inventory and writing an intent row, so that two
  // concurrent creates cannot both take the last slot of spec.limits.maxSandboxes (only this
  // process writes inventory: sbxctl never does, and a second sbxd is a standby).
  std::mutex quota_mu_;
  // Creates given back to the work queue before they were sent, by workspace/sandbox id.
  reconcilers_internal::UnsentCreates unsent_creates_;
};

}  // namespace sbx::controller
