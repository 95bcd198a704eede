// SqliteStore's inventory of external resources (intent, live, deleting, abandoned) and its
// leases (the leader lease): small keyed tables that bump no revision.
#include <chrono>
#include <utility>

#include "api/rfc3339.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_rows.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using store_internal::DataLossError;
using store_internal::kInventoryColumns;
using store_internal::ReadInventoryColumns;

// ---- inventory --------------------------------------------------------------------------------

Status SqliteStore::PutInventory(const InventoryRecord& record) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  RETURN_IF_ERROR(
      InsertInventory(store_internal::PutInventoryRecord(record, now),
                      " ON CONFLICT (workspace, resource_type, external_id) DO UPDATE SET "
                      "state = excluded.state, owner_kind = excluded.owner_kind, "
                      "owner_namespace = excluded.owner_namespace, owner_name = "
                      "excluded.owner_name, owner_uid = excluded.owner_uid, updated_at = "
                      "excluded.updated_at"));
  return txn.Commit();
}

Status SqliteStore::InsertInventory(const InventoryRecord& record, std::string_view on_conflict) {
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("INSERT INTO inventory (" + std::string(kInventoryColumns) +
                           ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" + std::string(on_conflict)));
  return stmt.Bind(1, record.workspace)
      .Bind(2, record.resource_type)
      .Bind(3, record.external_id)
      .Bind(4, store_internal::InventoryStateName(record.state))
      .Bind(5, KindName(record.owner.kind))
      .Bind(6, record.owner.namespace_)
      .Bind(7, record.owner.name)
      .Bind(8, record.owner_uid)
      .Bind(9, record.created_at)
      .Bind(10, record.updated_at)
      .Run();
}

StatusOr<std::optional<Store::InventoryRecord>> SqliteStore::GetInventory(
    const std::string& workspace, const std::string& resource_type,
    const std::string& external_id) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(kInventoryColumns) +
                                      " FROM inventory WHERE workspace = ? AND "
                                      "resource_type = ? AND external_id = ?"));
  stmt.Bind(1, workspace).Bind(2, resource_type).Bind(3, external_id);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<InventoryRecord>();
  }
  ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(path_, stmt));
  return std::optional<InventoryRecord>(std::move(record));
}

StatusOr<std::vector<Store::InventoryRecord>> SqliteStore::ListInventory(
    const std::optional<std::string>& workspace) {
  std::string sql = "SELECT " + std::string(kInventoryColumns) + " FROM inventory";
  if (workspace) {
    sql += " WHERE workspace = ?";
  }
  sql += " ORDER BY workspace, resource_type, external_id";
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  if (workspace) {
    stmt.Bind(1, *workspace);
  }
  std::vector<InventoryRecord> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    ASSIGN_OR_RETURN(InventoryRecord record, ReadInventoryColumns(path_, stmt));
    out.push_back(std::move(record));
  }
  return out;
}

Status SqliteStore::DeleteInventory(const std::string& workspace, const std::string& resource_type,
                                    const std::string& external_id) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM inventory WHERE workspace = ? AND "
                                      "resource_type = ? AND external_id = ?"));
  RETURN_IF_ERROR(stmt.Bind(1, workspace).Bind(2, resource_type).Bind(3, external_id).Run());
  return txn.Commit();
}

// ---- leases -----------------------------------------------------------------------------------

StatusOr<std::optional<int64_t>> SqliteStore::AcquireLease(const std::string& name,
                                                           const std::string& holder,
                                                           std::chrono::milliseconds ttl) {
  if (holder.empty()) {
    return api::InvalidArgumentError("lease " + name + ": empty holder");
  }
  const auto now = clock_.Now();
  const int64_t now_ms = api::UnixMillis(now);
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  int64_t token = 1;  // a lease never taken before
  {
    ASSIGN_OR_RETURN(Stmt stmt,
                     Prepare("SELECT holder, expires_at_ms, token FROM leases WHERE name = ?"));
    stmt.Bind(1, name);
    ASSIGN_OR_RETURN(bool found, stmt.Step());
    if (found) {
      const bool live = stmt.Int(1) > now_ms;
      if (live && stmt.Text(0) != holder) {
        return std::optional<int64_t>();  // held by someone else and not expired
      }
      // A renewal keeps the tenure's token; a lease taken anew (free, released, expired) gets
      // the next one.
      token = live ? stmt.Int(2) : stmt.Int(2) + 1;
    }
  }
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO leases (name, holder, expires_at_ms, "
                                      "renewed_at, token) VALUES (?, ?, ?, ?, ?) ON CONFLICT "
                                      "(name) DO UPDATE SET holder = excluded.holder, "
                                      "expires_at_ms = excluded.expires_at_ms, renewed_at = "
                                      "excluded.renewed_at, token = excluded.token"));
  RETURN_IF_ERROR(stmt.Bind(1, name)
                      .Bind(2, holder)
                      .Bind(3, now_ms + ttl.count())
                      .Bind(4, FormatRfc3339(now))
                      .Bind(5, token)
                      .Run());
  RETURN_IF_ERROR(txn.Commit());
  return std::optional<int64_t>(token);
}

Status SqliteStore::ReleaseLease(const std::string& name, const std::string& holder) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("UPDATE leases SET holder = '', expires_at_ms = 0 WHERE "
                                      "name = ? AND holder = ?"));
  RETURN_IF_ERROR(stmt.Bind(1, name).Bind(2, holder).Run());
  return txn.Commit();
}

StatusOr<std::optional<Store::Lease>> SqliteStore::GetLease(const std::string& name) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(store_internal::kLeaseColumns) +
                                      " FROM leases WHERE name = ? AND holder != ''"));
  stmt.Bind(1, name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<Lease>();
  }
  return std::optional<Lease>(store_internal::ReadLeaseColumns(stmt));
}

StatusOr<std::vector<Store::Lease>> SqliteStore::ListLeases(const std::string& prefix) {
  std::lock_guard lock(mu_);
  // Bytes compared, not LIKE: a prefix may hold '%' or '_'.
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT " + std::string(store_internal::kLeaseColumns) +
                                      " FROM leases WHERE substr(CAST(name AS BLOB), 1, ?) = "
                                      "CAST(? AS BLOB) AND holder != '' ORDER BY name"));
  stmt.Bind(1, static_cast<int64_t>(prefix.size())).Bind(2, prefix);
  std::vector<Lease> leases;
  while (true) {
    ASSIGN_OR_RETURN(bool found, stmt.Step());
    if (!found) {
      break;
    }
    leases.push_back(store_internal::ReadLeaseColumns(stmt));
  }
  return leases;
}

}  // namespace sbx::controller
