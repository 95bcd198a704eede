// OnDemandPower: the parts of Sandbox.spec.power OnDemand (DESIGN §7.2) that the Sandbox, the
// AgentWorker and the AgentTask reconcilers share.
//
//  * Demand: what needs an OnDemand sandbox running now, read from the store only (so a restart
//    of sbxd recomputes it): a worker of the sandbox whose first bring-up is not over (no
//    session yet, or its executor never seen connected to the current environment; for a
//    session: PerTask worker, no probe for its command yet — unless a configuration error was
//    diagnosed, which is shown and then slept on); a worker whose session
//    asks for its executor (status.wakeRequestedAt: a pending environment_connection, or a turn
//    in progress that sbx did not submit); an unfinished AgentTask of one of its workers. The
//    Sandbox reconciler stops the sandbox `idleStop` after it found no demand
//    (status.idleSince), and starts it when there is some.
//  * The worker's view of its sandbox (PowerStateOf): awake, asleep (Ready=True reason Sleeping:
//    it can take work) or waking.
//  * The task's admission (AdmitTask): the first task in line for a worker on an OnDemand
//    sandbox is submitted only once the sandbox runs and the executor is connected; before that
//    it waits (WaitingForWake) and wakes the sandbox. A submission and a stop cannot cross: the
//    task holds the sandbox (Hold) while it writes its submission, and the sandbox reconciler
//    announces a stop (BeginStop), then reads the demand again before the call. Either the stop
//    sees the submission, or the task sees the stop and waits for STOPPED and the next start.
//    This is in memory, which is enough because one sbxd (the leader) runs the reconcilers; after
//    a crash the store's state (the task's Submitted phase, the sandbox's STOPPING) decides.
//  * SessionNeedsExecutor: the wake decision from a session's state (required_actions, status),
//    for the worker's status cadence and for anything that learns about a session sooner (a
//    webhook: it only has to make the worker look at its session now).
//
// Thread-safety: OnDemandPower is thread-safe; the free functions are pure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/dependency_index.h"
#include "controller/store/store.h"

namespace sbx::controller {

bool IsOnDemand(const api::Object& sandbox);

// The name of the Sandbox object an AgentWorker uses (sandboxRef, or its own for a template).
std::string SandboxNameOf(const api::Object& worker);

// The worker's first bring-up on its current session is over: its executor was seen connected
// to status.environmentId (session: PerTask, which has no standing session: a probe looked for
// the executor's command in the sandbox), or a configuration error was diagnosed (shown in its
// conditions; the sandbox need not stay up for it).
bool BroughtUp(const api::Object& worker);

// Whether the session needs its executor: a pending environment_connection (input waits for it)
// or a turn in progress or waiting on an action.
bool SessionNeedsExecutor(const openai::Session& session);

// How a worker sees its OnDemand sandbox, from the Sandbox's status.
enum class SandboxPower {
  kAwake,   // running and set up (Ready=True), or not OnDemand
  kAsleep,  // stopped or stopping because nothing needs it (Ready reason Sleeping or Stopping)
  kWaking,  // being started (or set up) for work
};
SandboxPower PowerStateOf(const api::Object& sandbox);

// What needs an OnDemand sandbox, read from the store.
struct SandboxDemand {
  std::string why;                      // "" = nothing: it may sleep; else a short reason
  std::vector<api::ObjectKey> sources;  // its workers and their unfinished tasks
};
api::StatusOr<SandboxDemand> DemandOf(Store& store, const api::Object& sandbox);

// What the first task in line for a worker may do.
enum class TaskGate { kSubmit, kWaitForWorker, kWaitForWake };

class OnDemandPower {
 public:
  explicit OnDemandPower(Store& store) : store_(store) {}
  OnDemandPower(const OnDemandPower&) = delete;
  OnDemandPower& operator=(const OnDemandPower&) = delete;

  // Before the reconcilers run. `wake` queues one key for reconciling, and only that key (sbxd:
  // the Manager's WorkQueue::Add — not Manager::Enqueue, which would also queue the waiting
  // task, a dependent of the sandbox, and loop); `dependencies` is the Manager's index. Either
  // may be empty/null.
  using WakeFn = std::function<void(const api::ObjectKey&)>;
  void Attach(WakeFn wake, DependencyIndex* dependencies);

  // Sandbox reconciler: the demand, and the sandbox made dependent on its sources (a task or
  // worker status change then reconciles the sandbox at once).
  api::StatusOr<SandboxDemand> Demand(const api::Object& sandbox);
  // Announces a stop and reads the demand again: "" = go ahead and stop (the stop stays
  // announced until EndStop); otherwise why not (nothing announced).
  api::StatusOr<std::string> BeginStop(const api::Object& sandbox);
  // The stop was called (or given up); the sandbox's status now says it is not RUNNING.
  void EndStop(const api::ObjectKey& sandbox);

  // Task reconciler. While a Hold lives, no stop of the sandbox begins.
  class Hold {
   public:
    Hold(OnDemandPower* power, api::ObjectKey sandbox);
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

   private:
    void Release();
    OnDemandPower* power_;
    api::ObjectKey sandbox_;
  };
  // nullopt while a stop of the sandbox is under way.
  std::optional<Hold> TryHold(const api::ObjectKey& sandbox);
  // Reconciles the sandbox now (a task waits for it).
  void Wake(const api::ObjectKey& sandbox);

 private:
  Store& store_;
  std::mutex mu_;
  WakeFn wake_;                              // mu_
  DependencyIndex* dependencies_ = nullptr;  // mu_
  std::map<api::ObjectKey, int> holds_;      // mu_
  std::map<api::ObjectKey, bool> stopping_;  // mu_
};

// The task reconciler's decision for the first task in line for `worker` (whose Sandbox object
// is `sandbox`). kSubmit comes with a Hold on an OnDemand sandbox, kept through the submission;
// kWaitForWake (and kWaitForWorker for a worker with a diagnosed configuration error, which a
// fresh boot may show fixed) has already asked for the sandbox to be woken. `power` may be null (no
// coordination: tests of one reconciler).
struct TaskAdmission {
  TaskGate gate = TaskGate::kWaitForWorker;
  std::string message;
  std::optional<OnDemandPower::Hold> hold;
};
TaskAdmission AdmitTask(OnDemandPower* power, const api::Object& worker,
                        const api::Object& sandbox);

}  // namespace sbx::controller
