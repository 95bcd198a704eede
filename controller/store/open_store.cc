#include "controller/store/open_store.h"

#include "controller/store/postgres_store.h"

namespace sbx::controller {

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& db,
                                           const SqliteStoreOptions& options) {
  if (IsPostgresUrl(db)) {
    PostgresStoreOptions pg;
    pg.clock = options.clock;
    pg.max_events_per_object = options.max_events_per_object;
    pg.task_log_max_bytes = options.task_log_max_bytes;
    ASSIGN_OR_RETURN(std::unique_ptr<PostgresStore> store, PostgresStore::Open(db, pg));
    return std::unique_ptr<Store>(std::move(store));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> store, SqliteStore::Open(db, options));
  return std::unique_ptr<Store>(std::move(store));
}

std::string DisplayDatabase(const std::string& db) {
  return IsPostgresUrl(db) ? RedactDatabaseUrl(db) : db;
}

}  // namespace sbx::controller
