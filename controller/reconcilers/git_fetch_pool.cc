#include "controller/reconcilers/git_fetch_pool.h"

#include <algorithm>
#include <utility>

namespace sbx::controller {

GitFetchPool::GitFetchPool(Enqueuer* enqueuer, size_t workers) : enqueuer_(enqueuer) {
  if (enqueuer_ == nullptr) {
    return;  // synchronous
  }
  for (size_t i = 0; i < std::max<size_t>(workers, 1); ++i) {
    threads_.emplace_back([this](std::stop_token stop) { Work(stop); });
  }
}

GitFetchPool::~GitFetchPool() {
  {
    std::lock_guard lock(mu_);
    for (auto& [uid, entry] : entries_) {
      entry->stop.request_stop();
    }
  }
  for (std::jthread& t : threads_) {
    t.request_stop();
  }
  changed_.notify_all();
  threads_.clear();  // joins
}

void GitFetchPool::Start(const api::ObjectKey& key, const std::string& uid, int64_t generation,
                         Job job) {
  if (enqueuer_ == nullptr) {
    GitFetchResult result = job(std::stop_token());
    auto entry = std::make_shared<Entry>();
    entry->key = key;
    entry->uid = uid;
    entry->generation = generation;
    entry->done = true;
    entry->result = std::move(result);
    std::lock_guard lock(mu_);
    entries_[key] = std::move(entry);
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (entries_.count(key) != 0) {
      return;  // queued, running, or its outcome is waiting to be taken
    }
    auto entry = std::make_shared<Entry>();
    entry->key = key;
    entry->uid = uid;
    entry->generation = generation;
    entry->job = std::move(job);
    entries_[key] = std::move(entry);
    queue_.push_back(key);
  }
  changed_.notify_one();
}

GitFetchPool::Outcome GitFetchPool::Take(const api::ObjectKey& key, const std::string& uid,
                                         int64_t generation) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return {};
  }
  Entry& entry = *it->second;
  if (!entry.done) {
    return {State::kPending, std::nullopt};
  }
  Outcome out;
  if (entry.uid == uid && entry.generation == generation) {
    out = {State::kDone, std::move(entry.result), false};
  } else {
    out.stale = true;
  }
  entries_.erase(it);
  return out;
}

void GitFetchPool::Forget(const api::ObjectKey& key) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return;
  }
  std::shared_ptr<Entry> entry = it->second;
  entries_.erase(it);
  queue_.erase(std::remove(queue_.begin(), queue_.end(), key), queue_.end());
  entry->stop.request_stop();
  // A running fetch writes into the cache the caller is about to remove: wait for its end.
  changed_.wait(lock, [&] { return !entry->running; });
}

size_t GitFetchPool::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t GitFetchPool::running() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [uid, entry] : entries_) {
    n += entry->running ? 1 : 0;
  }
  return n;
}

void GitFetchPool::Work(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (true) {
    changed_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (stop.stop_requested()) {
      return;
    }
    const api::ObjectKey key = queue_.front();
    queue_.pop_front();
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      continue;
    }
    std::shared_ptr<Entry> entry = it->second;
    entry->running = true;
    Job job = std::move(entry->job);
    const std::stop_token job_stop = entry->stop.get_token();
    lock.unlock();
    GitFetchResult result = job(job_stop);
    lock.lock();
    entry->running = false;
    entry->done = true;
    entry->result = std::move(result);
    const bool wake = !job_stop.stop_requested();
    changed_.notify_all();  // Forget waits for the end of a running fetch
    if (wake) {
      lock.unlock();
      enqueuer_->Enqueue(key);  // the GitSource takes the outcome now, not at its next requeue
      lock.lock();
    }
  }
}

}  // namespace sbx::controller
