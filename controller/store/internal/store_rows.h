// The row readers both stores share (sqlite_store_*.cc, postgres_store*.cc): an object row, an
// inventory record, an event, a change and a task log entry read from one row of a query, in the
// column order of kObjectColumns / kInventoryColumns / kEventColumns / kTaskLogEntryColumns
// (sqlite_schema.h). One reader per table, so a store's normal reads and its export
// (store_copy.h) decode a row the same way on either database.
//
// Templates over the row: anything with Text(column), Int(column), IsNull(column) and
// Bytes(column) (a column that may hold any bytes: TEXT in SQLite, bytea in PostgreSQL) —
// SqliteStore::Stmt at its current step, or PgRow (one row of a PgResult).
//
// Thread-safety: as the row they read. Module-private to controller/store.
#pragma once

#include <chrono>
#include <string>
#include <utility>

#include "api/resources.h"
#include "api/rfc3339.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// kDataLoss naming `database` for a kind this build does not know.
StatusOr<ObjectRow> ReadRowColumns(const std::string& database, const auto& row) {
  ObjectRow out;
  auto kind = api::ParseKind(row.Text(0));
  if (!kind.ok()) {
    return DataLossError("database " + database + ": object with unknown kind '" + row.Text(0) +
                         "'");
  }
  out.key.kind = *kind;
  out.key.namespace_ = row.Text(1);
  out.key.name = row.Text(2);
  out.uid = row.Text(3);
  out.generation = row.Int(4);
  out.resource_version = row.Int(5);
  out.spec = row.Text(6);
  out.status = row.Text(7);
  out.labels = row.Text(8);
  out.annotations = row.Text(9);
  out.owner_references = row.Text(10);
  out.finalizers = row.Text(11);
  out.deletion_timestamp = row.Text(12);  // "" for NULL
  out.applyset = row.Text(13);
  out.creation_timestamp = row.Text(14);
  out.update_timestamp = row.Text(15);
  out.finished = row.Int(16) != 0;
  return out;
}

// kDataLoss naming `database` for a bad state or owner kind.
StatusOr<Store::InventoryRecord> ReadInventoryColumns(const std::string& database,
                                                      const auto& row) {
  Store::InventoryRecord record;
  record.workspace = row.Text(0);
  record.resource_type = row.Text(1);
  record.external_id = row.Text(2);
  auto state = ParseInventoryState(row.Text(3));
  auto kind = api::ParseKind(row.Text(4));
  if (!state || !kind.ok()) {
    return DataLossError("database " + database + ": inventory record " + record.workspace + "/" +
                         record.resource_type + "/" + record.external_id +
                         " has a bad state or owner kind");
  }
  record.state = *state;
  record.owner = ObjectKey{*kind, row.Text(5), row.Text(6)};
  record.owner_uid = row.Text(7);
  record.created_at = row.Text(8);
  record.updated_at = row.Text(9);
  return record;
}

// A lease from the columns of kLeaseColumns.
inline Store::Lease ReadLeaseColumns(const auto& row) {
  Store::Lease lease;
  lease.name = row.Text(0);
  lease.holder = row.Text(1);
  lease.expires_at = api::FromUnixMillis(row.Int(2));
  lease.renewed_at = row.Text(3);
  lease.token = row.Int(4);
  return lease;
}

// kDataLoss naming `database` for a kind this build does not know.
StatusOr<Store::Event> ReadEventColumns(const std::string& database, const auto& row) {
  auto kind = api::ParseKind(row.Text(0));
  if (!kind.ok()) {
    return DataLossError("database " + database + ": event with unknown kind '" + row.Text(0) +
                         "'");
  }
  Store::Event event;
  event.involved = ObjectKey{*kind, row.Text(1), row.Text(2)};
  event.type = row.Text(3);
  event.reason = row.Text(4);
  event.message = row.Bytes(5);
  event.count = row.Int(6);
  event.first_seen = row.Text(7);
  event.last_seen = row.Text(8);
  return event;
}

// A change of the log from the columns revision, type, kind, namespace, name, object; kDataLoss
// naming `database` and the revision if any of them does not decode.
StatusOr<Store::Change> ReadChangeColumns(const std::string& database, const auto& row) {
  Store::Change change;
  change.revision = row.Int(0);
  const std::string where = "database " + database + ": change " + std::to_string(change.revision);
  auto type = ParseChangeType(row.Text(1));
  auto kind = api::ParseKind(row.Text(2));
  if (!type || !kind.ok()) {
    return DataLossError(where + ": bad type or kind");
  }
  change.type = *type;
  change.key = ObjectKey{*kind, row.Text(3), row.Text(4)};
  if (!row.IsNull(5)) {
    auto decoded = DecodeChangeObject(change.key, row.Text(5));
    if (!decoded.ok()) {
      return DataLossError(where + ": " + decoded.status().message());
    }
    auto object = RowToObject(database, *decoded);
    if (!object.ok()) {
      return DataLossError(where + ": " + object.status().message());
    }
    change.object = std::move(object).value();
  }
  change.wake_hint = row.Int(6) != 0;
  return change;
}

Store::TaskLogEntry ReadTaskLogEntryColumns(const auto& row) {
  Store::TaskLogEntry entry;
  entry.seq = row.Int(0);
  entry.kind = ParseTaskLogKind(row.Text(1));
  entry.item_id = row.Text(2);
  entry.text = row.Bytes(3);
  if (!row.IsNull(4)) {
    entry.exit_code = row.Int(4);
  }
  entry.at = row.Text(5);
  return entry;
}

}  // namespace sbx::controller::store_internal
