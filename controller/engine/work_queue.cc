#include "controller/engine/work_queue.h"

namespace sbx::controller {

WorkQueue::WorkQueue(Clock& clock, Backoff backoff)
    : clock_(clock),
      backoff_(std::move(backoff)),
      delay_thread_([this](std::stop_token stop) { DelayLoop(stop); }) {}

WorkQueue::~WorkQueue() {
  ShutDown();
  delay_thread_.request_stop();
  delay_thread_.join();
}

void WorkQueue::Add(const Key& key) {
  std::lock_guard lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const Key& key, bool front) {
  if (shutting_down_) {
    return;
  }
  if (processing_.contains(key)) {
    if (front) {
      front_.insert(key);
    }
    if (dirty_.insert(key).second) {
      ++counters_.adds_total;
    }
    return;  // Done() re-queues it; handing it out now would let two workers hold it.
  }
  if (!dirty_.insert(key).second) {
    return;  // queued already: it keeps its place
  }
  ++counters_.adds_total;
  if (front) {
    queue_.push_front(key);
  } else {
    queue_.push_back(key);
  }
  cv_.notify_all();
}

void WorkQueue::AddAfter(const Key& key, std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  if (d.count() <= 0) {
    AddLocked(key);
    return;
  }
  AddAtLocked(key, clock_.Steady() + d);
}

void WorkQueue::AddAtItsPlace(const Key& key, std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  if (d.count() <= 0) {
    AddLocked(key, /*front=*/true);
    return;
  }
  placed_.insert(key);
  AddAtLocked(key, clock_.Steady() + d);
}

void WorkQueue::AddAtLocked(const Key& key, Clock::SteadyTime when) {
  if (shutting_down_) {
    return;
  }
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= when) {
      return;  // earliest wins
    }
    due_.erase({it->second, key});
    it->second = when;
  } else {
    waiting_.emplace(key, when);
  }
  due_.emplace(when, key);
  if (sleeping_until_ && when < *sleeping_until_) {
    sleep_interrupt_.request_stop();
  }
  cv_.notify_all();
}

void WorkQueue::AddRateLimited(const Key& key, std::optional<std::chrono::milliseconds> min_delay,
                               RetryWait wait) {
  std::lock_guard lock(mu_);
  if (shutting_down_) {
    return;
  }
  const int failures = ++failures_[key];
  ++counters_.retries_total;
  std::chrono::milliseconds delay{0};
  if (!min_delay) {
    delay = backoff_.Delay(failures);
  } else if (wait == RetryWait::kAtLeast) {
    delay = std::max(*min_delay, backoff_.Delay(failures));
  } else if (failures <= kHintedFailures) {
    delay = *min_delay;  // what the server (or the scheduled retry) asked for
  } else {
    delay = std::max(*min_delay, backoff_.Delay(failures - kHintedFailures));
  }
  AddAtLocked(key, clock_.Steady() + delay);
}

void WorkQueue::AddContinue(const Key& key) {
  std::lock_guard lock(mu_);
  if (shutting_down_) {
    return;
  }
  const int continues = ++continues_[key];
  if (continues <= kFreeContinues) {
    AddLocked(key);
    return;
  }
  ++counters_.retries_total;
  AddAtLocked(key, clock_.Steady() + backoff_.Delay(continues - kFreeContinues));
}

void WorkQueue::Forget(const Key& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
  continues_.erase(key);
}

int WorkQueue::NumRequeues(const Key& key) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<Clock::SteadyTime> WorkQueue::ReadyAt(const Key& key) const {
  std::lock_guard lock(mu_);
  auto it = waiting_.find(key);
  if (it == waiting_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<WorkQueue::Key> WorkQueue::Get(std::stop_token stop) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, stop, [&] { return shutting_down_ || !queue_.empty(); });
  if (shutting_down_ || queue_.empty()) {
    return std::nullopt;
  }
  Key key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  ++counters_.gets_total;
  return key;
}

void WorkQueue::Done(const Key& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  const bool front = front_.erase(key) > 0;
  if (!shutting_down_ && dirty_.contains(key)) {
    if (front) {
      queue_.push_front(key);
    } else {
      queue_.push_back(key);
    }
  }
  cv_.notify_all();  // wakes Get for the re-queued key and ShutDownWithDrain
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  sleep_interrupt_.request_stop();
  cv_.notify_all();
}

bool WorkQueue::ShutDownWithDrain(std::stop_token stop) {
  ShutDown();
  std::unique_lock lock(mu_);
  return cv_.wait(lock, stop, [&] { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

int WorkQueue::Len() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(queue_.size());
}

WorkQueueStats WorkQueue::Stats() const {
  std::lock_guard lock(mu_);
  WorkQueueStats s = counters_;
  s.depth = static_cast<int64_t>(queue_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.processing = static_cast<int64_t>(processing_.size());
  return s;
}

void WorkQueue::DelayLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested() && !shutting_down_) {
    const Clock::SteadyTime now = clock_.Steady();
    while (!due_.empty() && due_.begin()->first <= now) {
      Key key = due_.begin()->second;
      due_.erase(due_.begin());
      waiting_.erase(key);
      AddLocked(key, /*front=*/placed_.erase(key) > 0);
    }
    if (due_.empty()) {
      cv_.wait(lock, stop, [&] { return shutting_down_ || !due_.empty(); });
      continue;
    }
    // Sleep on the Clock (not the condition variable) so FakeClock drives delays in tests. A
    // fresh stop_source per sleep lets AddAtLocked cut the sleep short for an earlier key; it is
    // installed under mu_ before the sleep starts, so no earlier deadline can slip past.
    const Clock::SteadyTime deadline = due_.begin()->first;
    std::stop_source interrupt;
    sleep_interrupt_ = interrupt;
    sleeping_until_ = deadline;
    lock.unlock();
    {
      std::stop_callback on_stop(stop, [interrupt]() mutable { interrupt.request_stop(); });
      clock_.SleepUntil(deadline, interrupt.get_token());
    }
    lock.lock();
    sleeping_until_.reset();
  }
}

}  // namespace sbx::controller
