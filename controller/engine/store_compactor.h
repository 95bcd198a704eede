// StoreCompactor: keeps the store's change log and events bounded (issue #12), run by the leader
// sbxd only.
//
// Change log, the Kubernetes way: each round reads the current revision and compacts the log to
// the revision the PREVIOUS round read (as the Kubernetes API server compacts etcd every 5
// minutes to the revision of 5 minutes ago). Every watcher therefore has at least one interval
// to read a change; one that is slower (a suspended `sbxctl get -w`, a standby that was paused)
// gets kOutOfRange from WatchSince and re-lists — nothing is lost silently. There is no watcher
// registry to keep alive across processes. Compaction also never goes past `watermark()`, the
// position of this process's own StoreWatch, so sbxd itself never has to re-list because of its
// own compactor. Events: each round deletes the events last seen more than `event_ttl` ago (the
// per-object count bound is kept by the store at every RecordEvent). Audit records (DESIGN §8.3):
// each round deletes those older than `audit_retention` (sbxd --audit-retention, 90 days).
//
// So after a round the change log holds the writes of at most the last interval (plus whatever
// this process's watch has not read yet): for 100 objects whose status changes every 30 s and
// the default 5-minute interval, at most 1,000 rows (2,000 just before the next round).
//
// Thread-safety: CompactOnce and Run from one thread at a time. Ownership: the Store and Clock
// must outlive the compactor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct StoreCompactorOptions {
  // Time between rounds, and so the least time a change stays readable in the log.
  std::chrono::milliseconds interval{std::chrono::minutes(5)};
  // Events last seen longer ago than this are deleted (Kubernetes' default event TTL).
  std::chrono::milliseconds event_ttl{std::chrono::hours(1)};
  // Audit records older than this are deleted (Store::ExpireAudit). 0: kept forever.
  std::chrono::milliseconds audit_retention{std::chrono::hours(24 * 90)};
  // The lowest revision a watcher of this process still needs to read after (its last read
  // revision); compaction never goes past it. Negative: the watcher has not listed yet, so the
  // log is not compacted this round. Optional.
  std::function<int64_t()> watermark;
};

class StoreCompactor {
 public:
  using Options = StoreCompactorOptions;

  struct Round {
    std::optional<int64_t> compacted_to;  // unset when the log was left alone this round
    int64_t changes_deleted = 0;
    int64_t events_deleted = 0;
    int64_t audit_deleted = 0;
  };

  // Aborts (a bug) unless interval > 0 and event_ttl > 0.
  StoreCompactor(Store& store, Clock& clock, Options options = {});

  // One round: expires old events and audit records (a store without an audit log is skipped),
  // compacts the log to the revision the previous round read
  // (capped by the watermark; nothing on the first round), and reads the revision for the next
  // round. Store errors are returned; the next round simply tries again.
  StatusOr<Round> CompactOnce();

  // A round now and then every interval until `stop`; each round's result goes to `report`
  // (optional; for the log).
  void Run(std::stop_token stop, const std::function<void(const StatusOr<Round>&)>& report);

 private:
  Store& store_;
  Clock& clock_;
  const Options options_;
  std::optional<int64_t> previous_;  // revision read by the previous round; owned by its thread
};

}  // namespace sbx::controller
