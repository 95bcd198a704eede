// Store: the source of truth for desired state, shared by sbxctl and sbxd (DESIGN §3).
//
// One SQLite file in WAL mode (SqliteStore, the default) or a PostgreSQL database (PostgresStore,
// `--db postgres://…`; OpenStore picks one); sbxctl writes spec/metadata, the controller writes
// status only. Every object write bumps one global, monotonic revision; an object's
// resourceVersion is the revision of its last write. Events, inventory and leases are not
// object writes and bump no revision (a lease renewal must not wake every watcher). Neither the
// change log nor the events grow forever: CompactChanges trims the log (a watcher behind the
// compaction point gets kOutOfRange and re-lists), ExpireEvents drops old events, and each object
// keeps a bounded number of events. Implementations are safe to use from several threads and
// several processes at once (each write is one transaction; a busy or unreachable database gives
// kUnavailable naming the database, never its password).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "api/usage.h"

namespace sbx::controller {

using api::Object;
using api::ObjectKey;
using api::Status;
using api::StatusOr;

// ---- objects --------------------------------------------------------------------------------

// Who makes a write, for the audit log (DESIGN §8.3): set by the surfaces people write through
// (the API server, sbxctl on a local store, a GitSource's apply); unset for the controller's own
// bookkeeping writes, which are not audited.
struct WriteAudit {
  std::string actor;   // the API token's name, "user@host" for the local CLI, "sbxd" for GitOps
  std::string role;    // "admin" | "editor" | "viewer" (API), "local" (CLI), "gitops"
  std::string verb;    // what the caller did: "apply", "delete", "edit", "label", "cancel", …
  std::string source;  // "api" | "cli" | "gitsource/<namespace>/<name>"
  // Also record a write that failed (after its rollback). Off for GitOps, which retries the
  // same failing apply every interval and reports it in the GitSource's status.
  bool record_failures = true;
};

struct ApplyOptions {
  bool dry_run = false;  // compute the result, write nothing
  std::string applyset;  // when set, record membership of every applied object in this set
  bool prune = false;    // with applyset: delete members of the set not in this apply
  // Pruning with no objects deletes every member of the set; refused unless this is set.
  bool prune_allow_empty = false;
  // Compare-and-swap, for read-modify-write clients (sbxctl edit, label, annotate, patch):
  // every object must still be stored with the resourceVersion in its metadata. Otherwise
  // nothing is written: kAborted if it changed since, kNotFound if it is gone.
  bool require_resource_version = false;
  // When set, every object the apply creates, configures or prunes gets one audit record in the
  // apply's transaction (an unchanged object gets none); a failed apply gets one record per
  // object with the error's code as its result, written after the rollback (unless
  // WriteAudit::record_failures is off). Not for dry runs.
  std::optional<WriteAudit> audit;
};

struct DeleteOptions {
  // As ApplyOptions::audit, for the deleted object.
  std::optional<WriteAudit> audit;
};

enum class ApplyAction { kCreated, kConfigured, kUnchanged, kPruned };

struct ApplyResult {
  ObjectKey key;
  ApplyAction action = ApplyAction::kUnchanged;
  Object object;  // as stored after the apply (or as it would be, with dry_run)
};

struct ListOptions {
  std::optional<api::Kind> kind;                      // all kinds when unset
  std::optional<std::string> namespace_;              // all namespaces when unset
  std::map<std::string, std::string> label_selector;  // equality on every pair
  // Leaves out the objects whose work is over (api::HasFinished: a finished AgentTask). The SQL
  // stores keep an index of the rest, so a List of the live tasks costs what they are, not every
  // task the namespace ever ran.
  bool unfinished_only = false;
};

enum class DeleteOutcome { kDeleted, kMarkedForDeletion, kAlreadyDeleting };

// The most a task's collected artifacts may hold in total (DESIGN §7.1).
inline constexpr int64_t kMaxTaskArtifactBytes = api::kMaxCollectBytes;

class StoreSink;  // store_copy.h

class Store {
 public:
  virtual ~Store() = default;

  // Creates or updates spec, labels and annotations of `objects` in ONE transaction: all or
  // nothing. `generation` increases only if the spec changed semantically (after defaulting);
  // re-applying an identical manifest writes nothing and bumps no revision. Server-set metadata
  // in `objects` is ignored. Objects must be defaulted and validated by the caller.
  // kInvalidArgument if the same key appears twice; kFailedPrecondition if an object is being
  // deleted, or for a prune with no objects unless options.prune_allow_empty; kAborted /
  // kNotFound with options.require_resource_version (see there).
  virtual StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                                   const ApplyOptions& options) = 0;

  // kNotFound if absent.
  virtual StatusOr<Object> Get(const ObjectKey& key) = 0;
  // Sorted by kind, namespace, name.
  virtual StatusOr<std::vector<Object>> List(const ListOptions& options) = 0;

  // Replaces status of the object iff its resourceVersion still equals
  // `object.metadata.resource_version` (compare-and-swap). Returns the stored object with its
  // new resourceVersion. kAborted on a conflict, kNotFound if gone. Spec is not touched.
  virtual StatusOr<Object> UpdateStatus(const Object& object) = 0;

  // Replaces finalizers and ownerReferences (controller-owned metadata), CAS as UpdateStatus.
  // Removing the last finalizer of an object that is being deleted removes the row.
  virtual StatusOr<Object> UpdateControllerMetadata(const Object& object) = 0;

  // Objects with finalizers get deletionTimestamp set (generation unchanged); others are removed
  // at once. kNotFound if absent.
  virtual StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) = 0;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key) { return Delete(key, DeleteOptions{}); }

  // ---- watch --------------------------------------------------------------------------------

  enum class ChangeType { kAdded, kModified, kDeleted };
  struct Change {
    int64_t revision = 0;
    ChangeType type = ChangeType::kModified;
    ObjectKey key;
    std::optional<Object> object;  // the object after the change; unset for kDeleted
    // PostWakeHint's change: the object did not change (only its resourceVersion), but whoever
    // acts on it should look at the outside world now (WakeHints). Not carried by the API's
    // watch: a client there sees a MODIFIED with a new resourceVersion.
    bool wake_hint = false;
  };

  // Every change with revision > `since`, in revision order, each exactly once; also changes
  // made by other processes. At most `limit` changes. kOutOfRange ("resourceVersion too old")
  // when changes after `since` have been compacted away: the caller cannot know what it missed
  // and must list again, then watch from the revision it read before listing.
  virtual StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) = 0;
  // A wake hint for `key` that every process watching this store sees at once: one object write
  // that changes only the resourceVersion, logged as a kModified change with wake_hint set (and,
  // on PostgreSQL, NOTIFY). For a replica that received a webhook for an object whose workspace
  // another replica holds (--work-split workspace): the holder's StoreWatch marks its WakeHints
  // and enqueues the key. A concurrent CAS write of the object gets kAborted and retries. The
  // object as it now is; kNotFound if absent.
  virtual StatusOr<Object> PostWakeHint(const ObjectKey& key) = 0;
  // Highest revision written so far (0 for a new store).
  virtual StatusOr<int64_t> CurrentRevision() = 0;
  // Blocks until the database may have changed (any process) or `timeout` passes; cheap
  // (SQLite: PRAGMA data_version; PostgreSQL: LISTEN/NOTIFY). Returns true if a change may have
  // happened.
  virtual bool WaitForChange(std::chrono::milliseconds timeout) = 0;
  // Compaction, the Kubernetes way (etcd compaction + "410 Gone"): deletes every change with
  // revision <= `revision` (clamped to the current revision) from the change log, so that the
  // log does not grow forever. There is no registry of watchers: a watcher that is still behind
  // the compacted revision gets kOutOfRange from WatchSince and re-lists. Callers choose
  // `revision` so that live watchers are not behind it (sbxd compacts to the revision it saw
  // one compaction interval ago, and never past its own watch). Compacting to a revision at or
  // below the current compaction point deletes nothing. Returns the number of changes deleted.
  virtual StatusOr<int64_t> CompactChanges(int64_t revision) = 0;

  // ---- events -------------------------------------------------------------------------------

  struct Event {
    ObjectKey involved;
    std::string type = "Normal";  // "Normal" | "Warning"
    std::string reason;           // CamelCase
    std::string message;
    int64_t count = 1;
    std::string first_seen;  // RFC 3339
    std::string last_seen;   // RFC 3339
  };
  // Deduplicated on (involved, type, reason, message): a repeat bumps count and last_seen.
  virtual Status RecordEvent(const Event& event) = 0;
  // Oldest first. With `involved`, only that object's events.
  virtual StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>& involved) = 0;
  // Deletes every event last seen before `cutoff` (Kubernetes' event TTL). Returns the number
  // deleted. (The newest-N-per-object bound is kept by RecordEvent itself.)
  virtual StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point cutoff) = 0;

  // ---- inventory of external resources ------------------------------------------------------

  // kAbandoned: sbx gave up deleting the resource (e.g. a session the API refuses to delete);
  // the row stays as a record for the operator (`sbxctl get abandoned`) and nothing acts on it
  // any more — no garbage collection, no adoption, no retry.
  enum class InventoryState { kIntent, kLive, kDeleting, kAbandoned };
  struct InventoryRecord {
    std::string workspace;      // Workspace name the resource lives in
    std::string resource_type;  // "sandbox" | "session"
    std::string external_id;    // sandbox_id or session id
    InventoryState state = InventoryState::kIntent;
    ObjectKey owner;  // the object that wanted it
    std::string owner_uid;
    std::string created_at;  // RFC 3339
    std::string updated_at;  // RFC 3339
  };
  // Inserts or replaces by (workspace, resource_type, external_id).
  virtual Status PutInventory(const InventoryRecord& record) = 0;
  virtual StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string& workspace,
                                                                const std::string& resource_type,
                                                                const std::string& external_id) = 0;
  virtual StatusOr<std::vector<InventoryRecord>> ListInventory(
      const std::optional<std::string>& workspace) = 0;
  // Removing an absent record is OK.
  virtual Status DeleteInventory(const std::string& workspace, const std::string& resource_type,
                                 const std::string& external_id) = 0;

  // ---- leases (the leader lease, per-workspace leases, replica membership) -------------------

  // Takes or renews lease `name` for `holder` if it is free, expired, released, or already held
  // by `holder`. Returns the lease's fencing token when `holder` holds it afterwards, nullopt
  // when someone else does. The token is the same across renewals and grows by one each time a
  // holder takes the lease anew (also the same holder after its lease expired), so a token names
  // one tenure: whoever acts under a token older than the lease's current one has lost it.
  virtual StatusOr<std::optional<int64_t>> AcquireLease(const std::string& name,
                                                        const std::string& holder,
                                                        std::chrono::milliseconds ttl) = 0;
  // AcquireLease, answering only whether `holder` holds the lease.
  StatusOr<bool> TryAcquireLease(const std::string& name, const std::string& holder,
                                 std::chrono::milliseconds ttl) {
    ASSIGN_OR_RETURN(std::optional<int64_t> token, AcquireLease(name, holder, ttl));
    return token.has_value();
  }
  // Gives the lease up if `holder` holds it. The row stays (holder empty, expired), so the next
  // holder's token is still greater than every earlier one.
  virtual Status ReleaseLease(const std::string& name, const std::string& holder) = 0;

  struct Lease {
    std::string name;
    std::string holder;
    std::string renewed_at;  // RFC 3339
    std::chrono::system_clock::time_point expires_at;
    int64_t token = 0;  // the fencing token (AcquireLease)
  };
  // Lease `name` as last written, expired or not (nullopt when nobody holds or held it since
  // its last release): for naming the holder in an error message, and for a fencing check.
  virtual StatusOr<std::optional<Lease>> GetLease(const std::string& name) = 0;
  // Every lease whose name starts with `prefix` and that somebody holds or held since its last
  // release, expired or not, by name.
  virtual StatusOr<std::vector<Lease>> ListLeases(const std::string& prefix) = 0;

  // ---- AgentTask log and artifacts (DESIGN §7.1) ---------------------------------------------
  // Both are keyed by the task's uid (a task deleted and created again under the same name
  // starts empty) and are deleted with the object's row. Neither bumps a revision: a log line
  // wakes no watcher (followers poll ReadTaskLog with `after_seq`, or WaitForChange).

  // What one log entry is. Deltas are the pieces of a streamed text; the others are whole.
  enum class TaskLogKind {
    kAssistantDelta,  // a piece of assistant text as it streams (output_text.delta)
    kAssistant,       // a whole assistant message (its item done; also rebuilt on recovery)
    kCommand,         // a command line the agent runs ("$ echo hi")
    kOutputDelta,     // a piece of a command's output as it streams
    kCommandResult,   // a command finished: its full output (bounded) and exit code
    kStatus,          // sbx's own line: submitted, waiting for the executor, the outcome, …
  };
  struct TaskLogEntry {
    int64_t seq = 0;  // 1, 2, … per task in append order; assigned by AppendTaskLog
    TaskLogKind kind = TaskLogKind::kStatus;
    std::string item_id;               // the service's item id, "" for kStatus
    std::string text;                  // the text, delta or line
    std::optional<int64_t> exit_code;  // kCommandResult
    std::string at;                    // RFC 3339, assigned by AppendTaskLog
  };
  struct TaskLogPage {
    std::vector<TaskLogEntry> entries;  // seq > after_seq, ascending
    int64_t last_seq = 0;               // highest seq ever appended to this task (0: none)
    int64_t dropped = 0;                // entries dropped by the bound so far (gaps in seq)
  };
  // Appends `entries` to the log of task `task_uid` (of object `task`) in one transaction and
  // keeps the log within the store's per-task bound (Options::task_log_max_bytes of text): the
  // oldest deltas (kAssistantDelta, kOutputDelta) are dropped first, then the oldest other
  // entries; an entry longer than the bound is cut to it. Returns the last seq assigned.
  virtual StatusOr<int64_t> AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                          const std::vector<TaskLogEntry>& entries) = 0;
  // The entries with seq > after_seq, at most `limit` (0 = all). An unknown uid gives an empty
  // page (last_seq 0), not an error: the task may not have logged yet.
  virtual StatusOr<TaskLogPage> ReadTaskLog(const std::string& task_uid, int64_t after_seq = 0,
                                            int limit = 0) = 0;

  struct Artifact {
    std::string path;     // the collect path, relative to the worker's workspaceDirectory
    int64_t bytes = 0;    // size of `content`
    std::string sha256;   // lowercase hex of `content`
    std::string content;  // the file's bytes (empty in ListArtifacts)
  };
  // Stores (replaces) one collected file of task `task_uid`. kResourceExhausted when the task's
  // artifacts would exceed kMaxTaskArtifactBytes (16 MiB) in total; kInvalidArgument when
  // sha256/bytes do not describe `content`.
  virtual Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                             const Artifact& artifact) = 0;
  // The task's artifacts without their content, sorted by path.
  virtual StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& task_uid) = 0;
  // One artifact with its content; kNotFound if absent.
  virtual StatusOr<Artifact> GetArtifact(const std::string& task_uid, const std::string& path) = 0;

  // ---- usage ledger (DESIGN §8.2) ------------------------------------------------------------
  // What each attempt of an AgentTask consumed, one record per (task uid, attempt), kept when
  // the task is deleted (a deleted task still spent its budget). Bumps no revision. Only the SQL
  // stores implement these; others answer kUnimplemented.

  struct UsageRecord {
    std::string workspace;  // "<namespace>/<workspaceRef>" (WorkspaceOf)
    std::string task_uid;
    int64_t attempt = 0;         // 1, 2, …
    ObjectKey task;              // for the operator; the uid is the key
    int64_t finished_at_ms = 0;  // the attempt's end, Unix milliseconds (the period it counts in)
    int64_t input_tokens = 0;
    int64_t cached_input_tokens = 0;
    int64_t output_tokens = 0;
    int64_t reasoning_tokens = 0;
    int64_t compute_millis = 0;
    bool task_finished = false;  // the attempt ended the task (counted in UsageSum::tasks)
    std::string phase;           // how the attempt ended: "Succeeded", "Failed", …
  };
  // Records one attempt's usage, once: a second record with the same (task_uid, attempt) is
  // ignored (the first stays), so a pass retried after a crash or a conflict never counts
  // twice.
  virtual Status RecordUsage(const UsageRecord& record) {
    (void)record;
    return api::UnimplementedError("this store keeps no usage ledger");
  }
  // The sum of `workspace`'s records that finished in [from_ms, to_ms).
  virtual StatusOr<api::UsageSum> SumUsage(const std::string& workspace, int64_t from_ms,
                                           int64_t to_ms) {
    (void)workspace;
    (void)from_ms;
    (void)to_ms;
    return api::UnimplementedError("this store keeps no usage ledger");
  }
  // Every record ever kept, summed by workspace and phase (`tasks` counts the records that ended
  // their task), by workspace then phase: the metrics' counters, which only grow.
  struct UsageTotal {
    std::string workspace;
    std::string phase;
    api::UsageSum sum;
  };
  virtual StatusOr<std::vector<UsageTotal>> UsageTotals() {
    return api::UnimplementedError("this store keeps no usage ledger");
  }

  // ---- task slots (DESIGN §8.2: Workspace.spec.limits.maxConcurrentTasks) ---------------------
  // A slot is a row (workspace, task uid) that an AgentTask holds while it is Submitted or
  // Running (a pool task from before it binds a replica). Taking one is atomic across processes
  // on one database: SQLite's write lock, PostgreSQL's per-workspace advisory lock inside the
  // transaction, so two sbxd replicas never hand out more than the limit. Bumps no revision.
  // Only the SQL stores implement these; others answer kUnimplemented.
  struct SlotGrant {
    bool granted = false;
    // When not granted: who holds the workspace's slots (AgentTask keys and uids), for the
    // caller to wait on and to give back the slots of tasks that are gone or finished.
    std::vector<std::pair<ObjectKey, std::string>> holders;
  };
  // Takes a slot of `workspace` for the task (`task` with `task_uid`) if it holds none and
  // fewer than `limit` are held; a task that holds one already is granted again.
  virtual StatusOr<SlotGrant> AcquireTaskSlot(const std::string& workspace, const ObjectKey& task,
                                              const std::string& task_uid, int limit) {
    (void)workspace;
    (void)task;
    (void)task_uid;
    (void)limit;
    return api::UnimplementedError("this store keeps no task slots");
  }
  // Gives back the slot the task holds, if any.
  virtual Status ReleaseTaskSlot(const std::string& task_uid) {
    (void)task_uid;
    return api::UnimplementedError("this store keeps no task slots");
  }

  // ---- audit log (DESIGN §8.3) ----------------------------------------------------------------
  // Append-only: one record per audited write (ApplyOptions::audit, DeleteOptions::audit) in
  // that write's transaction, plus the records AppendAudit writes for what is not an object write
  // (a request refused for its role, an exec). Never a secret or a manifest body: the spec is
  // kept only as its digest. Bumps no revision. Kept until ExpireAudit. Only the SQL stores
  // implement these; others answer kUnimplemented.
  struct AuditRecord {
    int64_t id = 0;       // 1, 2, … in commit order; assigned by the store
    int64_t time_ms = 0;  // Unix milliseconds; assigned by the store
    std::string actor;    // WriteAudit
    std::string role;     // WriteAudit
    std::string verb;     // WriteAudit; "prune" for an object an apply pruned
    ObjectKey object;
    int64_t resource_version_before = 0;  // 0: it did not exist
    int64_t resource_version_after = 0;   // 0: it is gone (or the write failed)
    // "created" | "configured" | "deleted" | "marked-for-deletion", "ok" (AppendAudit of a
    // non-write), or a failure: the status code's canonical name ("PERMISSION_DENIED", …).
    std::string result;
    std::string source;       // WriteAudit
    std::string spec_digest;  // "sha256:<hex>" of the stored spec after the write; "" if none
  };
  struct AuditQuery {
    int64_t after_id = 0;  // only records with a greater id
    int64_t since_ms = 0;  // only records at or after this time (0: all)
    std::string actor;     // only this actor ("" = all)
    int limit = 0;         // at most this many, oldest first (0 = all)
  };
  // Appends `record` (its id and time assigned here) in a transaction of its own.
  virtual Status AppendAudit(const AuditRecord& record) {
    (void)record;
    return api::UnimplementedError("this store keeps no audit log");
  }
  // Oldest first.
  virtual StatusOr<std::vector<AuditRecord>> ListAudit(const AuditQuery& query) {
    (void)query;
    return api::UnimplementedError("this store keeps no audit log");
  }
  // Deletes the records older than `cutoff`, except the newest record of all (so that ids keep
  // growing). Returns the number deleted.
  virtual StatusOr<int64_t> ExpireAudit(std::chrono::system_clock::time_point cutoff) {
    (void)cutoff;
    return api::UnimplementedError("this store keeps no audit log");
  }

  // ---- notification outbox (DESIGN §8.3; internal/notification_outbox.h) ----------------------
  // UpdateStatus writes the notifications its change causes (api::NoticesOf), one per Notifier
  // that wants it, in its own transaction. The deliverer (controller/notify) reads what is due
  // and finishes or reschedules each. Bumps no revision. Only the SQL stores implement these;
  // others answer kUnimplemented.
  static constexpr int64_t kMaxPendingNotifications = 1000;  // per Notifier; the oldest dropped
  struct Notification {
    int64_t id = 0;
    std::string webhook_id;  // "msg_<uuid>": the same for every attempt, for receivers to dedupe
    ObjectKey notifier;
    std::string notifier_uid;
    ObjectKey object;  // what it is about
    std::string object_uid;
    std::string reason;     // api/notices.h
    std::string type;       // "Normal" | "Warning"
    std::string message;    // scrubbed (ScrubbingStore scrubs the status it came from)
    std::string task_json;  // an AgentTask's {"phase","worker","usage","durationSeconds"}, or ""
    int64_t time_ms = 0;    // when the change was committed, Unix ms
    int64_t due_ms = 0;     // the next attempt's time
    int64_t attempts = 0;   // failed so far
    std::string last_error;
  };
  struct NotificationCount {
    std::string notifier_uid;
    int64_t pending = 0;
    int64_t dropped = 0;  // ever, by the bound
  };
  // Due at `now_ms`, by due time; at most `limit` (0: all).
  virtual StatusOr<std::vector<Notification>> ListDueNotifications(int64_t now_ms, int limit) {
    (void)now_ms;
    (void)limit;
    return api::UnimplementedError("this store keeps no notifications");
  }
  // Delivered (or given up: its Notifier is gone): removes it. Absent is OK.
  virtual Status FinishNotification(int64_t id) {
    (void)id;
    return api::UnimplementedError("this store keeps no notifications");
  }
  // Failed: records the attempt and when to try again. Absent is OK.
  virtual Status RetryNotification(int64_t id, int64_t attempts, int64_t due_ms,
                                   const std::string& error) {
    (void)id;
    (void)attempts;
    (void)due_ms;
    (void)error;
    return api::UnimplementedError("this store keeps no notifications");
  }
  // Per Notifier uid with pending or dropped notifications, by uid.
  virtual StatusOr<std::vector<NotificationCount>> NotificationCounts() {
    return api::UnimplementedError("this store keeps no notifications");
  }

  // ---- copying a whole store (sbxctl migrate; store_copy.h) ---------------------------------
  // Only the SQL stores implement these; others answer kUnimplemented.

  // Hands `sink` the current revision, then every object as stored (uid, resourceVersion, … and
  // its applyset), inventory record, event, task log, artifact and usage record, all read in ONE
  // read transaction: a consistent snapshot. Leases and the change log are not exported. Writes
  // nothing. The first error of `sink` stops the export and is returned.
  virtual Status ExportTo(StoreSink& sink) {
    (void)sink;
    return api::UnimplementedError("this store cannot export");
  }
  // Runs `fill` with a sink that writes what it is given into this store as is (uids and
  // resourceVersions kept) in ONE transaction, committed iff `fill` returns OK: all or nothing.
  // kFailedPrecondition naming what the store holds unless it has no objects, inventory,
  // events, task logs or artifacts. On commit the revision is above every imported
  // resourceVersion and the change log is empty (a watcher re-lists).
  virtual Status ImportFrom(const std::function<Status(StoreSink&)>& fill) {
    (void)fill;
    return api::UnimplementedError("this store cannot import");
  }
};

// The audit record of what `who` did to `key`, answered `result`: all of it for what is not an
// object write (a refused request, an exec; AppendAudit), the common part of a write's record
// (store/internal/audit_log.h AuditOfWrite adds the revisions and the spec's digest).
inline Store::AuditRecord AuditOf(const WriteAudit& who, const ObjectKey& key, std::string result) {
  Store::AuditRecord r;
  r.actor = who.actor;
  r.role = who.role;
  r.verb = who.verb;
  r.object = key;
  r.result = std::move(result);
  r.source = who.source;
  return r;
}

}  // namespace sbx::controller
