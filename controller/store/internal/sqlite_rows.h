// SqliteStore's row readers and binders, shared by its translation units (sqlite_store_*.cc):
// an object row and an inventory record read from, or bound to, a statement in the column
// order of kObjectColumns / kInventoryColumns. Templates over the statement type, so that they
// need not name the private SqliteStore::Stmt.
//
// Thread-safety: as the statement. Module-private to controller/store.
#pragma once

#include <string>

#include "api/resources.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::internal {

// The object row at the statement's current step (columns in kObjectColumns order); kDataLoss
// naming `path` for a kind this build does not know.
StatusOr<ObjectRow> ReadRowColumns(const std::string& path, const auto& stmt) {
  ObjectRow row;
  auto kind = api::ParseKind(stmt.Text(0));
  if (!kind.ok()) {
    return DataLossError("database " + path + ": object with unknown kind '" + stmt.Text(0) + "'");
  }
  row.key.kind = *kind;
  row.key.namespace_ = stmt.Text(1);
  row.key.name = stmt.Text(2);
  row.uid = stmt.Text(3);
  row.generation = stmt.Int(4);
  row.resource_version = stmt.Int(5);
  row.spec = stmt.Text(6);
  row.status = stmt.Text(7);
  row.labels = stmt.Text(8);
  row.annotations = stmt.Text(9);
  row.owner_references = stmt.Text(10);
  row.finalizers = stmt.Text(11);
  row.deletion_timestamp = stmt.Text(12);
  row.applyset = stmt.Text(13);
  row.creation_timestamp = stmt.Text(14);
  row.update_timestamp = stmt.Text(15);
  return row;
}

// Binds parameters 1 to 16 to the row's columns in kObjectColumns order (INSERT and UPDATE).
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
      .Bind(16, row.update_timestamp);
}

// The inventory record at the statement's current step (columns in kInventoryColumns order);
// kDataLoss naming `path` for a bad state or owner kind.
StatusOr<Store::InventoryRecord> ReadInventoryColumns(const std::string& path, const auto& stmt) {
  Store::InventoryRecord record;
  record.workspace = stmt.Text(0);
  record.resource_type = stmt.Text(1);
  record.external_id = stmt.Text(2);
  auto state = ParseInventoryState(stmt.Text(3));
  auto kind = api::ParseKind(stmt.Text(4));
  if (!state || !kind.ok()) {
    return DataLossError("database " + path + ": inventory record " + record.workspace + "/" +
                         record.resource_type + "/" + record.external_id +
                         " has a bad state or owner kind");
  }
  record.state = *state;
  record.owner = ObjectKey{*kind, stmt.Text(5), stmt.Text(6)};
  record.owner_uid = stmt.Text(7);
  record.created_at = stmt.Text(8);
  record.updated_at = stmt.Text(9);
  return record;
}

}  // namespace sbx::controller::internal
