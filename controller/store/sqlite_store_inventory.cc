// SqliteStore's inventory of external resources (intent, live, deleting, abandoned) and its
// leases (the leader lease): small keyed tables that bump no revision.
#include <chrono>
#include <utility>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sqlite_rows.h"
#include "controller/store/internal/sqlite_schema.h"
#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::KindName;
using api::OkStatus;
using internal::DataLossError;
using internal::kInventoryColumns;
using internal::ReadInventoryColumns;

// ---- inventory --------------------------------------------------------------------------------

Status SqliteStore::PutInventory(const InventoryRecord& record) {
  std::lock_guard lock(mu_);
  const std::string now = Now();
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(
      Stmt stmt,
      Prepare("INSERT INTO inventory (" + std::string(kInventoryColumns) +
              ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (workspace, resource_type, external_id) DO UPDATE SET "
              "state = excluded.state, owner_kind = excluded.owner_kind, "
              "owner_namespace = excluded.owner_namespace, owner_name = excluded.owner_name, "
              "owner_uid = excluded.owner_uid, updated_at = excluded.updated_at"));
  stmt.Bind(1, record.workspace)
      .Bind(2, record.resource_type)
      .Bind(3, record.external_id)
      .Bind(4, internal::InventoryStateName(record.state))
      .Bind(5, KindName(record.owner.kind))
      .Bind(6, record.owner.namespace_)
      .Bind(7, record.owner.name)
      .Bind(8, record.owner_uid)
      .Bind(9, record.created_at.empty() ? now : record.created_at)
      .Bind(10, record.updated_at.empty() ? now : record.updated_at);
  RETURN_IF_ERROR(stmt.Run());
  return txn.Commit();
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

StatusOr<bool> SqliteStore::TryAcquireLease(const std::string& name, const std::string& holder,
                                            std::chrono::milliseconds ttl) {
  if (holder.empty()) {
    return api::InvalidArgumentError("lease " + name + ": empty holder");
  }
  const auto now = clock_.Now();
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  {
    ASSIGN_OR_RETURN(Stmt stmt, Prepare("SELECT holder, expires_at_ms FROM leases WHERE name = ?"));
    stmt.Bind(1, name);
    ASSIGN_OR_RETURN(bool found, stmt.Step());
    if (found && stmt.Text(0) != holder && stmt.Int(1) > now_ms) {
      return false;  // held by someone else and not expired
    }
  }
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("INSERT INTO leases (name, holder, expires_at_ms, "
                                      "renewed_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO "
                                      "UPDATE SET holder = excluded.holder, expires_at_ms = "
                                      "excluded.expires_at_ms, renewed_at = excluded.renewed_at"));
  RETURN_IF_ERROR(stmt.Bind(1, name)
                      .Bind(2, holder)
                      .Bind(3, now_ms + ttl.count())
                      .Bind(4, FormatRfc3339(now))
                      .Run());
  RETURN_IF_ERROR(txn.Commit());
  return true;
}

Status SqliteStore::ReleaseLease(const std::string& name, const std::string& holder) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(Stmt stmt, Prepare("DELETE FROM leases WHERE name = ? AND holder = ?"));
  RETURN_IF_ERROR(stmt.Bind(1, name).Bind(2, holder).Run());
  return txn.Commit();
}

StatusOr<std::optional<Store::Lease>> SqliteStore::GetLease(const std::string& name) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(Stmt stmt,
                   Prepare("SELECT holder, expires_at_ms, renewed_at FROM leases WHERE name = ?"));
  stmt.Bind(1, name);
  ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) {
    return std::optional<Lease>();
  }
  Lease lease;
  lease.name = name;
  lease.holder = stmt.Text(0);
  lease.expires_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(stmt.Int(1)));
  lease.renewed_at = stmt.Text(2);
  return std::optional<Lease>(std::move(lease));
}

}  // namespace sbx::controller
