// SqliteStore's row binders, shared by its translation units (sqlite_store_*.cc): an object row
// bound to a statement in the column order of kObjectColumns. A template over the statement
// type, so that it need not name the private SqliteStore::Stmt. The readers are in
// store_rows.h.
//
// Thread-safety: as the statement. Module-private to controller/store.
#pragma once

#include <string>

#include "api/resources.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// Binds parameters 1 to 17 to the row's columns in kObjectColumns order (INSERT and UPDATE).
void BindRowColumns(auto& stmt, const ObjectRow& row) {
  stmt.Bind(1, api::KindName(row.key.kind))
      .Bind(2, row.key.namespace_)
      .Bind(3, row.key.name)
      .Bind(4, row.uid)
      .Bind(5, row.generation)
      .Bind(6, row.resource_version)
      .Bind(7, row.spec)
      .Bind(8, row.status)
      .Bind(9, row.labels)
      .Bind(10, row.annotations)
      .Bind(11, row.owner_references)
      .Bind(12, row.finalizers)
      .BindOrNull(13, row.deletion_timestamp)
      .BindOrNull(14, row.applyset)
      .Bind(15, row.creation_timestamp)
      .Bind(16, row.update_timestamp)
      .Bind(17, static_cast<int64_t>(row.finished ? 1 : 0));
}

}  // namespace sbx::controller::store_internal
