// SqliteStore's schema: the migrations that build it, and the column lists its statements share.
//
// Thread-safety: constants only. Module-private to controller/store.
#pragma once

#include <span>
#include <string_view>

namespace sbx::controller::internal {

// Schema migrations: entry i takes the schema from version i to i + 1 (PRAGMA user_version).
std::span<const std::string_view> SqliteMigrations();

// Columns of `objects` in the order ObjectRow is read.
inline constexpr std::string_view kObjectColumns =
    "kind, namespace, name, uid, generation, resource_version, spec, status, labels, "
    "annotations, owner_references, finalizers, deletion_timestamp, applyset, "
    "creation_timestamp, update_timestamp";

// Columns of `inventory` in the order an InventoryRecord is read.
inline constexpr std::string_view kInventoryColumns =
    "workspace, resource_type, external_id, state, owner_kind, owner_namespace, owner_name, "
    "owner_uid, created_at, updated_at";

}  // namespace sbx::controller::internal
