// Copying a whole store into another one, for `sbxctl migrate` (issue #17): moving an
// installation from SQLite to PostgreSQL (or back) with every object's identity kept — uid,
// resourceVersion, generation, timestamps, finalizers, deletionTimestamp, applyset — and the
// inventory of external resources (without it garbage collection would be unsafe), the events,
// the AgentTask logs and artifacts (keyed by task uid, hence the kept uids), the usage ledger,
// the audit log, and the notifications not yet delivered (their webhook ids and attempts kept, so
// a receiver still deduplicates) with each Notifier's count of dropped ones. Leases and the change
// log are not copied: the destination's revision ends above every copied resourceVersion with an
// empty change log, so a watcher re-lists and compare-and-swap keeps working.
//
// The backend-neutral part lives here: StoreSink (what Store::ExportTo hands records to and
// Store::ImportFrom writes from), and CopyStore, which checks the source's lease, exports the
// source straight into the destination's one import transaction, and counts what it copied.
// How ExportTo and ImportFrom read and write the tables is internal/store_copier.h, one template
// for both backends; sqlite_store_copy.cc and postgres_store_copy.cc hold their transactions.
//
// Thread-safety: CopyStore is a free function; the stores it is given are as thread-safe as
// their types say. A sink is used by one thread, for the duration of one export or import.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller {

// One object as the store keeps it: the API object with all its metadata, plus what only the
// store knows.
struct StoredObject {
  Object object;
  std::string applyset;          // "" when in no applyset (ApplyOptions::applyset)
  std::string update_timestamp;  // RFC 3339, the last write of the row
};

// One task's whole log, as ReadTaskLog(uid) would show it.
struct StoredTaskLog {
  ObjectKey task;
  std::string task_uid;
  int64_t last_seq = 0;
  int64_t dropped = 0;
  std::vector<Store::TaskLogEntry> entries;  // ascending seq, with their seq and `at` kept
};

// Receives a store's records. Store::ExportTo calls Revision once, first; then the objects, the
// inventory, the events (oldest first), the task logs, the usage records, the audit records
// (oldest first, ids and times kept), the pending notifications (oldest first), the Notifiers'
// counts of dropped notifications and the artifacts (one at a time, with their content). Any error
// stops the export and is returned by ExportTo.
class StoreSink {
 public:
  virtual ~StoreSink() = default;
  virtual Status Revision(int64_t revision) = 0;
  virtual Status PutObject(const StoredObject& object) = 0;
  virtual Status PutInventory(const Store::InventoryRecord& record) = 0;
  virtual Status PutEvent(const Store::Event& event) = 0;
  virtual Status PutTaskLog(const StoredTaskLog& log) = 0;
  virtual Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                             const Store::Artifact& artifact) = 0;
  virtual Status PutUsage(const Store::UsageRecord& record) = 0;
  virtual Status PutAudit(const Store::AuditRecord& record) = 0;
  virtual Status PutNotification(const Store::Notification& notification) = 0;
  // How many notifications of the Notifier with this uid the bound has dropped (status.dropped).
  virtual Status PutNotificationDrops(const std::string& notifier_uid, int64_t dropped) = 0;
};

// What a copy copied.
struct CopyCounts {
  int64_t objects = 0;
  int64_t inventory = 0;
  int64_t events = 0;
  int64_t task_logs = 0;
  int64_t task_log_lines = 0;
  int64_t artifacts = 0;
  int64_t usage_records = 0;
  int64_t audit_records = 0;
  int64_t notifications = 0;  // pending
  int64_t revision = 0;       // the source's revision
};

// "120 objects, 80 inventory records, 340 events, 12 task logs (4,100 lines), 3 artifacts" and,
// when there are some, ", 50 usage records", ", 7 audit records" and ", 2 pending notifications".
std::string FormatCopyCounts(const CopyCounts& counts);

struct CopyOptions {
  // The whole copy, rolled back at the end instead of committed: checks everything a real copy
  // checks (the lease, an empty destination, every record's insert) and writes nothing.
  bool dry_run = false;
  // Copy although an sbxd holds the source's lease: a running controller keeps writing to the
  // source, and what it writes after the copy is lost.
  bool ignore_lease = false;
};

// Refuses (kFailedPrecondition naming the holder and when the lease expires) if any lease of
// the source (the leader's, a replica's member or workspace lease) is held and not expired at
// clock.Now(), unless options.ignore_lease.
Status CheckSourceLease(Store& from, const CopyOptions& options, const Clock& clock);

// Counts what `from` holds (an export into a counting sink); writes nothing.
StatusOr<CopyCounts> CountStore(Store& from);

// CheckSourceLease, then copies everything `from` holds into `to` in one transaction of `to`
// (Store::ImportFrom): on any error (and with options.dry_run) `to` is left as it was. `from` is
// only read. kInvalidArgument if `from` and `to` are one object; errors of the stores as they
// come (kFailedPrecondition when `to` is not empty, naming what it holds).
StatusOr<CopyCounts> CopyStore(Store& from, Store& to, const CopyOptions& options,
                               const Clock& clock);

// ---- for ImportFrom implementations ----------------------------------------------------------

// kFailedPrecondition naming `database` and what it holds, unless `held` (counted in the import
// transaction) is all zero: an import never merges into existing state.
Status CheckEmptyForImport(std::string_view database, const CopyCounts& held);
// kInvalidArgument naming the object if it lacks what its identity needs (uid, a positive
// resourceVersion and generation, creationTimestamp).
Status CheckImportedObject(std::string_view database, const StoredObject& object);
// kInvalidArgument naming `what` unless the namespace and name of `key` are DNS labels. Every
// record CopyStore and CountStore pass through is checked, so a migrate refuses a source with
// a name like "../../etc/x" (#24).
Status CheckImportedKey(const ObjectKey& key, std::string_view what);
// kInvalidArgument unless `artifact.bytes` is the size of its content.
Status CheckImportedArtifact(const ObjectKey& task, const Store::Artifact& artifact);

}  // namespace sbx::controller
