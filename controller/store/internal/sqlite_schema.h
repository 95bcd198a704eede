// SqliteStore's schema: the migrations that build it, and the column lists the statements of
// both stores share (PostgresStore's tables have the same columns).
//
// Thread-safety: constants only. Module-private to controller/store.
#pragma once

#include <span>
#include <string_view>

namespace sbx::controller::store_internal {

// Schema migrations: entry i takes the schema from version i to i + 1 (PRAGMA user_version).
std::span<const std::string_view> SqliteMigrations();

// Columns of `objects` in the order ObjectRow is read.
inline constexpr std::string_view kObjectColumns =
    "kind, namespace, name, uid, generation, resource_version, spec, status, labels, "
    "annotations, owner_references, finalizers, deletion_timestamp, applyset, "
    "creation_timestamp, update_timestamp, finished";

// Columns of `inventory` in the order an InventoryRecord is read.
inline constexpr std::string_view kInventoryColumns =
    "workspace, resource_type, external_id, state, owner_kind, owner_namespace, owner_name, "
    "owner_uid, created_at, updated_at";

// Columns of `events` in the order an Event is read (all but id).
inline constexpr std::string_view kEventColumns =
    "kind, namespace, name, type, reason, message, count, first_seen, last_seen";

// Columns of `leases` in the order a Lease is read.
inline constexpr std::string_view kLeaseColumns = "name, holder, expires_at_ms, renewed_at, token";

// Columns of `task_log` in the order a TaskLogEntry is read (all but task_uid and bytes).
inline constexpr std::string_view kTaskLogEntryColumns = "seq, kind, item_id, text, exit_code, at";

}  // namespace sbx::controller::store_internal
