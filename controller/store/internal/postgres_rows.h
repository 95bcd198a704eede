// PostgresStore's parameters and transaction, shared by its translation units (postgres_store*.cc,
// internal/sql_store_*.cc): a SqlParam turned into a PgParam, and PostgresStore::Txn. The row
// readers are in store_rows.h (with PgRow).
//
// Thread-safety: ToPgParam is pure; a Txn is used with the store's mutex held. Module-private to
// controller/store.
#pragma once

#include "controller/store/internal/postgres_connection.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/postgres_store.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// A SqlParam as libpq takes it: text format, bytes in binary.
PgParam ToPgParam(const SqlParam& param);

}  // namespace sbx::controller::store_internal

namespace sbx::controller {

// The transaction of internal/sql_store.h (a PgTxn) on the store's query connection.
class PostgresStore::Txn : public store_internal::PgTxn {
 public:
  explicit Txn(PostgresStore& store) : PgTxn(*store.conn_) {}
};

}  // namespace sbx::controller
