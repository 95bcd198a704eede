#include "controller/reconcilers/input_submitter.h"

#include <utility>

namespace sbx::controller {

InputSubmitter::~InputSubmitter() {
  std::map<std::string, std::unique_ptr<Entry>> entries;
  {
    std::lock_guard lock(mu_);
    entries.swap(entries_);
  }
  for (auto& [uid, entry] : entries) {
    entry->thread.request_stop();
  }
  // Each thread takes mu_ once more to record its outcome in its own entry, which is kept alive
  // here until it is joined.
  entries.clear();
}

void InputSubmitter::Start(const api::ObjectKey& key, const std::string& uid, Post post) {
  if (enqueuer_ == nullptr) {
    api::Status status = post(std::stop_token());
    std::lock_guard lock(mu_);
    auto entry = std::make_unique<Entry>();
    entry->done = true;
    entry->status = std::move(status);
    entries_[uid] = std::move(entry);
    return;
  }
  std::lock_guard lock(mu_);
  ReapLocked();
  if (entries_.count(uid) != 0) {
    return;  // in flight, or its outcome is waiting to be taken
  }
  auto owned = std::make_unique<Entry>();
  Entry* entry = owned.get();
  entries_[uid] = std::move(owned);
  entry->thread = std::jthread([this, entry, key, post = std::move(post)](std::stop_token stop) {
    api::Status status = post(stop);
    {
      std::lock_guard inner(mu_);
      entry->status = std::move(status);
      entry->done = true;
    }
    if (!stop.stop_requested()) {
      enqueuer_->Enqueue(key);  // the task reads the outcome now, not at its next requeue
    }
  });
}

InputSubmitter::Outcome InputSubmitter::Take(const std::string& uid) {
  std::lock_guard lock(mu_);
  ReapLocked();
  auto it = entries_.find(uid);
  if (it == entries_.end()) {
    return {};
  }
  if (!it->second->done) {
    return {State::kInFlight, api::OkStatus()};
  }
  Outcome out{State::kDone, std::move(it->second->status)};
  entries_.erase(it);  // joins a finished thread
  return out;
}

void InputSubmitter::Forget(const std::string& uid) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(uid); it != entries_.end()) {
    it->second->forgotten = true;
  }
  ReapLocked();
}

void InputSubmitter::Cancel(const std::string& uid) {
  std::unique_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(uid);
    if (it == entries_.end()) {
      return;
    }
    entry = std::move(it->second);
    entries_.erase(it);
  }
  // Outside mu_: the POST's thread takes it once more to record its (dropped) outcome in its
  // entry, which stays alive here until the join.
  entry->thread.request_stop();
  if (entry->thread.joinable()) {
    entry->thread.join();
  }
}

int InputSubmitter::in_flight() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [uid, entry] : entries_) {
    n += entry->done ? 0 : 1;
  }
  return n;
}

void InputSubmitter::ReapLocked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second->done && it->second->forgotten) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace sbx::controller
