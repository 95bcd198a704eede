// PostgresStore's parameter lists, shared by its translation units (postgres_store*.cc): an
// object row turned into statement parameters in the column order of kObjectColumns. The row
// readers are in store_rows.h (with PgRow).
//
// Thread-safety: pure functions. Module-private to controller/store.
#pragma once

#include <string>
#include <vector>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// $1 … $17 in kObjectColumns order (INSERT and UPDATE).
std::vector<PgParam> RowParams(const ObjectRow& row);

}  // namespace sbx::controller::store_internal
