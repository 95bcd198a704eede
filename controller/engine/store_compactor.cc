#include "controller/engine/store_compactor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace sbx::controller {

StoreCompactor::StoreCompactor(Store& store, Clock& clock, Options options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  if (options_.interval.count() <= 0 || options_.event_ttl.count() <= 0) {
    std::fprintf(stderr, "StoreCompactor: need interval > 0 and event_ttl > 0\n");
    std::abort();
  }
}

StatusOr<StoreCompactor::Round> StoreCompactor::CompactOnce() {
  Round round;
  ASSIGN_OR_RETURN(round.events_deleted, store_.ExpireEvents(clock_.Now() - options_.event_ttl));
  if (options_.audit_retention.count() > 0) {
    StatusOr<int64_t> expired = store_.ExpireAudit(clock_.Now() - options_.audit_retention);
    if (!expired.ok() && expired.status().code() != api::StatusCode::kUnimplemented) {
      return expired.status();
    }
    round.audit_deleted = expired.ok() ? *expired : 0;
  }
  // Read before compacting: next round's target must be a revision every watcher has had a
  // whole interval to read past.
  ASSIGN_OR_RETURN(const int64_t current, store_.CurrentRevision());
  std::optional<int64_t> target = previous_;
  if (target && options_.watermark) {
    const int64_t watermark = options_.watermark();
    target = watermark < 0 ? std::nullopt : std::optional(std::min(*target, watermark));
  }
  if (target) {
    ASSIGN_OR_RETURN(round.changes_deleted, store_.CompactChanges(*target));
    round.compacted_to = target;
  }
  previous_ = current;
  return round;
}

void StoreCompactor::Run(std::stop_token stop,
                         const std::function<void(const StatusOr<Round>&)>& report) {
  do {
    StatusOr<Round> round = CompactOnce();
    if (report) {
      report(round);
    }
  } while (clock_.SleepFor(options_.interval, stop));
}

}  // namespace sbx::controller
