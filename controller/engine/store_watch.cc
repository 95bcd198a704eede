#include "controller/engine/store_watch.h"

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
  if (!inserted && it->second == meta) {
    out.EnqueueDependents(change.key);  // the status alone changed
    return;
  }
  it->second = std::move(meta);
  out.Enqueue(change.key);
}

void StoreWatch::Run(Enqueuer& out, std::stop_token stop) {
  int failures = 0;
  int64_t since = 0;
  // Initial list. The revision is read BEFORE listing, so a write racing with the list is seen
  // again by the watch rather than lost.
  while (!stop.stop_requested()) {
    StatusOr<int64_t> revision = store_.CurrentRevision();
    api::Status status = revision.status();
    if (status.ok()) {
      StatusOr<std::vector<api::Object>> objects = store_.List(ListOptions{});
      status = objects.status();
      for (const api::Object& object : objects.ok() ? *objects : std::vector<api::Object>{}) {
        Dispatch(
            Store::Change{
                .type = Store::ChangeType::kAdded, .key = api::KeyOf(object), .object = object},
            out);
      }
    }
    if (status.ok()) {
      since = *revision;
      last_revision_.store(since);
      failures = 0;
      break;
    }
    if (!BackOff(status.Annotate("initial list"), failures, stop)) {
      return;
    }
  }
  while (!stop.stop_requested()) {
    StatusOr<std::vector<Store::Change>> changes = store_.WatchSince(since, options_.batch);
    if (!changes.ok()) {
      if (!BackOff(changes.status().Annotate("watch"), failures, stop)) {
        return;
      }
      continue;
    }
    failures = 0;
    for (const Store::Change& change : *changes) {
      Dispatch(change, out);
      since = std::max(since, change.revision);
    }
    last_revision_.store(since);
    if (static_cast<int>(changes->size()) >= options_.batch) {
      continue;  // more may be waiting: read on before sleeping
    }
    store_.WaitForChange(options_.poll);
  }
}

}  // namespace sbx::controller
