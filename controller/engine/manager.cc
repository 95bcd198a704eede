#include "controller/engine/manager.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "controller/base/inline_wait.h"

namespace sbx::controller {
namespace {

// Lifecycle misuse is a bug in the wiring code, not input: abort with a message (STYLE 9).
[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "sbx::controller::Manager: %s\n", what.c_str());
  std::abort();
}

}  // namespace

Manager::Manager(Clock& clock, ManagerOptions options)
    : clock_(clock),
      options_(std::move(options)),
      terminal_backoff_(options_.terminal_backoff, options_.random),
      queue_(clock, Backoff(options_.backoff, options_.random)) {}

Manager::~Manager() { Stop(); }

void Manager::Register(Reconciler& reconciler) {
  if (started_) {
    Die("Register after Start");
  }
  const auto [it, inserted] = reconcilers_.emplace(reconciler.kind(), &reconciler);
  if (!inserted) {
    Die("two reconcilers for kind " + std::string(api::KindName(reconciler.kind())));
  }
}

void Manager::AddSource(Source& source) {
  if (started_) {
    Die("AddSource after Start");
  }
  sources_.push_back(&source);
}

void Manager::SetObserver(ReconcileObserver* observer) {
  if (started_) {
    Die("SetObserver after Start");
  }
  observer_ = observer;
}

void Manager::SetOwnership(OwnershipFn owns) {
  if (started_) {
    Die("SetOwnership after Start");
  }
  owns_ = std::move(owns);
}

void Manager::Start() {
  if (started_) {
    Die("Start called twice");
  }
  started_ = true;
  const int workers = options_.workers > 0 ? options_.workers : 1;
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this](std::stop_token stop) { WorkerLoop(stop); });
  }
  source_threads_.reserve(sources_.size());
  for (Source* source : sources_) {
    source_threads_.emplace_back(
        [this, source](std::stop_token stop) { source->Run(*this, stop); });
  }
}

void Manager::Stop(std::stop_token cancel) {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  // 1. No new intake: stop and join the sources.
  for (std::jthread& t : source_threads_) {
    t.request_stop();
  }
  source_threads_.clear();  // joins
  // 2. Hand out nothing more; let in-flight reconciles finish unless cancelled.
  if (!queue_.ShutDownWithDrain(cancel)) {
    for (std::jthread& t : workers_) {
      t.request_stop();
    }
  }
  // 3. Workers blocked in Get have returned (shutdown); the rest finish their reconcile.
  for (std::jthread& t : workers_) {
    t.request_stop();
  }
  workers_.clear();  // joins
}

void Manager::Enqueue(const api::ObjectKey& key) {
  queue_.Add(key);
  EnqueueDependents(key);
}

void Manager::EnqueueOne(const api::ObjectKey& key) { queue_.Add(key); }

void Manager::EnqueueDependents(const api::ObjectKey& key) {
  for (const api::ObjectKey& dependent : dependencies_.TransitiveDependentsOf(key)) {
    queue_.Add(dependent);
  }
}

ManagerStats Manager::Stats() const {
  ManagerStats s;
  s.reconciles_total = reconciles_.load();
  s.transient_errors_total = transient_errors_.load();
  s.terminal_errors_total = terminal_errors_.load();
  s.exceptions_total = exceptions_.load();
  s.unhandled_kind_total = unhandled_kind_.load();
  s.not_owned_total = not_owned_.load();
  s.queue = queue_.Stats();
  return s;
}

void Manager::WorkerLoop(std::stop_token stop) {
  while (std::optional<api::ObjectKey> key = queue_.Get(stop)) {
    ProcessOne(*key, stop);
    queue_.Done(*key);
  }
}

void Manager::ProcessOne(const api::ObjectKey& key, std::stop_token stop) {
  auto it = reconcilers_.find(key.kind);
  if (it == reconcilers_.end()) {
    ++unhandled_kind_;
    queue_.Forget(key);
    return;
  }
  if (owns_) {
    api::StatusOr<bool> mine = owns_(key);
    if (!mine.ok()) {
      ++transient_errors_;
      queue_.AddRateLimited(key, ClassifyError(mine.status()).retry_after);
      return;
    }
    if (!*mine) {
      ++not_owned_;
      queue_.Forget(key);
      return;
    }
  }
  ReconcileRecord record;
  record.key = key;
  const Clock::SteadyTime start = clock_.Steady();
  api::StatusOr<ReconcileResult> result = api::InternalError("reconcile did not run");
  // STYLE 8: nothing thrown by a reconciler may take the worker (and the daemon) down.
  try {
    // The key as the owner of pacing waits given back; none: they are waited inline.
    const ScopedInlineWaitLimit inline_waits(options_.max_inline_wait,
                                             options_.defer_pacing ? key.ToString() : "");
    result = it->second->Reconcile(key, stop);
  } catch (const std::exception& e) {
    ++exceptions_;
    result = api::InternalError("reconciler threw on " + key.ToString() + ": " + e.what());
  } catch (...) {
    ++exceptions_;
    result = api::InternalError("reconciler threw a non-standard exception on " + key.ToString());
  }
  record.duration = clock_.Steady() - start;
  ++reconciles_;

  if (result.ok()) {
    record.result = *result;
    if (result->action == ReconcileResult::Action::kRequeueAfter && result->at_once) {
      queue_.AddContinue(key);
    } else if (result->action == ReconcileResult::Action::kRequeueAfter &&
               result->after.count() <= 0) {
      queue_.AddRateLimited(key);
    } else {
      queue_.Forget(key);
      if (result->action == ReconcileResult::Action::kRequeueAfter) {
        queue_.AddAfter(key, result->after);
      }
    }
  } else if (IsPacingDeferred(result.status())) {
    // Not a failure: the call has its place in line, after the wait. Requeued
    // then, and the key's failure count (its backoff) stays as it was.
    record.status = result.status();
    record.error = ClassifyError(record.status);
    queue_.AddAtItsPlace(key, record.status.retry_after().value_or(std::chrono::milliseconds(0)));
  } else {
    record.status = result.status();
    ErrorClass error = ClassifyError(record.status);
    if (error.transient()) {
      ++transient_errors_;
      // A server failing (5xx, a timeout) is not congestion: its Retry-After is the delay, for a
      // few failures in a row. A 429 is: the backoff keeps growing under its Retry-After (#25).
      queue_.AddRateLimited(key, error.retry_after,
                            record.status.code() == api::StatusCode::kResourceExhausted
                                ? WorkQueue::RetryWait::kAtLeast
                                : WorkQueue::RetryWait::kAsGiven);
    } else {
      ++terminal_errors_;
      queue_.AddRateLimited(key, terminal_backoff_.Delay(queue_.NumRequeues(key) + 1));
    }
    record.error = std::move(error);
  }
  record.num_requeues = queue_.NumRequeues(key);
  if (observer_ != nullptr) {
    observer_->OnReconciled(record);
  }
}

}  // namespace sbx::controller
