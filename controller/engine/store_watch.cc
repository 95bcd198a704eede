#include "controller/engine/store_watch.h"

#include <algorithm>
#include <set>
#include <utility>

namespace sbx::controller {

api::Status EnqueueAllObjects(Store& store, Enqueuer& out) {
  ASSIGN_OR_RETURN(std::vector<api::Object> objects, store.List(ListOptions{}));
  for (const api::Object& object : objects) {
    out.Enqueue(api::KeyOf(object));
  }
  return api::OkStatus();
}

StoreWatch::StoreWatch(Store& store, Clock& clock, StoreWatchOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      backoff_(options_.error_backoff) {}

bool StoreWatch::BackOff(const api::Status& error, int& failures, std::stop_token stop) {
  if (options_.on_error) {
    options_.on_error(name(), error);
  }
  ++failures;
  return clock_.SleepFor(backoff_.Delay(failures), stop);
}

void StoreWatch::Dispatch(const Store::Change& change, Enqueuer& out) {
  if (change.type == Store::ChangeType::kDeleted || !change.object) {
    seen_.erase(change.key);
    out.Enqueue(change.key);
    return;
  }
  api::ObjectMeta meta = change.object->metadata;
  meta.resource_version = 0;
  auto [it, inserted] = seen_.try_emplace(change.key, meta);
  if (change.wake_hint) {
    if (options_.wake_hints != nullptr) {
      options_.wake_hints->Mark(change.key);
    }
    it->second = std::move(meta);
    out.Enqueue(change.key);
    return;
  }
  if (!inserted && it->second == meta) {
    out.EnqueueDependents(change.key);  // the status alone changed
    return;
  }
  it->second = std::move(meta);
  out.Enqueue(change.key);
}

std::optional<int64_t> StoreWatch::ListAndDispatch(Enqueuer& out, std::stop_token stop,
                                                   std::string_view what) {
  int failures = 0;
  while (!stop.stop_requested()) {
    // The revision is read BEFORE listing, so a write racing with the list is seen again by the
    // watch rather than lost.
    StatusOr<int64_t> revision = store_.CurrentRevision();
    StatusOr<std::vector<api::Object>> objects =
        revision.ok() ? store_.List(ListOptions{}) : revision.status();
    if (objects.ok()) {
      std::set<api::ObjectKey> listed;
      for (const api::Object& object : *objects) {
        listed.insert(api::KeyOf(object));
        Dispatch(
            Store::Change{
                .type = Store::ChangeType::kAdded, .key = api::KeyOf(object), .object = object},
            out);
      }
      // Seen before and not listed now: deleted while the watch could not see it (a re-list
      // after compaction). Its reconciler still has to hear of it, as from a kDeleted change.
      std::vector<api::ObjectKey> gone;
      for (const auto& [key, meta] : seen_) {
        if (!listed.contains(key)) {
          gone.push_back(key);
        }
      }
      for (const api::ObjectKey& key : gone) {
        Dispatch(Store::Change{.type = Store::ChangeType::kDeleted, .key = key, .object = {}}, out);
      }
      last_revision_.store(*revision);
      return *revision;
    }
    if (!BackOff(objects.status().Annotate(what), failures, stop)) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void StoreWatch::Run(Enqueuer& out, std::stop_token stop) {
  std::optional<int64_t> since = ListAndDispatch(out, stop, "initial list");
  int failures = 0;
  while (since && !stop.stop_requested()) {
    StatusOr<std::vector<Store::Change>> changes = store_.WatchSince(*since, options_.batch);
    if (!changes.ok() && changes.status().code() == api::StatusCode::kOutOfRange) {
      // The changes after `since` were compacted: what happened to which object is unknown, so
      // start over from a list (client-go's re-list after "410 Gone").
      if (options_.on_error) {
        options_.on_error(name(), changes.status().Annotate("watch fell behind; re-listing"));
      }
      relists_.fetch_add(1);
      since = ListAndDispatch(out, stop, "re-list");
      failures = 0;
      continue;
    }
    if (!changes.ok()) {
      if (!BackOff(changes.status().Annotate("watch"), failures, stop)) {
        return;
      }
      continue;
    }
    failures = 0;
    for (const Store::Change& change : *changes) {
      Dispatch(change, out);
      since = std::max(*since, change.revision);
    }
    last_revision_.store(*since);
    if (static_cast<int>(changes->size()) >= options_.batch) {
      continue;  // more may be waiting: read on before sleeping
    }
    store_.WaitForChange(options_.poll);
  }
}

}  // namespace sbx::controller
