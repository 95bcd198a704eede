// PostgresStore's parameter lists and transaction, shared by its translation units
// (postgres_store*.cc, internal/sql_store_records.cc): an object row turned into statement
// parameters in the column order of kObjectColumns, a SqlParam turned into a PgParam, and
// PostgresStore::Txn. The row readers are in store_rows.h (with PgRow).
//
// Thread-safety: pure functions. Module-private to controller/store.
#pragma once

#include <string>
#include <vector>

#include "controller/store/internal/object_row.h"
#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/postgres_store.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// A SqlParam as libpq takes it: text format, bytes in binary.
PgParam ToPgParam(const SqlParam& param);

}  // namespace sbx::controller::store_internal

namespace sbx::controller {

// The transaction of internal/sql_store.h on the store's query connection: Begin (READ
// COMMITTED, writes), BeginRead (REPEATABLE READ: one snapshot for several reads), Commit;
// rolled back unless committed.
class PostgresStore::Txn : public store_internal::PgTxn {
 public:
  explicit Txn(PostgresStore& store) : PgTxn(*store.conn_), conn_(*store.conn_) {}
  [[nodiscard]] Status BeginRead() {
    RETURN_IF_ERROR(Begin());
    return conn_.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status();
  }

 private:
  store_internal::PgConnection& conn_;
};

}  // namespace sbx::controller
