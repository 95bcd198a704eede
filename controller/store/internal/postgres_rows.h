// PostgresStore's row readers and parameter lists, shared by its translation units
// (postgres_store*.cc): an object row and an inventory record read from row `i` of a result, or
// turned into statement parameters, in the column order of kObjectColumns / kInventoryColumns.
//
// Thread-safety: pure functions. Module-private to controller/store.
#pragma once

#include <string>
#include <vector>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/store.h"

namespace sbx::controller::internal {

// kDataLoss naming `db` (the redacted URL) if a column does not decode.
StatusOr<ObjectRow> ReadRowColumns(const std::string& db, const PgResult& r, int i);
// $1 … $16 in kObjectColumns order (INSERT and UPDATE).
std::vector<PgParam> RowParams(const ObjectRow& row);
StatusOr<Store::InventoryRecord> ReadInventoryColumns(const std::string& db, const PgResult& r,
                                                      int i);

}  // namespace sbx::controller::internal
