// SqliteStore's side of copying a whole store (store_copy.h, `sbxctl migrate`): the transactions
// around store_internal::StoreCopier, which reads and writes the records the same way for both
// backends. The export reads in one deferred transaction (one WAL snapshot, writers not
// blocked); the import writes in one BEGIN IMMEDIATE transaction.
#include <string>
#include <vector>

#include "controller/store/internal/sqlite_statement.h"
#include "controller/store/internal/store_copier.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {

using api::OkStatus;
using Copier = store_internal::StoreCopier<SqliteStore>;

Status SqliteStore::ExportTo(StoreSink& sink) {
  std::lock_guard lock(mu_);
  // A deferred transaction that only reads: one WAL snapshot, and writers are not blocked.
  Txn txn(*this);
  RETURN_IF_ERROR(txn.BeginRead());
  RETURN_IF_ERROR(Copier::Export(*this, path_, sink));
  return txn.Commit();
}

Status SqliteStore::ImportFrom(const std::function<Status(StoreSink&)>& fill) {
  std::lock_guard lock(mu_);
  Txn txn(*this);
  RETURN_IF_ERROR(txn.Begin());
  ASSIGN_OR_RETURN(const int64_t current, ReadRevision());
  RETURN_IF_ERROR(Copier::Import(*this, path_, current, fill));
  RETURN_IF_ERROR(txn.Commit());
  ++local_commits_;
  committed_.notify_all();
  return OkStatus();
}

Status SqliteStore::Query(std::string_view sql, const std::vector<store_internal::SqlParam>& params,
                          const std::function<Status(const Stmt&)>& each_row, int64_t* changed) {
  using Type = store_internal::SqlParam::Type;
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    const store_internal::SqlParam& p = params[i];
    switch (p.type) {
      case Type::kNull:
        stmt.BindOrNull(index, "");
        break;
      case Type::kText:
      case Type::kBytes:  // TEXT columns in SQLite (sql_param.h)
        stmt.Bind(index, p.value);
        break;
      case Type::kInt:
        stmt.Bind(index, p.number);
        break;
      case Type::kBlob:
        stmt.BindBlob(index, p.value);
        break;
    }
  }
  for (;;) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      if (changed != nullptr) {
        *changed = sqlite3_changes64(db_);
      }
      return OkStatus();
    }
    if (each_row) {
      RETURN_IF_ERROR(each_row(stmt));
    }
  }
}

}  // namespace sbx::controller
