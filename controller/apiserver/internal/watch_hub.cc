#include "controller/apiserver/internal/watch_hub.h"

#include <algorithm>
#include <utility>

namespace sbx::controller::apiserver_internal {

using Change = Store::Change;

api::Status WatchHub::Start() {
  ASSIGN_OR_RETURN(const int64_t current, store_.CurrentRevision());
  {
    std::lock_guard lock(mu_);
    floor_ = current;
    last_ = current;
  }
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  return api::OkStatus();
}

void WatchHub::Stop() {
  stopping_ = true;
  thread_.request_stop();
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  cv_.notify_all();
}

int64_t WatchHub::last() {
  std::lock_guard lock(mu_);
  return last_;
}

api::StatusOr<std::vector<Change>> WatchHub::Next(int64_t since, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (since < floor_) {
    lock.unlock();
    return catchup_store_ ? catchup_store_->WatchSince(since, kHubBatch)
                          : store_.WatchSince(since, kHubBatch);
  }
  cv_.wait_for(lock, wait, [&] { return stopping_.load() || last_ > since; });
  std::vector<Change> out;
  // The ring is in revision order: skip to the first change after `since`.
  auto it = std::upper_bound(ring_.begin(), ring_.end(), since,
                             [](int64_t rev, const Change& c) { return rev < c.revision; });
  for (; it != ring_.end() && out.size() < static_cast<size_t>(kHubBatch); ++it) {
    out.push_back(*it);
  }
  return out;
}

void WatchHub::Run(std::stop_token stop) {
  int idle = 0;
  while (!stop.stop_requested()) {
    const bool changed = store_.WaitForChange(kHubPoll);
    if (!changed && ++idle < 10) {
      continue;  // still read every ~2 s, in case a change notice was missed
    }
    idle = 0;
    for (;;) {
      int64_t from = 0;
      {
        std::lock_guard lock(mu_);
        from = last_;
      }
      auto changes = store_.WatchSince(from, kHubBatch);
      if (!changes.ok()) {
        if (changes.status().code() == api::StatusCode::kOutOfRange) {
          // Compacted past the hub (it fell far behind): start over from now; watchers
          // behind the new floor get their 410 from the store.
          auto current = store_.CurrentRevision();
          std::lock_guard lock(mu_);
          if (current.ok()) {
            ring_.clear();
            floor_ = *current;
            last_ = *current;
          }
        }
        break;
      }
      if (changes->empty()) {
        break;
      }
      {
        std::lock_guard lock(mu_);
        for (Change& c : *changes) {
          last_ = std::max(last_, c.revision);
          ring_.push_back(std::move(c));
        }
        while (ring_.size() > kMaxRing) {
          floor_ = ring_.front().revision;
          ring_.pop_front();
        }
      }
      cv_.notify_all();
      if (changes->size() < static_cast<size_t>(kHubBatch)) {
        break;
      }
    }
  }
}

}  // namespace sbx::controller::apiserver_internal
