// PostgresStore's side of copying a whole store (store_copy.h, `sbxctl migrate`): the
// transactions around store_internal::StoreCopier, which reads and writes the records the same way
// for both backends. The export reads from one snapshot (REPEATABLE READ, READ ONLY); the import
// writes in one transaction holding the revision row's lock.
#include <string>
#include <vector>

#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/postgres_rows.h"
#include "controller/store/internal/store_copier.h"
#include "controller/store/postgres_store.h"

namespace sbx::controller {

using api::OkStatus;
using store_internal::PgResult;
using store_internal::PgRow;
using store_internal::PgTxn;
using Copier = store_internal::StoreCopier<PostgresStore>;

Status PostgresStore::ExportTo(StoreSink& sink) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // One snapshot for every table, and a promise to write nothing.
  RETURN_IF_ERROR(
      conn_->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").status());
  RETURN_IF_ERROR(Copier::Export(*this, redacted_url_, sink));
  return txn.Commit();
}

Status PostgresStore::ImportFrom(const std::function<Status(StoreSink&)>& fill) {
  std::lock_guard lock(mu_);
  PgTxn txn(*conn_);
  RETURN_IF_ERROR(txn.Begin());
  // Object writers of every process wait for this transaction, as for any object write.
  ASSIGN_OR_RETURN(const int64_t current, LockRevision());
  RETURN_IF_ERROR(Copier::Import(*this, redacted_url_, current, fill));
  RETURN_IF_ERROR(Notify());
  return txn.Commit();
}

Status PostgresStore::Query(std::string_view sql,
                            const std::vector<store_internal::SqlParam>& params,
                            const std::function<Status(const PgRow&)>& each_row, int64_t* changed) {
  std::vector<store_internal::PgParam> values;
  values.reserve(params.size());
  for (const store_internal::SqlParam& param : params) {
    values.push_back(store_internal::ToPgParam(param));
  }
  ASSIGN_OR_RETURN(PgResult r, conn_->Exec(sql, values));
  if (each_row) {
    for (int i = 0; i < r.Rows(); ++i) {
      RETURN_IF_ERROR(each_row(PgRow(r, i)));
    }
  }
  if (changed != nullptr) {
    *changed = r.Affected();
  }
  return OkStatus();
}

}  // namespace sbx::controller
