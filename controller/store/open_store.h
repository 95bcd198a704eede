// OpenStore: the one place that turns a --db / SBX_DB value into a Store, used by sbxd and
// sbxctl. `postgres://…` or `postgresql://…` opens a PostgresStore (DESIGN §7.4); anything else
// is an SQLite file path (or ":memory:") for SqliteStore, the embedded default.
//
// Thread-safety: a free function; the store it returns is as thread-safe as its type says.
#pragma once

#include <memory>
#include <string>

#include "controller/store/sqlite_store.h"
#include "controller/store/store.h"

namespace sbx::controller {

// Opens the store `db` names. The SQLite options' clock, max_events_per_object and
// task_log_max_bytes apply to both stores; busy_timeout and poll_interval to SQLite only.
// Errors as SqliteStore::Open / PostgresStore::Open; a PostgreSQL URL's password never
// appears in them.
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& db,
                                           const SqliteStoreOptions& options = {});

// `db` as it may be logged or shown: a PostgreSQL URL with its password redacted, a path as is.
std::string DisplayDatabase(const std::string& db);

}  // namespace sbx::controller
