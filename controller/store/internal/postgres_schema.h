// PostgresStore's schema: the versioned migrations that build it. The column lists are shared
// with SQLite (sqlite_schema.h: kObjectColumns, kInventoryColumns).
//
// Thread-safety: constants only. Module-private to controller/store.
#pragma once

#include <span>
#include <string_view>

namespace sbx::controller::store_internal {

// Entry i takes the schema from version i to i + 1; each runs in a transaction of its own and
// records its version in schema_migrations. Append only; never edit an entry that has shipped.
std::span<const std::string_view> PostgresMigrations();

}  // namespace sbx::controller::store_internal
