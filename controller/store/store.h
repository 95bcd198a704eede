// Store: the source of truth for desired state, shared by sbxctl and sbxd (DESIGN §3).
//
// One SQLite file in WAL mode (SqliteStore); sbxctl writes spec/metadata, the controller writes
// status only. Every object write bumps one global, monotonic revision; an object's
// resourceVersion is the revision of its last write. Events, inventory and leases are not
// object writes and bump no revision (a lease renewal must not wake every watcher). Neither the
// change log nor the events grow forever: CompactChanges trims the log (a watcher behind the
// compaction point gets kOutOfRange and re-lists), ExpireEvents drops old events, and each object
// keeps a bounded number of events. Implementations are safe to use from several threads and
// several processes at once (each write is one transaction; a busy database is retried up to a
// busy timeout, then kUnavailable naming the database path).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::controller {

using api::Object;
using api::ObjectKey;
using api::Status;
using api::StatusOr;

// ---- objects --------------------------------------------------------------------------------

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
};

enum class DeleteOutcome { kDeleted, kMarkedForDeletion, kAlreadyDeleting };

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
  virtual StatusOr<DeleteOutcome> Delete(const ObjectKey& key) = 0;

  // ---- watch --------------------------------------------------------------------------------

  enum class ChangeType { kAdded, kModified, kDeleted };
  struct Change {
    int64_t revision = 0;
    ChangeType type = ChangeType::kModified;
    ObjectKey key;
    std::optional<Object> object;  // the object after the change; unset for kDeleted
  };

  // Every change with revision > `since`, in revision order, each exactly once; also changes
  // made by other processes. At most `limit` changes. kOutOfRange ("resourceVersion too old")
  // when changes after `since` have been compacted away: the caller cannot know what it missed
  // and must list again, then watch from the revision it read before listing.
  virtual StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit = 1000) = 0;
  // Highest revision written so far (0 for a new store).
  virtual StatusOr<int64_t> CurrentRevision() = 0;
  // Blocks until the database may have changed (any process) or `timeout` passes; cheap
  // (PRAGMA data_version). Returns true if a change may have happened.
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

  // ---- leader lease -------------------------------------------------------------------------

  // Takes or renews lease `name` for `holder` if it is free, expired, or already held by
  // `holder`. Returns whether `holder` holds it afterwards.
  virtual StatusOr<bool> TryAcquireLease(const std::string& name, const std::string& holder,
                                         std::chrono::milliseconds ttl) = 0;
  virtual Status ReleaseLease(const std::string& name, const std::string& holder) = 0;

  struct Lease {
    std::string name;
    std::string holder;
    std::string renewed_at;  // RFC 3339
    std::chrono::system_clock::time_point expires_at;
  };
  // Lease `name` as last written, expired or not (nullopt when nobody holds or held it since
  // its last release): for naming the holder in an error message.
  virtual StatusOr<std::optional<Lease>> GetLease(const std::string& name) = 0;
};

}  // namespace sbx::controller
