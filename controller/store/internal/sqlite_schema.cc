#include "controller/store/internal/sqlite_schema.h"

#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/task_slots.h"
#include "controller/store/internal/usage_ledger.h"

namespace sbx::controller::store_internal {
namespace {

// Schema migrations: entry i takes the schema from version i to i + 1. Append only; never edit
// an entry that has shipped. All pending entries run in one transaction.
constexpr std::string_view kMigrations[] = {
    R"sql(
CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY,
  applied_at TEXT NOT NULL
);
-- The global revision: bumped once per object write; resourceVersion = revision of last write.
CREATE TABLE revision (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  value INTEGER NOT NULL
);
INSERT INTO revision (id, value) VALUES (1, 0);
CREATE TABLE objects (
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL UNIQUE,
  generation INTEGER NOT NULL,
  resource_version INTEGER NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL,
  labels TEXT NOT NULL,
  annotations TEXT NOT NULL,
  owner_references TEXT NOT NULL,
  finalizers TEXT NOT NULL,
  deletion_timestamp TEXT,
  applyset TEXT,
  creation_timestamp TEXT NOT NULL,
  update_timestamp TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX objects_by_applyset ON objects (applyset) WHERE applyset IS NOT NULL;
-- The watch log: one row per object write; object is NULL for a deletion.
CREATE TABLE changes (
  revision INTEGER PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  object TEXT
);
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  reason TEXT NOT NULL,
  message TEXT NOT NULL,
  count INTEGER NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL,
  UNIQUE (kind, namespace, name, type, reason, message)
);
CREATE TABLE inventory (
  workspace TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  external_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'live', 'deleting')),
  owner_kind TEXT NOT NULL,
  owner_namespace TEXT NOT NULL,
  owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (workspace, resource_type, external_id)
);
CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  renewed_at TEXT NOT NULL
);
)sql",
    // 2: inventory state 'abandoned' (a resource sbx gave up deleting, kept as a record for the
    // operator). SQLite cannot change a CHECK constraint in place: copy the table.
    R"sql(
CREATE TABLE inventory_v2 (
  workspace TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  external_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'live', 'deleting', 'abandoned')),
  owner_kind TEXT NOT NULL,
  owner_namespace TEXT NOT NULL,
  owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (workspace, resource_type, external_id)
);
INSERT INTO inventory_v2 SELECT workspace, resource_type, external_id, state, owner_kind,
  owner_namespace, owner_name, owner_uid, created_at, updated_at FROM inventory;
DROP TABLE inventory;
ALTER TABLE inventory_v2 RENAME TO inventory;
)sql",
    // 3: the AgentTask log and collected artifacts, keyed by the task's uid and deleted with its
    // row (DeleteRow). Both bounded: the log by Options::task_log_max_bytes per task, the
    // artifacts by kMaxTaskArtifactBytes per task.
    R"sql(
CREATE TABLE task_log_heads (
  task_uid TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  dropped INTEGER NOT NULL
);
CREATE TABLE task_log (
  task_uid TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  item_id TEXT NOT NULL,
  text TEXT NOT NULL,
  exit_code INTEGER,
  at TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (task_uid, seq)
);
CREATE TABLE artifacts (
  task_uid TEXT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  content BLOB NOT NULL,
  PRIMARY KEY (task_uid, path)
);
)sql",
    // 4: fencing tokens (DESIGN §7.4): a lease's token grows by one whenever a holder takes it
    // anew, and a released lease keeps its row (holder '') so the token never goes back.
    R"sql(
ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
)sql",
    // 5: wake hints (Store::PostWakeHint): a change that only says "look at this object now".
    R"sql(
ALTER TABLE changes ADD COLUMN wake_hint INTEGER NOT NULL DEFAULT 0;
)sql",
    // 6: the usage ledger (Store::RecordUsage, Store::SumUsage).
    kUsageLedgerTable,
    // 7: task slots (Store::AcquireTaskSlot, limits.maxConcurrentTasks).
    kTaskSlotsTable,
    // 8: the audit log (Store::AppendAudit, ListAudit; DESIGN §8.3).
    kAuditTable,
    // 9: the notification outbox (DESIGN §8.3; internal/notification_outbox.h).
    kNotificationTables,
    // 10: the finished flag (api::HasFinished; ListOptions::unfinished_only) and an index of the
    // unfinished rows, so admission lists the live tasks rather than every task ever run. The
    // backfill spells api::IsFinished's phases as of this migration.
    R"sql(
ALTER TABLE objects ADD COLUMN finished INTEGER NOT NULL DEFAULT 0;
UPDATE objects SET finished = 1 WHERE kind = 'AgentTask' AND
  json_extract(status, '$.phase') IN ('Succeeded', 'Failed', 'Cancelled', 'TimedOut');
CREATE INDEX objects_unfinished ON objects (kind, namespace) WHERE finished = 0;
)sql",
};

}  // namespace

std::span<const std::string_view> SqliteMigrations() { return kMigrations; }

}  // namespace sbx::controller::store_internal
