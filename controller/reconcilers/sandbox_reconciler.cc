#include "controller/reconcilers/sandbox_reconciler.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "api/conditions.h"
#include "api/duration.h"
#include "controller/base/classify_error.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/internal/sandbox_target.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/reconcile_skeleton.h"
#include "controller/reconcilers/sandbox_usage.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusCode;
using api::StatusOr;
using databricks::SandboxState;

constexpr char kResourceSandbox[] = "sandbox";

// Why creating one more sandbox in `workspace` would exceed the spec.limits.maxSandboxes of the
// Workspace `workspace_ref` names; "" when it would not. Counts what sbx created there
// (inventory rows of every state: an intent or a sandbox being deleted holds its slot too).
StatusOr<std::string> QuotaProblem(Store& store, const std::string& namespace_,
                                   const std::string& workspace_ref, const std::string& workspace) {
  StatusOr<Object> spec = store.Get({api::Kind::kWorkspace, namespace_, workspace_ref});
  if (spec.status().code() == StatusCode::kNotFound) {
    return std::string();  // the controller's own default workspace: no limit of ours
  }
  RETURN_IF_ERROR(spec.status());
  const int limit = spec->workspace_spec().limits.max_sandboxes;
  if (limit <= 0) {
    return std::string();
  }
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store.ListInventory(workspace));
  const auto created = std::count_if(records.begin(), records.end(), [](const auto& r) {
    return r.resource_type == kResourceSandbox;
  });
  if (created < limit) {
    return std::string();
  }
  return "workspace " + workspace_ref + " allows " + std::to_string(limit) +
         " sandboxes (spec.limits.maxSandboxes) and sbx has created " + std::to_string(created);
}

}  // namespace

SandboxReconciler::SandboxReconciler(Store& store, CloudClients& clouds, SandboxCache& cache,
                                     Clock& clock, SandboxReconcilerOptions options)
    : store_(store),
      clouds_(clouds),
      cache_(cache),
      clock_(clock),
      events_(store, clock),
      options_(std::move(options)),
      provisioning_backoff_(options_.provisioning_backoff),
      own_power_(store),
      power_(options_.power != nullptr ? options_.power : &own_power_) {}

StatusOr<ReconcileResult> SandboxReconciler::Reconcile(const api::ObjectKey& key,
                                                       std::stop_token stop) {
  ReconcileSteps<Target> steps;
  steps.prepare = [](Target& t) {
    api::SandboxIdentity planned = api::PlannedSandbox(t.object);
    t.workspace_ref = std::move(planned.workspace_ref);
    t.sandbox_id = std::move(planned.sandbox_id);
    t.workspace = WorkspaceId(t.object.metadata.namespace_, t.workspace_ref);
  };
  steps.converge = [this](Target& t) -> StatusOr<ReconcileResult> {
    StatusOr<ReconcileResult> result = Converge(t);
    RETURN_IF_ERROR(CountRunningTime(t, /*gone=*/false));
    return result;
  };
  steps.finalize = [this](Target& t) -> StatusOr<std::optional<ReconcileResult>> {
    StatusOr<std::optional<ReconcileResult>> result = Finalize(t);
    RETURN_IF_ERROR(CountRunningTime(t, /*gone=*/result.ok() && !result->has_value()));
    return result;
  };
  // Synced tells the user why the last attempt failed; the Manager decides about retrying.
  steps.record_outcome = [this](Target& t, const Status& status) {
    RecordSyncedError(t.object, status, clock_);
  };
  steps.forget = [this](const api::ObjectKey& gone) {
    std::lock_guard lock(mu_);
    boot_checked_.erase(gone);
    not_running_seen_.erase(gone);
  };
  return RunReconcile(store_, key, stop, steps);
}

// The contract table of DESIGN §3, top to bottom.
StatusOr<ReconcileResult> SandboxReconciler::Converge(Target& t) {
  if (RefuseIdentityChange(t)) {
    return ReconcileResult::Done();  // nothing is created or deleted until the spec goes back
  }
  ASSIGN_OR_RETURN(t.api, clouds_.Sandboxes(t.object.metadata.namespace_, t.workspace_ref));

  if (std::optional<SandboxCache::SweepFailure> failing = cache_.FailingSweep(t.workspace)) {
    // The workspace's LIST fails, so the cache holds the last known state, not the current one.
    // An error while observing is not evidence that the sandbox is down: Ready and state stay as
    // last observed, Synced says the observation is stale. Nothing is called or changed on a
    // stale view (the API is likely down anyway); the sweeper enqueues this object again when a
    // LIST succeeds.
    SetSynced(t, ConditionStatus::kFalse, failing->reason, failing->message);
    t.stale = true;
    return ReconcileResult::Done();
  }
  ASSIGN_OR_RETURN(std::optional<databricks::Sandbox> live, Observe(t));
  if (!live) {
    return Create(t);
  }
  ASSIGN_OR_RETURN(bool ours, ClaimOwnership(t));
  if (!ours) {
    return ReconcileResult::Done();  // conditions say why; wait for a spec change
  }

  t.status().sandbox_name = live->name;
  t.status().workspace_ref = t.workspace_ref;
  t.status().state = std::string(databricks::SandboxStateName(live->state));
  t.status().create_time = live->create_time;
  t.live_update_time = live->update_time;
  if (live->state != SandboxState::kRunning) {
    // The boot is over (or not begun): the next RUNNING must read the marker again, even if this
    // reconcile fails or sbxd dies before it gets there.
    t.status().boot_id.clear();
  } else {
    t.status().provisioning_failures = 0;  // it runs: provisioning works again
    t.status().next_start_after.clear();
  }

  if (!t.spec().image.empty() && live->image_uri != t.spec().image) {
    const std::string message = "spec.image is \"" + t.spec().image + "\" but sandbox " +
                                t.sandbox_id + " runs \"" + live->image_uri +
                                "\"; the image cannot change after creation (delete and "
                                "re-create the Sandbox to change it)";
    SetSynced(t, ConditionStatus::kFalse, reason::kImmutableFieldChanged, message);
    SetReady(t, ConditionStatus::kFalse, reason::kImmutableFieldChanged, message);
    return ReconcileResult::Done();
  }

  // Power OnDemand: running while something needs it (on_demand_power.h), else stopped
  // idleStop after it became idle.
  std::string demand;
  const bool on_demand = IsOnDemand(t.object);
  if (on_demand) {
    ASSIGN_OR_RETURN(SandboxDemand d, power_->Demand(t.object));
    demand = std::move(d.why);
    if (live->state != SandboxState::kRunning) {
      power_->EndStop(t.key());  // a stop we announced is visible now
    }
    if (!demand.empty()) {
      t.status().idle_since.clear();
    }
  }
  const bool want_running = t.spec().power == api::Power::kRunning || !demand.empty();
  ASSIGN_OR_RETURN(std::optional<ReconcileResult> failed, CheckProvisioning(t, *live));
  if (failed) {
    return *failed;
  }
  switch (live->state) {
    case SandboxState::kPending:
    case SandboxState::kStopping: {
      const bool pending = live->state == SandboxState::kPending;
      if (!demand.empty()) {
        SetReady(t, ConditionStatus::kFalse, reason::kWaking,
                 "sandbox is " + t.status().state +
                     (pending ? "" : "; started again once STOPPED") + ", for " + demand);
      } else {
        SetReady(t, ConditionStatus::kFalse, pending ? reason::kPending : reason::kStopping,
                 "sandbox is " + t.status().state);
      }
      SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
      return ReconcileResult::RequeueAfter(options_.transition_requeue);
    }
    case SandboxState::kStopped: {
      if (want_running) {
        return StartStopped(t, demand);
      }
      RETURN_IF_ERROR(PatchDrift(t, *live));
      if (on_demand) {
        // Asleep: nothing of sbx touches it (no exec-sync) until something needs it.
        SetReady(t, ConditionStatus::kTrue, reason::kSleeping,
                 "sandbox is stopped until a task (or a session) of its workers needs it");
      } else {
        SetReady(t, ConditionStatus::kTrue, reason::kStopped,
                 "sandbox is stopped, as spec.power asks");
      }
      SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
      return ReconcileResult::Done();
    }
    case SandboxState::kRunning: {
      if (t.spec().power == api::Power::kStopped) {
        ASSIGN_OR_RETURN(databricks::Sandbox stopped, t.api->Stop(t.sandbox_id, t.stop));
        cache_.Observe(t.workspace, stopped);
        t.status().state = std::string(databricks::SandboxStateName(stopped.state));
        events_.Normal(t.key(), "Stopping", "spec.power is Stopped; stopping sandbox");
        SetReady(t, ConditionStatus::kFalse, reason::kStopping, "sandbox is stopping");
        SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
        return ReconcileResult::RequeueAfter(options_.transition_requeue);
      }
      if (t.before().state != "RUNNING") {
        Milestone(options_.milestone, t.key(), "running_observed");
      }
      RETURN_IF_ERROR(PatchDrift(t, *live));
      SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
      ASSIGN_OR_RETURN(ReconcileResult result, RunSetup(t, *live));
      if (!on_demand || !demand.empty()) {
        return result;
      }
      return StopWhenIdle(t, result);
    }
    case SandboxState::kUnspecified:
    case SandboxState::kUnknown:
      break;
  }
  SetReady(t, ConditionStatus::kUnknown, reason::kUnknownState,
           "the API reports state \"" + live->state_raw + "\"");
  SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
  return ReconcileResult::RequeueAfter(options_.transition_requeue);
}

// Auto-stop after inactivity is normal operation, not an error: start it again — after a failed
// provisioning only once status.nextStartAfter has passed.
StatusOr<ReconcileResult> SandboxReconciler::StartStopped(Target& t, const std::string& demand) {
  if (const std::optional<Clock::WallTime> allowed = ParseRfc3339(t.status().next_start_after)) {
    if (const Clock::WallTime now = clock_.Now(); now < *allowed) {
      SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
      return ReconcileResult::RequeueAfter(
          std::chrono::ceil<std::chrono::milliseconds>(*allowed - now));
    }
  }
  // The event first, then the call: a crash between the start and the status write must not
  // lose the record that sbx started the sandbox (the store dedupes a repeat after a failure).
  if (!demand.empty()) {
    // Power OnDemand: woken for what needs it.
    events_.Normal(t.key(), "Waking", "starting sandbox " + t.sandbox_id + " for " + demand);
  } else {
    events_.Normal(
        t.key(), "Starting",
        t.status().provisioning_failures > 0
            ? "sandbox " + t.sandbox_id + " failed to provision " +
                  std::to_string(t.status().provisioning_failures) +
                  " time(s) in a row; starting it again"
            : "sandbox " + t.sandbox_id + " was STOPPED (auto-stop or external); starting it");
  }
  StatusOr<databricks::Sandbox> started = t.api->Start(t.sandbox_id, t.stop);
  if (started.status().code() == StatusCode::kNotFound) {
    // Start answers 404 unless the sandbox is STOPPED: our view was stale. Look again.
    ASSIGN_OR_RETURN(databricks::Sandbox fresh, t.api->Get(t.sandbox_id, t.stop));
    cache_.Observe(t.workspace, fresh);
    return ReconcileResult::Continue();
  }
  RETURN_IF_ERROR(started.status());
  cache_.Observe(t.workspace, *started);
  t.status().state = std::string(databricks::SandboxStateName(started->state));
  t.status().next_start_after.clear();
  if (!demand.empty()) {
    SetReady(t, ConditionStatus::kFalse, reason::kWaking, "sandbox is starting, for " + demand);
  } else {
    SetReady(t, ConditionStatus::kFalse, reason::kStarting, "sandbox is starting");
  }
  SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
  return ReconcileResult::RequeueAfter(options_.transition_requeue);
}

// A sandbox this object created or started (Ready was Creating, Starting or Pending; for power
// OnDemand, Waking: a wake it started) that is now STOPPING or STOPPED never ran:
// its provisioning failed (reference §4). Confirmed with a GET (a stale view must not cost a
// backoff), counted, reported and delayed. Nothing for any other state or history (Waking while
// it was still STOPPING is a wake waiting for STOPPED, not a failure); a result when this
// reconcile ends here.
StatusOr<std::optional<ReconcileResult>> SandboxReconciler::CheckProvisioning(
    Target& t, const databricks::Sandbox& live) {
  if (t.spec().power == api::Power::kStopped ||
      (live.state != SandboxState::kStopping && live.state != SandboxState::kStopped)) {
    return std::optional<ReconcileResult>();
  }
  const api::Condition* ready = api::FindCondition(t.before().conditions, condition::kReady);
  const bool was_provisioning =
      ready != nullptr &&
      (ready->reason == reason::kCreating || ready->reason == reason::kStarting ||
       ready->reason == reason::kPending ||
       (ready->reason == reason::kWaking && t.before().state != "STOPPING"));
  if (!was_provisioning) {
    if (ready != nullptr && ready->reason == reason::kProvisioningFailed &&
        live.state == SandboxState::kStopping) {
      // Counted already; the teardown goes on. Ready keeps saying why.
      SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
      return std::optional(ReconcileResult::RequeueAfter(options_.transition_requeue));
    }
    return std::optional<ReconcileResult>();
  }
  ASSIGN_OR_RETURN(databricks::Sandbox fresh, t.api->Get(t.sandbox_id, t.stop));
  cache_.Observe(t.workspace, fresh);
  if (fresh.state != SandboxState::kStopping && fresh.state != SandboxState::kStopped) {
    return std::optional(ReconcileResult::Continue());
  }
  api::SandboxStatus& status = t.status();
  status.state = std::string(databricks::SandboxStateName(fresh.state));
  ++status.provisioning_failures;
  const std::chrono::milliseconds delay = provisioning_backoff_.Delay(status.provisioning_failures);
  status.next_start_after = FormatRfc3339(clock_.Now() + delay);
  const std::string message =
      "sandbox " + t.sandbox_id + " went from PENDING to " + status.state +
      " without reaching RUNNING: its provisioning failed (the API has no FAILED state); " +
      std::to_string(status.provisioning_failures) + " in a row, starting it again in " +
      std::to_string(std::chrono::ceil<std::chrono::seconds>(delay).count()) + "s";
  events_.Warning(t.key(), "ProvisioningFailed", message);
  SetReady(t, ConditionStatus::kFalse, reason::kProvisioningFailed, message);
  SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
  if (fresh.state == SandboxState::kStopping) {
    return std::optional(ReconcileResult::RequeueAfter(options_.transition_requeue));
  }
  return std::optional(ReconcileResult::RequeueAfter(delay));
}

// The Databricks API refused the create for its own quota (the per-user one, reference §1):
// nothing was created, so the intent row goes (it would hold a slot of spec.limits.maxSandboxes
// for nothing), and the error is returned: transient, so the Manager retries the create on its
// per-key backoff (1 s doubling to 5 min) — a slot frees only when a sandbox is deleted.
StatusOr<ReconcileResult> SandboxReconciler::CreateRefusedByQuota(Target& t,
                                                                  const Status& refused) {
  RETURN_IF_ERROR(store_.DeleteInventory(t.workspace, kResourceSandbox, t.sandbox_id));
  const std::string message = "the Databricks API refused to create sandbox " + t.sandbox_id +
                              ": " + ConditionMessage(refused);
  if (const api::Condition* c = api::FindCondition(t.before().conditions, condition::kReady);
      c == nullptr || c->reason != reason::kQuotaExceeded) {
    events_.Warning(t.key(), "QuotaExceeded", message);
  }
  SetReady(t, ConditionStatus::kFalse, reason::kQuotaExceeded, message);
  return refused;
}

// The cache answers in steady state; a GET only when it does not know. A sandbox that inventory
// has never recorded is not looked up at all: the create itself is the existence check (409 →
// AlreadyExists, exactly what a GET finding a sandbox that is not ours would report), so a new
// Sandbox costs one call, not two. With an inventory row (ours, maybe created by a crashed pass)
// a GET comes first: it is cheaper than a create answered 409 plus a GET.
StatusOr<std::optional<databricks::Sandbox>> SandboxReconciler::Observe(Target& t) {
  SandboxCache::Lookup cached = cache_.Get(t.workspace, t.sandbox_id);
  if (cached.knowledge == SandboxCache::Knowledge::kPresent) {
    return std::optional<databricks::Sandbox>(cached.sandbox);
  }
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> record,
                   store_.GetInventory(t.workspace, kResourceSandbox, t.sandbox_id));
  if (!record || (record->state == Store::InventoryState::kIntent &&
                  unsent_creates_.Unsent(t.workspace + "/" + t.sandbox_id))) {
    return std::optional<databricks::Sandbox>();  // none, or our create was never sent
  }
  StatusOr<databricks::Sandbox> got = t.api->Get(t.sandbox_id, t.stop);
  if (got.status().code() == StatusCode::kNotFound) {
    cache_.Forget(t.workspace, t.sandbox_id);
    return std::optional<databricks::Sandbox>();
  }
  RETURN_IF_ERROR(got.status());
  cache_.Observe(t.workspace, *got);
  return std::optional<databricks::Sandbox>(*std::move(got));
}

StatusOr<ReconcileResult> SandboxReconciler::Create(Target& t) {
  ASSIGN_OR_RETURN(bool created_elsewhere, FindEarlierSandbox(t));
  if (created_elsewhere) {
    RefuseIdentityChange(t);
    return ReconcileResult::Done();
  }
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> prior,
                   store_.GetInventory(t.workspace, kResourceSandbox, t.sandbox_id));
  if (prior && prior->owner_uid != t.object.metadata.uid) {
    StatusOr<Object> other = store_.Get(prior->owner);
    if (other.ok() && other->metadata.uid == prior->owner_uid) {
      const std::string message = "sandboxId " + t.sandbox_id + " is already used by " +
                                  prior->owner.ToString() + "; choose another spec.sandboxId";
      SetSynced(t, ConditionStatus::kFalse, reason::kSandboxIdConflict, message);
      SetReady(t, ConditionStatus::kFalse, reason::kSandboxIdConflict, message);
      return ReconcileResult::Done();
    }
  }
  if (prior && prior->state == Store::InventoryState::kLive) {
    events_.Warning(t.key(), "ExternalDeletion",
                    "sandbox " + t.sandbox_id + " was deleted outside sbx; creating it again");
  }

  // The intent row goes in BEFORE the call: if we crash after the API created the sandbox, the
  // next reconcile finds the row, GETs the sandbox and adopts it instead of leaking it.
  const std::string now = FormatRfc3339(clock_.Now());
  Store::InventoryRecord intent;
  intent.workspace = t.workspace;
  intent.resource_type = kResourceSandbox;
  intent.external_id = t.sandbox_id;
  intent.state = Store::InventoryState::kIntent;
  intent.owner = t.key();
  intent.owner_uid = t.object.metadata.uid;
  intent.created_at = prior ? prior->created_at : now;
  intent.updated_at = now;
  {
    // A prior row already holds this sandbox's slot. Otherwise the count and the intent row are
    // one step under quota_mu_, so concurrent creates cannot both take the last slot.
    std::unique_lock<std::mutex> quota_lock(quota_mu_, std::defer_lock);
    if (!prior) {
      quota_lock.lock();
      ASSIGN_OR_RETURN(std::string full, QuotaProblem(store_, t.object.metadata.namespace_,
                                                      t.spec().workspace_ref, t.workspace));
      if (!full.empty()) {
        if (const api::Condition* c = api::FindCondition(t.status().conditions, condition::kSynced);
            c == nullptr || c->reason != reason::kQuotaExceeded) {
          events_.Warning(t.key(), "QuotaExceeded", full);
        }
        SetSynced(t, ConditionStatus::kFalse, reason::kQuotaExceeded, full);
        SetReady(t, ConditionStatus::kFalse, reason::kQuotaExceeded, full);
        return ReconcileResult::RequeueAfter(options_.quota_recheck);
      }
    }
    RETURN_IF_ERROR(store_.PutInventory(intent));
  }

  databricks::Sandbox desired;
  desired.display_name = t.spec().display_name;
  desired.inactivity_timeout = t.spec().inactivity_timeout;
  desired.image_uri = t.spec().image;
  Milestone(options_.milestone, t.key(), "create_sent");
  StatusOr<databricks::Sandbox> created = t.api->Create(t.sandbox_id, desired, t.stop);
  unsent_creates_.Record(t.workspace + "/" + t.sandbox_id, created.status());
  if (created.status().code() == StatusCode::kAlreadyExists) {
    if (prior) {
      // Ours from an earlier attempt whose answer we never saw (or a retried create): adopt it.
      ASSIGN_OR_RETURN(databricks::Sandbox live, t.api->Get(t.sandbox_id, t.stop));
      cache_.Observe(t.workspace, live);
      return ReconcileResult::Continue();
    }
    // Somebody else's sandbox: never touch it.
    RETURN_IF_ERROR(store_.DeleteInventory(t.workspace, kResourceSandbox, t.sandbox_id));
    const std::string message = "a sandbox with id " + t.sandbox_id +
                                " already exists and was not created by sbx; choose another "
                                "spec.sandboxId";
    events_.Warning(t.key(), "AlreadyExists", message);
    SetSynced(t, ConditionStatus::kFalse, reason::kAlreadyExists, message);
    SetReady(t, ConditionStatus::kFalse, reason::kAlreadyExists, message);
    return ReconcileResult::Done();
  }
  if (created.status().reason() == reason::kQuotaExceeded) {
    return CreateRefusedByQuota(t, created.status());
  }
  RETURN_IF_ERROR(created.status());

  intent.state = Store::InventoryState::kLive;
  intent.updated_at = FormatRfc3339(clock_.Now());
  RETURN_IF_ERROR(store_.PutInventory(intent));
  cache_.Observe(t.workspace, *created);

  t.status().sandbox_name = created->name;
  t.status().workspace_ref = t.workspace_ref;
  t.status().state = std::string(databricks::SandboxStateName(created->state));
  t.status().create_time = created->create_time;
  events_.Normal(t.key(), "Created", "created sandbox " + t.sandbox_id);
  Milestone(options_.milestone, t.key(), "created");
  SetReady(t, ConditionStatus::kFalse, reason::kCreating, "sandbox is being created");
  SetSynced(t, ConditionStatus::kTrue, reason::kSynced, "");
  return ReconcileResult::RequeueAfter(options_.transition_requeue);
}

// sandboxId and workspaceRef name the sandbox; once it exists they cannot move (DESIGN §3): a
// new id would create a second sandbox and garbage collection would then delete the first, home
// directory included. True (with the conditions set) when the spec asks for another sandbox than
// the one this object created.
bool SandboxReconciler::RefuseIdentityChange(Target& t) {
  std::string changed;
  if (t.spec().sandbox_id != t.sandbox_id) {
    changed = "spec.sandboxId is \"" + t.spec().sandbox_id +
              "\" but this Sandbox created sandbox " + t.sandbox_id;
  } else if (t.spec().workspace_ref != t.workspace_ref) {
    changed = "spec.workspaceRef is \"" + t.spec().workspace_ref +
              "\" but this Sandbox created its sandbox in Workspace " + t.workspace_ref;
  } else {
    return false;
  }
  const std::string message = changed +
                              "; sandboxId and workspaceRef cannot change after creation: change "
                              "it back (nothing is created or deleted until then), or delete and "
                              "re-create the Sandbox";
  SetSynced(t, ConditionStatus::kFalse, reason::kImmutableFieldChanged, message);
  SetReady(t, ConditionStatus::kFalse, reason::kImmutableFieldChanged, message);
  return true;
}

// Before creating: did this object already create a sandbox under another id or workspace whose
// creation its status does not show (sbxd died between the create and the status write)? An
// intent row of this object's uid elsewhere is settled with a GET in its own workspace: found,
// it is this object's sandbox (recorded in status, so the spec change is refused); gone, the
// stale row is dropped. Creates are rare, so the inventory scan is affordable.
StatusOr<bool> SandboxReconciler::FindEarlierSandbox(Target& t) {
  ASSIGN_OR_RETURN(std::vector<Store::InventoryRecord> records, store_.ListInventory(std::nullopt));
  for (const Store::InventoryRecord& r : records) {
    if (r.resource_type != kResourceSandbox || r.owner_uid != t.object.metadata.uid ||
        (r.workspace == t.workspace && r.external_id == t.sandbox_id)) {
      continue;
    }
    const std::string prefix = t.object.metadata.namespace_ + "/";
    const std::string workspace_ref =
        r.workspace.starts_with(prefix) ? r.workspace.substr(prefix.size()) : r.workspace;
    ASSIGN_OR_RETURN(databricks::SandboxApi * api,
                     clouds_.Sandboxes(t.object.metadata.namespace_, workspace_ref));
    StatusOr<databricks::Sandbox> got = api->Get(r.external_id, t.stop);
    if (got.status().code() == StatusCode::kNotFound) {
      RETURN_IF_ERROR(store_.DeleteInventory(r.workspace, kResourceSandbox, r.external_id));
      continue;
    }
    RETURN_IF_ERROR(got.status());
    t.workspace_ref = workspace_ref;
    t.workspace = r.workspace;
    t.sandbox_id = r.external_id;
    t.status().sandbox_name = got->name;
    t.status().workspace_ref = workspace_ref;
    return true;
  }
  return false;
}

// A live sandbox is ours only if inventory says so. Settles an intent left by a crash.
StatusOr<bool> SandboxReconciler::ClaimOwnership(Target& t) {
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> record,
                   store_.GetInventory(t.workspace, kResourceSandbox, t.sandbox_id));
  if (!record) {
    const std::string message = "sandbox " + t.sandbox_id +
                                " exists but was not created by sbx; it is left untouched "
                                "(choose another spec.sandboxId)";
    if (const api::Condition* c = api::FindCondition(t.status().conditions, condition::kSynced);
        c == nullptr || c->reason != reason::kAlreadyExists) {
      events_.Warning(t.key(), "AlreadyExists", message);
    }
    SetSynced(t, ConditionStatus::kFalse, reason::kAlreadyExists, message);
    SetReady(t, ConditionStatus::kFalse, reason::kAlreadyExists, message);
    return false;
  }
  if (record->owner_uid != t.object.metadata.uid) {
    StatusOr<Object> other = store_.Get(record->owner);
    if (other.ok() && other->metadata.uid == record->owner_uid) {
      const std::string message = "sandboxId " + t.sandbox_id + " is already used by " +
                                  record->owner.ToString() + "; choose another spec.sandboxId";
      SetSynced(t, ConditionStatus::kFalse, reason::kSandboxIdConflict, message);
      SetReady(t, ConditionStatus::kFalse, reason::kSandboxIdConflict, message);
      return false;
    }
    // The previous owner object is gone (removed without finalizing); this one takes over.
  }
  if (record->state != Store::InventoryState::kLive || record->owner_uid != t.object.metadata.uid) {
    record->state = Store::InventoryState::kLive;
    record->owner = t.key();
    record->owner_uid = t.object.metadata.uid;
    record->updated_at = FormatRfc3339(clock_.Now());
    RETURN_IF_ERROR(store_.PutInventory(*record));
  }
  return true;
}

// One PATCH whose update_mask holds exactly the fields that differ.
Status SandboxReconciler::PatchDrift(Target& t, const databricks::Sandbox& live) {
  std::vector<std::string> mask;
  databricks::Sandbox desired;
  if (!t.spec().display_name.empty() && t.spec().display_name != live.display_name) {
    mask.emplace_back(databricks::kMaskDisplayName);
    desired.display_name = t.spec().display_name;
  }
  // inactivityTimeout 0 = auto-stop off; it is sent as "0s", the value the docs name for "off"
  // ("set inactivity_timeout to 0 or leave the field unset"), rather than left out, which
  // would leave the choice to a server default. A server may echo "0s" or omit a zero
  // duration (unconfirmed): both mean off, so neither is drift to PATCH on every pass.
  const std::chrono::seconds live_timeout =
      live.inactivity_timeout.value_or(std::chrono::seconds(0));
  if (t.spec().inactivity_timeout && *t.spec().inactivity_timeout != live_timeout) {
    mask.emplace_back(databricks::kMaskInactivityTimeout);
    desired.inactivity_timeout = t.spec().inactivity_timeout;
  }
  if (mask.empty()) {
    return api::OkStatus();
  }
  ASSIGN_OR_RETURN(databricks::Sandbox updated, t.api->Update(t.sandbox_id, desired, mask, t.stop));
  cache_.Observe(t.workspace, updated);
  std::string fields;
  for (const std::string& m : mask) {
    fields += (fields.empty() ? "" : ", ") + m;
  }
  events_.Normal(t.key(), "Updated", "updated " + fields);
  return api::OkStatus();
}

// Power OnDemand, RUNNING and nothing needs it: idle since status.idleSince (set now if it was
// not, kept across restarts), stopped once spec.idleStop has passed. The stop is announced to
// OnDemandPower first, which reads the demand again, so a task being submitted right now is
// never cut off: either the stop sees it, or it sees the stop and waits for the next start.
StatusOr<ReconcileResult> SandboxReconciler::StopWhenIdle(Target& t, ReconcileResult result) {
  if (api::ConditionStatusOf(t.status().conditions, condition::kReady) != ConditionStatus::kTrue) {
    return result;  // setup not done for this boot: not idle yet
  }
  const Clock::WallTime now = clock_.Now();
  std::optional<Clock::WallTime> since = ParseRfc3339(t.status().idle_since);
  if (!since) {
    since = now;
    t.status().idle_since = FormatRfc3339(now);
  }
  const std::chrono::seconds idle_stop = t.spec().idle_stop.value_or(api::kDefaultIdleStop);
  const Clock::WallTime stop_at = *since + idle_stop;
  if (now < stop_at) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(stop_at - now);
    if (result.action == ReconcileResult::Action::kRequeueAfter && result.after < left) {
      return result;
    }
    return ReconcileResult::RequeueAfter(left);
  }
  ASSIGN_OR_RETURN(std::string busy, power_->BeginStop(t.object));
  if (!busy.empty()) {
    t.status().idle_since.clear();
    return ReconcileResult::RequeueAfter(std::chrono::seconds(1));
  }
  StatusOr<databricks::Sandbox> stopped = t.api->Stop(t.sandbox_id, t.stop);
  if (!stopped.ok()) {
    power_->EndStop(t.key());
    return stopped.status();
  }
  cache_.Observe(t.workspace, *stopped);
  t.status().state = std::string(databricks::SandboxStateName(stopped->state));
  t.status().boot_id.clear();
  events_.Normal(t.key(), "Sleeping",
                 "nothing needed sandbox " + t.sandbox_id + " since " + t.status().idle_since +
                     " (idleStop " + api::FormatDuration(idle_stop) + "); stopping it");
  SetReady(t, ConditionStatus::kFalse, reason::kStopping, "sandbox is stopping (idle)");
  return ReconcileResult::RequeueAfter(options_.transition_requeue);
}

StatusOr<std::optional<ReconcileResult>> SandboxReconciler::Finalize(Target& t) {
  ASSIGN_OR_RETURN(std::optional<Store::InventoryRecord> record,
                   store_.GetInventory(t.workspace, kResourceSandbox, t.sandbox_id));
  const bool ours = record && record->owner_uid == t.object.metadata.uid;
  if (ours && t.spec().deletion_policy == api::DeletionPolicy::kDelete) {
    ASSIGN_OR_RETURN(t.api, clouds_.Sandboxes(t.object.metadata.namespace_, t.workspace_ref));
    record->state = Store::InventoryState::kDeleting;
    record->updated_at = FormatRfc3339(clock_.Now());
    RETURN_IF_ERROR(store_.PutInventory(*record));
    Status deleted = t.api->Delete(t.sandbox_id, t.stop);
    if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) {
      return deleted;  // retried; the row stays "deleting" so GC and restarts know
    }
    cache_.Forget(t.workspace, t.sandbox_id);
    RETURN_IF_ERROR(store_.DeleteInventory(t.workspace, kResourceSandbox, t.sandbox_id));
    events_.Normal(t.key(), "Deleted", "deleted sandbox " + t.sandbox_id);
  } else if (ours) {
    // Orphan: forget it, so garbage collection never deletes it either.
    RETURN_IF_ERROR(store_.DeleteInventory(t.workspace, kResourceSandbox, t.sandbox_id));
    events_.Normal(t.key(), "Orphaned",
                   "deletionPolicy Orphan: sandbox " + t.sandbox_id + " left running");
  }
  return std::optional<ReconcileResult>();  // cleaned up: the finalizer comes off
}

Status SandboxReconciler::CountRunningTime(Target& t, bool gone) {
  const Clock::WallTime now = clock_.Now();
  api::SandboxStatus unchanged_but_usage = t.status();
  unchanged_but_usage.usage = t.before().usage;
  const bool written_anyway = !(unchanged_but_usage == t.before());
  const bool running = !gone && t.status().state == "RUNNING";
  std::optional<Clock::WallTime> began;
  {
    std::lock_guard lock(mu_);
    auto seen = not_running_seen_.find(t.key());
    if (running && seen != not_running_seen_.end()) {
      began = RunningBegan(t.live_update_time, seen->second, now);
    }
    if (!running) {
      not_running_seen_[t.key()] = now;
    }
  }
  const std::optional<RunningPiece> piece = CountRunning(
      t.status().usage, running, now,
      written_anyway ||
          (!t.stale && CheckpointDue(t.before().usage, now, options_.usage_checkpoint)),
      began);
  if (!piece) {
    return api::OkStatus();
  }
  Store::UsageRecord record;
  record.workspace = t.workspace;
  record.task_uid = t.object.metadata.uid;
  record.attempt = piece->from_ms;
  record.task = t.key();
  record.finished_at_ms = piece->to_ms;
  record.compute_millis = piece->millis();
  if (Status recorded = store_.RecordUsage(record); !recorded.ok()) {
    t.status().usage = t.before().usage;  // counted next time, never in status without a record
    return recorded;
  }
  return api::OkStatus();
}

void SandboxReconciler::SetReady(Target& t, ConditionStatus status, std::string_view reason,
                                 std::string message) {
  reconcilers_internal::SetCondition(t.object, condition::kReady, status, reason,
                                     std::move(message), clock_);
}

void SandboxReconciler::SetSynced(Target& t, ConditionStatus status, std::string_view reason,
                                  std::string message) {
  reconcilers_internal::SetCondition(t.object, condition::kSynced, status, reason,
                                     std::move(message), clock_);
}

}  // namespace sbx::controller
