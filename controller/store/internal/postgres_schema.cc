#include "controller/store/internal/postgres_schema.h"

#include "controller/store/internal/audit_log.h"
#include "controller/store/internal/notification_outbox.h"
#include "controller/store/internal/task_slots.h"
#include "controller/store/internal/usage_ledger.h"

namespace sbx::controller::store_internal {
namespace {

// The SQLite schema (sqlite_schema.cc) at its latest version, in PostgreSQL's types. Text that
// may hold any bytes (event messages, task log text, artifact content) is bytea: PostgreSQL's
// text refuses NUL and invalid UTF-8, which a command's output may well contain. Timestamps stay
// RFC 3339 text as in SQLite, so both stores compare and return them the same way.
constexpr std::string_view kMigrations[] = {
    R"sql(
-- The global revision: bumped once per object write; resourceVersion = revision of last write.
-- Every object write locks this row first (SELECT … FOR UPDATE), so object writes serialise and
-- revisions are committed gap-free and in order.
CREATE TABLE revision (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  value BIGINT NOT NULL
);
INSERT INTO revision (id, value) VALUES (1, 0);
CREATE TABLE objects (
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL UNIQUE,
  generation BIGINT NOT NULL,
  resource_version BIGINT NOT NULL,
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
  revision BIGINT PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  object TEXT
);
CREATE TABLE events (
  id BIGSERIAL PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  reason TEXT NOT NULL,
  message BYTEA NOT NULL,
  count BIGINT NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL
);
-- Deduplication key; the message by its digest, since a btree entry is limited to ~2.7 kB.
CREATE UNIQUE INDEX events_dedup ON events (kind, namespace, name, type, reason, md5(message));
CREATE TABLE inventory (
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
CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  renewed_at TEXT NOT NULL
);
CREATE TABLE task_log_heads (
  task_uid TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  last_seq BIGINT NOT NULL,
  dropped BIGINT NOT NULL
);
CREATE TABLE task_log (
  task_uid TEXT NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT NOT NULL,
  item_id TEXT NOT NULL,
  text BYTEA NOT NULL,
  exit_code BIGINT,
  at TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  PRIMARY KEY (task_uid, seq)
);
CREATE TABLE artifacts (
  task_uid TEXT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  content BYTEA NOT NULL,
  PRIMARY KEY (task_uid, path)
);
)sql",
    // 2: fencing tokens (DESIGN §7.4): a lease's token grows by one whenever a holder takes it
    // anew, and a released lease keeps its row (holder '') so the token never goes back.
    R"sql(
ALTER TABLE leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0;
)sql",
    // 3: wake hints (Store::PostWakeHint): a change that only says "look at this object now".
    R"sql(
ALTER TABLE changes ADD COLUMN wake_hint INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4: the usage ledger (Store::RecordUsage, Store::SumUsage).
    kUsageLedgerTable,
    // 5: task slots (Store::AcquireTaskSlot, limits.maxConcurrentTasks).
    kTaskSlotsTable,
    // 6: the audit log (Store::AppendAudit, ListAudit; DESIGN §8.3).
    kAuditTable,
    // 7: the notification outbox (DESIGN §8.3; internal/notification_outbox.h).
    kNotificationTables,
    // 8: the finished flag (api::HasFinished; ListOptions::unfinished_only) and an index of the
    // unfinished rows, so admission lists the live tasks rather than every task ever run. The
    // backfill spells api::IsFinished's phases as of this migration.
    R"sql(
ALTER TABLE objects ADD COLUMN finished INTEGER NOT NULL DEFAULT 0;
UPDATE objects SET finished = 1 WHERE kind = 'AgentTask' AND
  (status::json ->> 'phase') IN ('Succeeded', 'Failed', 'Cancelled', 'TimedOut');
CREATE INDEX objects_unfinished ON objects (kind, namespace) WHERE finished = 0;
)sql",
};

}  // namespace

std::span<const std::string_view> PostgresMigrations() { return kMigrations; }

}  // namespace sbx::controller::store_internal
