#include "controller/reconcilers/agent_task_reconciler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/conditions.h"
#include "api/rfc3339.h"
#include "controller/base/inline_wait.h"
#include "controller/reconcilers/internal/agent_task_target.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/on_demand_power.h"
#include "controller/reconcilers/pool_binding.h"
#include "controller/reconcilers/reconcile_skeleton.h"
#include "controller/reconcilers/task_artifacts.h"
#include "controller/reconcilers/task_attempts.h"
#include "controller/reconcilers/task_usage.h"
#include "controller/reconcilers/workspace_budget.h"
#include "controller/reconcilers/workspace_of.h"

namespace sbx::controller {
namespace {

namespace condition = api::condition;
namespace reason = api::reason;
using api::ConditionStatus;
using api::Object;
using api::Status;
using api::StatusOr;
using api::TaskPhase;
using LogKind = Store::TaskLogKind;
using reconcilers_internal::ExecutorLost;

// The input POST's refusal, if it has one: a definite answer (not transient), which the task
// reports as its error. In flight, not started, accepted or failed transiently: nullopt.
std::optional<Status> Refused(const InputSubmitter::Outcome& post) {
  if (post.state != InputSubmitter::State::kDone || post.status.ok() ||
      ClassifyError(post.status).transient()) {
    return std::nullopt;
  }
  return post.status;
}

}  // namespace

AgentTaskReconciler::AgentTaskReconciler(Store& store, CloudClients& clouds, Clock& clock,
                                         DependencyIndex* dependencies,
                                         AgentTaskReconcilerOptions options,
                                         SessionEventStreams* streams)
    : store_(store),
      clouds_(clouds),
      clock_(clock),
      dependencies_(dependencies),
      options_(std::move(options)),
      streams_(streams),
      own_log_(store),
      log_(streams != nullptr ? streams->log() : own_log_),
      resubmit_backoff_(options.resubmit),
      submitter_(options.enqueuer),
      events_(store, clock),
      sessions_(store, events_, clock),
      executor_(options_.boot_marker),
      task_sessions_(sessions_, executor_, events_, {}) {}

StatusOr<ReconcileResult> AgentTaskReconciler::Reconcile(const api::ObjectKey& key,
                                                         std::stop_token stop) {
  ReconcileSteps<Target> steps;
  steps.converge = [this](Target& t) { return Converge(t); };
  steps.finalize = [this](Target& t) -> StatusOr<std::optional<ReconcileResult>> {
    StatusOr<std::optional<ReconcileResult>> finalized = Finalize(t);
    if (finalized.ok() && !finalized->has_value()) {
      RETURN_IF_ERROR(store_.ReleaseTaskSlot(t.object.metadata.uid));  // whatever path it took
    }
    return finalized;
  };
  steps.record_outcome = [this](Target& t, const Status& s) { RecordSynced(t.object, s, clock_); };
  steps.dependencies = dependencies_;
  return RunReconcile(store_, key, stop, steps);
}

Status AgentTaskReconciler::LoadWorker(Target& t, const std::string& name) {
  ASSIGN_OR_RETURN(t.worker,
                   store_.Get({api::Kind::kAgentWorker, t.object.metadata.namespace_, name}));
  const auto& ws = t.worker.agent_worker_spec();
  const std::string sandbox_name = !ws.sandbox_ref.empty() ? ws.sandbox_ref : name;
  ASSIGN_OR_RETURN(t.sandbox,
                   store_.Get({api::Kind::kSandbox, t.object.metadata.namespace_, sandbox_name}));
  ASSIGN_OR_RETURN(t.agents, clouds_.Agents(t.object.metadata.namespace_,
                                            api::PlannedSandbox(t.sandbox).workspace_ref));
  return api::OkStatus();
}

void AgentTaskReconciler::Log(Target& t, const std::vector<Store::TaskLogEntry>& entries) {
  // The log is information: a failed append does not fail the task.
  (void)log_.Append(t.key(), t.object.metadata.uid, entries);
}

Clock::WallTime AgentTaskReconciler::NextResubmit(const Target& t) {
  std::lock_guard lock(mu_);
  auto it = resubmits_.find(t.object.metadata.uid);
  if (it != resubmits_.end()) {
    return it->second.last + resubmit_backoff_.Delay(it->second.posts);
  }
  // After a restart nothing is remembered: count from the submission, as after one POST.
  return ParseRfc3339(t.object.agent_task_status().submitted_at).value_or(clock_.Now()) +
         resubmit_backoff_.Delay(1);
}

void AgentTaskReconciler::PostInput(Target& t) {
  submitter_.Start(t.key(), t.object.metadata.uid,
                   [agents = t.agents, session = t.status().session_id, input = t.spec().input,
                    key = t.status().idempotency_key](std::stop_token stop) {
                     return agents->SendEvents(session, {openai::InputEvent::UserMessage(input)},
                                               key, stop);
                   });
}

void AgentTaskReconciler::Release(Target& t) {
  const std::string& uid = t.object.metadata.uid;
  submitter_.Forget(uid);
  if (streams_ != nullptr && !t.status().session_id.empty()) {
    streams_->Unwatch(t.status().session_id, uid);
  }
  log_.Forget(uid);
  std::lock_guard lock(mu_);
  resubmits_.erase(uid);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Converge(Target& t) {
  switch (t.status().phase) {
    case TaskPhase::kPending:
    case TaskPhase::kQueued:
      return Queue(t);
    case TaskPhase::kSubmitted:
    case TaskPhase::kRunning:
      return Follow(t);
    case TaskPhase::kSucceeded:
    case TaskPhase::kFailed:
    case TaskPhase::kCancelled:
    case TaskPhase::kTimedOut:
      return Expire(t);
  }
  return ReconcileResult::Done();
}

int64_t AgentTaskReconciler::AttemptComputeMillis(Target& t) {
  const std::optional<int64_t> start = t.status().usage.attempt_start_running_millis;
  if (!start || t.sandbox.metadata.uid.empty()) {
    return 0;  // it never needed its sandbox, or the sandbox is gone: nothing to measure
  }
  return std::max<int64_t>(
      0, api::RunningMillisAt(t.sandbox.sandbox_status().usage, clock_.Now()) - *start);
}

Status AgentTaskReconciler::RecordAttemptUsage(Target& t, int attempt, TaskPhase phase,
                                               const api::TaskUsageTotals& used,
                                               bool task_finished) {
  std::optional<std::string> workspace_id;
  if (!t.sandbox.metadata.name.empty()) {
    workspace_id =
        WorkspaceId(t.object.metadata.namespace_, api::PlannedSandbox(t.sandbox).workspace_ref);
  } else {
    ASSIGN_OR_RETURN(workspace_id, WorkspaceOf(store_, t.key()));
  }
  if (!workspace_id) {
    return api::OkStatus();  // its worker and sandbox are gone: nothing to charge it to
  }
  Store::UsageRecord record;
  record.workspace = *workspace_id;
  record.task_uid = t.object.metadata.uid;
  record.attempt = attempt;
  record.task = t.key();
  record.finished_at_ms = api::UnixMillis(clock_.Now());
  record.input_tokens = used.input_tokens;
  record.cached_input_tokens = used.cached_input_tokens;
  record.output_tokens = used.output_tokens;
  record.reasoning_tokens = used.reasoning_tokens;
  record.compute_millis = used.compute_millis;
  record.task_finished = task_finished;
  record.phase = std::string(api::TaskPhaseName(phase));
  RETURN_IF_ERROR(store_.RecordUsage(record));
  ASSIGN_OR_RETURN(const std::optional<Object> workspace, FindWorkspace(store_, *workspace_id));
  if (!workspace) {
    return api::OkStatus();
  }
  if (const auto& pricing = workspace->workspace_spec().pricing) {
    const api::TaskUsageTotals& totals = t.status().usage;
    t.status().usage.cost = api::FormatCost(api::CostOf(
        *pricing, {totals.input_tokens, totals.cached_input_tokens, totals.output_tokens,
                   totals.reasoning_tokens, totals.compute_millis, 0}));
  }
  if (options_.enqueuer != nullptr) {
    options_.enqueuer->Enqueue(api::KeyOf(*workspace));  // its status.usage and budget
  }
  return api::OkStatus();
}

StatusOr<ReconcileResult> AgentTaskReconciler::Submit(Target& t) {
  // The session, and the newest root turn in it before ours: our turn is the first one after
  // it. A task's own session (PerTask: its session and executor, the service holding the input
  // until the executor connects) has none, made for this attempt with nothing posted to it
  // before the write below, so it costs no GET.
  std::string session = t.worker.agent_worker_status().session_id;
  std::string previous_turn;
  if (PerTask(t)) {
    ASSIGN_OR_RETURN(openai::Session opened, OpenTaskSession(t));
    session = opened.id;
  } else if (std::optional<std::string> seen =
                 streams_ != nullptr ? streams_->NewestRootTurn(session) : std::nullopt) {
    previous_turn = *seen;  // the session's stream saw it created and ended: no GET
  } else {
    openai::ListParams newest;
    newest.limit = 1;
    newest.order = openai::ListOrder::kDesc;
    ASSIGN_OR_RETURN(openai::TurnPage before, t.agents->ListTurns(session, newest, t.stop));
    previous_turn = before.data.empty() ? "" : before.data.front().id;
  }

  // Exactly once: the submission and its key are in the store before the POST.
  api::AgentTaskStatus& st = t.status();
  st.phase = TaskPhase::kSubmitted;
  st.session_id = session;
  st.idempotency_key = AttemptKey(t.object.metadata.uid, static_cast<int>(st.attempts.size()) + 1);
  st.next_attempt_at.clear();
  st.previous_turn_id = previous_turn;
  st.submitted_at = FormatRfc3339(clock_.Now());
  st.queue_position = 0;
  reconcilers_internal::SetCondition(t.object, condition::kSubmitted, ConditionStatus::kTrue,
                                     reason::kSubmittedReason, "input sent to session " + session,
                                     clock_);
  reconcilers_internal::SetCondition(t.object, condition::kCompleted, ConditionStatus::kFalse,
                                     reason::kSubmittedReason, "", clock_);
  t.object.agent_task_status().observed_generation = t.object.metadata.generation;
  ASSIGN_OR_RETURN(Object stored, store_.UpdateStatus(t.object));
  t.object = stored;
  t.original_status = stored.status;
  Log(t, {TaskLogLine(LogKind::kStatus,
                      "submitted to worker " + st.worker + " (session " + session + ")")});

  // Reference §2.2: subscribe to the session's events before the input is sent.
  bool streaming = false;
  if (streams_ != nullptr) {
    streaming = streams_
                    ->Watch(*t.agents, session,
                            {t.key(), t.object.metadata.uid, st.previous_turn_id, ""}, t.stop)
                    .open;
    if (!streaming) {
      Log(t, {TaskLogLine(
                 LogKind::kStatus,
                 "the session's event stream is not open yet: following the turn by polling")});
    }
  }
  {
    std::lock_guard lock(mu_);
    resubmits_[t.object.metadata.uid] = Resubmits::First(clock_.Now());
  }
  PostInput(t);
  // In flight (the usual case: Follow reads the outcome when the POST ends and enqueues the
  // task), or done already (synchronous). A transient failure may or may not have reached the
  // service: Follow re-POSTs with the same key if no turn appears. With the stream open,
  // turn.created wakes the task.
  if (std::optional<Status> refused = Refused(TakePost(t.object.metadata.uid))) {
    return FailRefused(t, *refused);
  }
  return ReconcileResult::RequeueAfter(streaming ? options_.stream_check : options_.poll_interval);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Follow(Target& t) {
  api::AgentTaskStatus& st = t.status();
  if (Status loaded = LoadWorker(t, st.worker); !loaded.ok()) {
    if (loaded.code() == api::StatusCode::kNotFound &&
        (t.worker.metadata.uid.empty() || t.sandbox.metadata.uid.empty())) {
      // Its worker or sandbox went while the attempt ran: nothing is left to follow.
      st.result.error = {std::string(kWorkerLost), loaded.message()};
      return Finish(t, TaskPhase::kFailed);
    }
    return loaded;
  }
  if (dependencies_ != nullptr) {
    dependencies_->SetDependencies(
        t.key(), {{api::Kind::kAgentWorker, t.object.metadata.namespace_, st.worker}});
  }
  if (PerTask(t)) {
    // Its session is recorded from Submit until Finish closes it; none now means a Finish that
    // closed it stopped before its status was stored: the outcome is lost with the session.
    ASSIGN_OR_RETURN(const bool open, task_sessions_.HasOpen(SessionTarget(t)));
    if (!open) {
      st.result.error = {std::string(kWorkerLost),
                         "the task's session " + st.session_id +
                             " was closed before the end of the attempt was recorded"};
      return Finish(t, TaskPhase::kFailed);
    }
  }
  StatusOr<ReconcileResult> followed = FollowTurn(t);
  if (followed.status().code() == api::StatusCode::kNotFound && PerTask(t)) {
    // A PerTask session is deleted only by Finish's close, whose inventory rows go last: a close
    // that deleted the session and was stopped (kill -9) before its rows and the attempt's end
    // were stored leaves a task following a session the service no longer has. Its outcome went
    // with the session; the attempt ends as the closed case above (and the close is finished).
    StatusOr<openai::Session> session = t.agents->GetSession(st.session_id, t.stop);
    if (session.status().code() == api::StatusCode::kNotFound) {
      st.result.error = {std::string(kWorkerLost),
                         "the task's session " + st.session_id +
                             " was deleted before the end of the attempt was recorded"};
      return Finish(t, TaskPhase::kFailed);
    }
  }
  return followed;
}

StatusOr<ReconcileResult> AgentTaskReconciler::FollowTurn(Target& t) {
  api::AgentTaskStatus& st = t.status();
  const std::string& uid = t.object.metadata.uid;
  const auto now = clock_.Now();
  const auto submitted = ParseRfc3339(st.submitted_at).value_or(now);

  // The session's event stream reports the turn (and enqueues the task when it is created and
  // when it ends). The turn is read here only when the stream cannot have seen everything: no
  // streams at all, a stream not open (fallback polling, so a task never depends on a stream
  // that does not come back), or the task just bound to the stream (after an sbxd restart the
  // turn may have run while nobody listened: reference §2.6, re-read turns and items).
  std::optional<SessionEventStreams::View> view;
  bool poll = true;
  // The reads of the pass that binds the task are the only ones the stream will not make up
  // for: they wait inline, since a pacing wait given back would leave the task bound and the
  // next pass would not read again (found by chaos_agent_tasks_kill9: a turn that ended while
  // sbxd was down stayed Running for minutes).
  std::optional<ScopedInlinePacing> binding_reads;
  if (streams_ != nullptr) {
    const SessionEventStreams::WatchResult w = streams_->Watch(
        *t.agents, st.session_id, {t.key(), uid, st.previous_turn_id, st.turn_id}, t.stop);
    view = streams_->Observe(st.session_id, uid);
    poll = !w.open || w.bound;
    if (w.bound) {
      binding_reads.emplace();
    }
  }
  // When to look again without being woken: polling without streams; with a stream, only to see
  // that it is still open (no API call) or at the deadline.
  auto next_look = [&](std::optional<Clock::WallTime> due) {
    std::chrono::milliseconds wait = streams_ == nullptr ? options_.poll_interval
                                     : poll              ? options_.stream_fallback_poll
                                                         : options_.stream_check;
    if (st.cancel_reason.empty()) {
      const auto deadline = submitted + t.spec().timeout;
      due = due ? std::min(*due, deadline) : deadline;
    }
    if (due) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*due - now);
      wait = std::clamp(left, std::chrono::milliseconds(1), wait);
    }
    return ReconcileResult::RequeueAfter(wait);
  };

  const bool cancel_requested =
      t.object.metadata.annotations.count(std::string(api::kCancelRequestedAnnotation)) != 0;
  const bool timed_out = now - submitted >= t.spec().timeout;

  if (st.turn_id.empty()) {
    // The input POST: refused (the service's error code ends the task), or still held by the
    // service while it waits for an executor (no re-POST meanwhile: reference §2.2).
    const InputSubmitter::Outcome post = TakePost(uid);
    if (std::optional<Status> refused = Refused(post)) {
      return FailRefused(t, *refused);
    }
    const bool posting = post.state == InputSubmitter::State::kInFlight;
    std::string ours = view ? view->turn_id : "";
    if (ours.empty() && st.cancel_reason.empty() && (cancel_requested || timed_out)) {
      // The deadline passed (or a cancel came) before any turn: no more POSTs. One the service
      // still holds is cut now instead of waited out (its hold lasts up to 5 minutes). A cut
      // POST loses its input (reference §2.1, observed but unconfirmed), so look once more for
      // a turn it may have started: one found is cancelled below like any running turn.
      if (posting) {
        submitter_.Cancel(uid);
      }
      ASSIGN_OR_RETURN(ours, FindTaskTurn(*t.agents, st.session_id, st.previous_turn_id, t.stop));
      if (ours.empty()) {
        st.cancel_reason = timed_out && !cancel_requested ? "TimedOut" : "Cancelled";
        st.cancel_requested_at = FormatRfc3339(now);
        if (st.cancel_reason == "TimedOut") {
          if (std::string failure = LastPostFailure(uid); !failure.empty()) {
            st.result.error = {std::string(kInputPostFailed), failure};
          }
        }
        Log(t, {TaskLogLine(LogKind::kStatus,
                            std::string(st.cancel_reason == "TimedOut" ? "timeout reached"
                                                                       : "cancel requested") +
                                " before the turn started" +
                                (posting ? ": the input POST the service held was cut" : ""))});
        return Finish(
            t, st.cancel_reason == "TimedOut" ? TaskPhase::kTimedOut : TaskPhase::kCancelled);
      }
    }
    const Clock::WallTime resubmit_at = NextResubmit(t);
    if (ours.empty() && (poll || (!posting && now >= resubmit_at))) {
      ASSIGN_OR_RETURN(ours, FindTaskTurn(*t.agents, st.session_id, st.previous_turn_id, t.stop));
    }
    if (ours.empty() && (posting || now < resubmit_at)) {
      SetWaitingCondition(t);
      return next_look(posting ? std::nullopt : std::optional<Clock::WallTime>(resubmit_at));
    }
    if (ours.empty()) {
      // The POST may never have arrived; the same key makes a repeat harmless.
      PostInput(t);
      {
        std::lock_guard lock(mu_);
        Resubmits& r = resubmits_[uid];
        r.posts = std::max(r.posts, 1) + 1;
        r.last = now;
      }
      if (std::optional<Status> refused = Refused(TakePost(uid))) {
        return FailRefused(t, *refused);
      }
      SetWaitingCondition(t);
      return next_look(NextResubmit(t));
    }
    st.turn_id = ours;
    st.phase = TaskPhase::kRunning;
    st.started_at = FormatRfc3339(now);
    if (streams_ != nullptr) {
      streams_->SetTurn(st.session_id, uid, ours);
    }
    Log(t, {TaskLogLine(LogKind::kStatus, "turn " + ours + " started")});
  }

  if (st.cancel_reason.empty() && (cancel_requested || timed_out)) {
    RETURN_IF_ERROR(
        t.agents->SendEvents(st.session_id, {openai::InputEvent::Cancel()}, "", t.stop));
    st.cancel_reason = timed_out && !cancel_requested ? "TimedOut" : "Cancelled";
    st.cancel_requested_at = FormatRfc3339(now);
    Log(t, {TaskLogLine(LogKind::kStatus, st.cancel_reason == "TimedOut"
                                              ? "timeout reached: cancelling the turn"
                                              : "cancel requested: cancelling the turn")});
  }

  std::optional<openai::Turn> turn;
  if (view && view->outcome) {
    turn = view->outcome;
  } else if (poll) {
    ASSIGN_OR_RETURN(turn, t.agents->GetTurn(st.session_id, st.turn_id, t.stop));
  }
  if (turn && openai::IsTerminal(turn->status)) {
    return FinishTurn(t, *turn);
  }
  if (poll) {
    SyncLog(t, /*final=*/false);
  }
  SetWaitingCondition(t);
  return next_look(std::nullopt);
}

StatusOr<ReconcileResult> AgentTaskReconciler::FinishTurn(Target& t, const openai::Turn& turn) {
  api::AgentTaskStatus& st = t.status();
  switch (turn.status) {
    case openai::TurnStatus::kCompleted:
      return Finish(t, TaskPhase::kSucceeded, turn.usage);
    case openai::TurnStatus::kFailed:
      if (turn.error) {
        st.result.error = {turn.error->code, turn.error->message};
      }
      return Finish(t, TaskPhase::kFailed, turn.usage);
    default:  // cancelled: by the task's own deadline, or on request
      return Finish(t,
                    st.cancel_reason == "TimedOut" ? TaskPhase::kTimedOut : TaskPhase::kCancelled,
                    turn.usage);
  }
}

// Completed=False while submitted or running: WaitingForExecutor when the worker's executor is
// gone (the service holds the input, or the turn, for its connection wait), else TurnRunning
// (Submitted before the turn exists) or Cancelling.
void AgentTaskReconciler::SetWaitingCondition(Target& t) {
  const api::AgentTaskStatus& st = t.status();
  if (ExecutorLost(t.worker)) {
    reconcilers_internal::SetCondition(
        t.object, condition::kCompleted, ConditionStatus::kFalse, reason::kWaitingForExecutor,
        "the executor of worker " + st.worker + " is not connected; the service holds the " +
            (st.turn_id.empty() ? "input" : "turn") + " for its connection wait (5 minutes)",
        clock_);
  } else if (!st.cancel_reason.empty()) {
    reconcilers_internal::SetCondition(t.object, condition::kCompleted, ConditionStatus::kFalse,
                                       reason::kCancelling, "", clock_);
  } else {
    reconcilers_internal::SetCondition(
        t.object, condition::kCompleted, ConditionStatus::kFalse,
        st.turn_id.empty() ? reason::kSubmittedReason : reason::kTurnRunning, "", clock_);
  }
}

// The service refused the input: the task fails with the refusal as its error.
StatusOr<ReconcileResult> AgentTaskReconciler::FailRefused(Target& t, const Status& refused) {
  t.status().result.error = {std::string(ClassifyError(refused).reason), refused.message()};
  return Finish(t, TaskPhase::kFailed);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Finish(Target& t, TaskPhase phase,
                                                      std::optional<openai::Usage> usage) {
  // The final reads (saved items, the turn's usage) and the collect are best effort: a pacing
  // wait given back would skip them without a word and store a result without them (found by
  // chaos_agent_tasks_kill9: a task finished with 0 commands), so they wait inline.
  const ScopedInlinePacing inline_pacing;
  api::AgentTaskStatus& st = t.status();
  // The attempt ends here (one was made if the input was submitted); another may follow.
  const int attempt = static_cast<int>(st.attempts.size()) + 1;
  const bool attempted = !st.submitted_at.empty();
  const bool retry = attempted && ShouldRetry(t.spec(), attempt, phase, st.result.error.code);
  std::optional<openai::Usage> attempt_usage;  // this attempt's root turn's, when it had one
  if (!st.turn_id.empty() && t.agents != nullptr) {
    // The saved items are the final word (reference §2.6): whatever the stream missed goes in
    // now, and the result message and command count come from them.
    SyncLog(t, /*final=*/true);
    if (!usage) {  // observed null on the real service's terminal events (reference §2.4)
      if (StatusOr<openai::Turn> turn = t.agents->GetTurn(st.session_id, st.turn_id, t.stop);
          turn.ok()) {
        usage = turn->usage;
      }
    }
    if (usage) {
      st.result.usage = {usage->input_tokens, usage->output_tokens, usage->total_tokens};
    }
    attempt_usage = usage;
    if (!retry) {
      Collect(t);  // from the last attempt only
    }
  }
  // A PerTask session is closed (after the collect) before the attempt's end is stored; a close
  // the service holds up is tried again by the next pass, which comes back here.
  if (t.agents != nullptr && !t.worker.metadata.uid.empty()) {
    ASSIGN_OR_RETURN(const bool closed, CloseTaskSession(t));
    if (!closed) {
      return ReconcileResult::RequeueAfter(options_.session_close_retry);
    }
  }
  // In the same status write as the attempt's record: a pass that comes back here (a close held
  // up above) has not added it yet, and one after this write sees the attempt ended.
  api::TaskUsageTotals used;
  used.compute_millis = AttemptComputeMillis(t);
  st.usage.compute_millis += used.compute_millis;
  st.usage.attempt_start_running_millis.reset();
  if (attempted) {
    st.attempts.push_back({attempt, st.worker, st.turn_id, phase, st.result.error, st.submitted_at,
                           FormatRfc3339(clock_.Now())});
    if (attempt_usage) {
      AddUsage(st.usage, *attempt_usage);
      AddUsage(used, *attempt_usage);
    }
    // The ledger first (keyed by uid and attempt, so a pass that fails to store the status and
    // comes back here records nothing twice).
    RETURN_IF_ERROR(RecordAttemptUsage(t, attempt, phase, used, /*task_finished=*/!retry));
  }
  if (retry) {
    return Retry(t);
  }
  st.phase = phase;
  st.queue_position = 0;
  st.completed_at = FormatRfc3339(clock_.Now());
  const std::string_view name = api::TaskPhaseName(phase);
  reconcilers_internal::SetCondition(t.object, condition::kCompleted, ConditionStatus::kTrue, name,
                                     st.result.error.message, clock_);
  Log(t,
      {TaskLogLine(LogKind::kStatus, std::string(name) + (st.result.error.code.empty()
                                                              ? ""
                                                              : ": " + st.result.error.code + " " +
                                                                    st.result.error.message))});
  Release(t);
  // The final status first: a replica or a slot given back before it is stored could start
  // another task while this one still looks unfinished.
  t.status().observed_generation = t.object.metadata.generation;
  ASSIGN_OR_RETURN(Object stored, store_.UpdateStatus(t.object));
  t.object = stored;
  t.original_status = stored.status;
  // Once, here: a crash before it leaves a stale binding, which counts as free at once
  // (pool_binding.h) and which the pool clears, and a stale slot, which the next task that
  // finds the workspace at its limit gives back (HoldForConcurrency).
  RETURN_IF_ERROR(Unbind(t, t.status().worker));
  RETURN_IF_ERROR(store_.ReleaseTaskSlot(t.object.metadata.uid));
  return Expire(t);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Retry(Target& t) {
  api::AgentTaskStatus& st = t.status();
  const std::string& uid = t.object.metadata.uid;
  std::chrono::milliseconds retry_after{0};
  {
    std::lock_guard lock(mu_);
    if (auto it = resubmits_.find(uid); it != resubmits_.end()) {
      retry_after = it->second.retry_after;
    }
  }
  const std::chrono::milliseconds delay = RetryDelay(st.attempts.back().attempt, retry_after);
  const std::string replica = t.spec().pool_ref.empty() ? "" : st.worker;
  Release(t);
  // The next attempt starts afresh (a selector or a pool picks its worker again); the attempts
  // so far stay, and what they used.
  api::AgentTaskStatus next;
  next.observed_generation = t.object.metadata.generation;
  next.conditions = std::move(st.conditions);
  next.attempts = std::move(st.attempts);
  next.usage = st.usage;
  next.worker = t.spec().worker_ref;
  next.phase = TaskPhase::kQueued;
  next.next_attempt_at = FormatRfc3339(clock_.Now() + delay);
  st = std::move(next);
  const std::string message = RetryMessage(t.spec(), st);
  Wait(t, reason::kRetrying, message);
  Log(t, {TaskLogLine(LogKind::kStatus, message)});
  // The status first, as in Finish: the replica and the slot are free for others during the
  // delay (a crash before leaves a Queued task holding its slot until it is submitted again).
  ASSIGN_OR_RETURN(Object stored, store_.UpdateStatus(t.object));
  t.object = stored;
  t.original_status = stored.status;
  RETURN_IF_ERROR(Unbind(t, replica));
  RETURN_IF_ERROR(store_.ReleaseTaskSlot(t.object.metadata.uid));
  return ReconcileResult::RequeueAfter(delay);
}

InputSubmitter::Outcome AgentTaskReconciler::TakePost(const std::string& uid) {
  InputSubmitter::Outcome post = submitter_.Take(uid);
  if (post.state == InputSubmitter::State::kDone) {
    std::lock_guard lock(mu_);
    Resubmits& r = resubmits_[uid];
    if (post.status.ok()) {
      r.last_failure.clear();
    } else if (const ErrorClass error = ClassifyError(post.status); error.transient()) {
      r.last_failure = error.reason + ": " + ConditionMessage(post.status);
      r.retry_after = error.retry_after.value_or(std::chrono::milliseconds(0));
    }
  }
  return post;
}

std::string AgentTaskReconciler::LastPostFailure(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = resubmits_.find(uid);
  return it != resubmits_.end() ? it->second.last_failure : "";
}

void AgentTaskReconciler::SyncLog(Target& t, bool final) {
  // The turn's saved items (reference §2.6) are the log's item results: each is appended once
  // (TaskLogWriter dedupes by item id, also against what the event stream logged), so a
  // restart, a dropped stream or a missed poll leaves no gap.
  api::AgentTaskStatus& st = t.status();
  StatusOr<std::vector<openai::Item>> items = t.agents->ListAllTurnItems(
      st.session_id, st.turn_id, {.order = openai::ListOrder::kAsc}, t.stop);
  if (!items.ok()) {
    return;
  }
  int commands = 0;
  for (const openai::Item& item : *items) {
    const bool done = final || item.status != openai::ItemStatus::kInProgress;
    if (item.type == openai::ItemType::kMessage && item.role == "assistant" && done) {
      st.result.message = item.text;
    } else if (item.type == openai::ItemType::kCommandExecution) {
      ++commands;
    }
  }
  st.commands = commands;
  Log(t, ItemLogEntries(*items, final));
}

void AgentTaskReconciler::Collect(Target& t) {
  t.status().artifacts = CollectArtifacts(
      store_, clouds_, t.object, t.sandbox,
      PerTask(t) ? TaskSession::WorkspaceDirectory(t.object.metadata.uid)
                 : t.worker.agent_worker_spec().workspace_directory,
      options_.scrub_artifact,
      [&](std::string line) { Log(t, {TaskLogLine(LogKind::kStatus, std::move(line))}); }, t.stop);
}

StatusOr<ReconcileResult> AgentTaskReconciler::Expire(Target& t) {
  if (dependencies_ != nullptr) {
    dependencies_->Untrack(t.key());
  }
  const auto& ttl = t.spec().ttl_after_finished;
  if (!ttl) {
    return ReconcileResult::Done();
  }
  const auto completed = ParseRfc3339(t.status().completed_at).value_or(clock_.Now());
  const auto left = completed + *ttl - clock_.Now();
  if (left <= decltype(left)::zero()) {
    Status deleted = store_.Delete(t.key()).status();
    if (!deleted.ok() && deleted.code() != api::StatusCode::kNotFound) {
      return deleted;
    }
    return ReconcileResult::Done();
  }
  return ReconcileResult::RequeueAfter(std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                                       std::chrono::milliseconds(1));
}

StatusOr<std::optional<ReconcileResult>> AgentTaskReconciler::Finalize(Target& t) {
  api::AgentTaskStatus& st = t.status();
  if (st.phase != TaskPhase::kSubmitted && st.phase != TaskPhase::kRunning) {
    Release(t);
    RETURN_IF_ERROR(Unbind(t, t.status().worker));
    return std::optional<ReconcileResult>();
  }
  // A running turn is cancelled before the task goes (its worker would stay busy otherwise).
  Status loaded = LoadWorker(t, st.worker);
  if (loaded.code() == api::StatusCode::kNotFound) {
    return std::optional<ReconcileResult>();  // no worker, no session to cancel in
  }
  RETURN_IF_ERROR(loaded);
  // An input POST still held by the service would start a turn after the task is gone, which the
  // worker's next task could take for its own: wait for its answer, then cancel what it started.
  if (submitter_.Take(t.object.metadata.uid).state == InputSubmitter::State::kInFlight) {
    reconcilers_internal::SetCondition(
        t.object, condition::kCompleted, ConditionStatus::kFalse, reason::kCancelling,
        "deleted while the service holds its input: waiting for its answer", clock_);
    return std::optional<ReconcileResult>(ReconcileResult::RequeueAfter(options_.poll_interval));
  }
  if (st.turn_id.empty()) {
    ASSIGN_OR_RETURN(st.turn_id,
                     FindTaskTurn(*t.agents, st.session_id, st.previous_turn_id, t.stop));
  }
  if (st.cancel_reason.empty()) {
    RETURN_IF_ERROR(
        t.agents->SendEvents(st.session_id, {openai::InputEvent::Cancel()}, "", t.stop));
    st.cancel_reason = "Cancelled";
    st.cancel_requested_at = FormatRfc3339(clock_.Now());
  }
  if (st.turn_id.empty()) {
    return std::optional<ReconcileResult>();
  }
  StatusOr<openai::Turn> turn = t.agents->GetTurn(st.session_id, st.turn_id, t.stop);
  if (turn.status().code() == api::StatusCode::kNotFound) {
    return std::optional<ReconcileResult>();
  }
  RETURN_IF_ERROR(turn.status());
  if (openai::IsTerminal(turn->status)) {
    ASSIGN_OR_RETURN(const bool closed, CloseTaskSession(t));
    if (!closed) {
      return std::optional(ReconcileResult::RequeueAfter(options_.session_close_retry));
    }
    Release(t);
    RETURN_IF_ERROR(Unbind(t, t.status().worker));
    return std::optional<ReconcileResult>();
  }
  return std::optional<ReconcileResult>(ReconcileResult::RequeueAfter(options_.poll_interval));
}

bool AgentTaskReconciler::PerTask(const Target& t) {
  return t.worker.agent_worker_spec().session == api::SessionMode::kPerTask;
}

TaskSessionTarget AgentTaskReconciler::SessionTarget(const Target& t) const {
  const std::string& ns = t.object.metadata.namespace_;
  const api::SandboxIdentity planned = api::PlannedSandbox(t.sandbox);
  StatusOr<api::SandboxIdentity> created = api::CreatedSandbox(t.sandbox);
  return TaskSessionTarget{
      .owner = {t.key(), t.object.metadata.uid, WorkspaceId(ns, planned.workspace_ref),
                t.worker.metadata.name},
      .sandbox_id = created.ok() ? created->sandbox_id : planned.sandbox_id,
      .command = t.worker.agent_worker_spec().executor.command,
      .keep_workspace = t.spec().keep_workspace};
}

StatusOr<openai::Session> AgentTaskReconciler::OpenTaskSession(Target& t) {
  const std::string& ns = t.object.metadata.namespace_;
  const std::string workspace_ref = api::PlannedSandbox(t.sandbox).workspace_ref;
  TaskSessionSpec spec;
  spec.session = SessionRequestOf(t.worker.agent_worker_spec().agent,
                                  TaskSession::WorkspaceDirectory(t.object.metadata.uid));
  ASSIGN_OR_RETURN(spec.launch, ResolveExecutorLaunch(clouds_, t.worker, workspace_ref));
  ASSIGN_OR_RETURN(databricks::SandboxApi * sandboxes, clouds_.Sandboxes(ns, workspace_ref));
  return task_sessions_.Open(SessionTarget(t), std::move(spec), *t.agents, *sandboxes, t.stop);
}

StatusOr<bool> AgentTaskReconciler::CloseTaskSession(Target& t) {
  databricks::SandboxApi* sandboxes = nullptr;
  if (t.sandbox.sandbox_status().state == "RUNNING") {
    StatusOr<databricks::SandboxApi*> api = clouds_.Sandboxes(
        t.object.metadata.namespace_, api::PlannedSandbox(t.sandbox).workspace_ref);
    if (api.ok()) {
      sandboxes = *api;
    }
  }
  return task_sessions_.Close(SessionTarget(t), *t.agents, sandboxes, t.stop);
}

}  // namespace sbx::controller
