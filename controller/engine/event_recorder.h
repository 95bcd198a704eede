// EventRecorder: writes Kubernetes-style events about objects into the store, where
// `sbxctl describe` and `sbxctl events` read them. The store deduplicates repeats (count and
// last-seen). Recording is best effort: a failure is logged by the caller's return value only,
// never fails a reconcile. Thread-safe; Store and Clock must outlive it.
#pragma once

#include <string>

#include "api/resources.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

class EventRecorder {
 public:
  EventRecorder(Store& store, Clock& clock) : store_(store), clock_(clock) {}

  void Normal(const api::ObjectKey& involved, std::string reason, std::string message) {
    Record(involved, "Normal", std::move(reason), std::move(message));
  }
  void Warning(const api::ObjectKey& involved, std::string reason, std::string message) {
    Record(involved, "Warning", std::move(reason), std::move(message));
  }

 private:
  void Record(const api::ObjectKey& involved, std::string type, std::string reason,
              std::string message) {
    Store::Event e;
    e.involved = involved;
    e.type = std::move(type);
    e.reason = std::move(reason);
    e.message = std::move(message);
    e.first_seen = e.last_seen = FormatRfc3339(clock_.Now());
    (void)store_.RecordEvent(e);  // best effort: an event is never worth failing a reconcile
  }

  Store& store_;
  Clock& clock_;
};

}  // namespace sbx::controller
