// The audit log's SQL (Store::AppendAudit, ListAudit, ExpireAudit, and the records the object
// writes append in their own transactions: object_writes.h), written once for SqliteStore and
// PostgresStore as usage_ledger.h is: the table is the same on both (SQLite's migration 8,
// PostgreSQL's 6) and the statements differ only in their placeholders.
//
// Ids are assigned as MAX(id) + 1 inside a write transaction that every audited write holds
// exclusively (SQLite's BEGIN IMMEDIATE; PostgreSQL's revision row lock, which AppendAudit takes
// too), so ids ascend in commit order and a reader that remembers the last id it saw (sbxd
// --audit-log) misses none. ExpireAudit never deletes the newest record, so ids never restart.
//
// A template over the store, which befriends it and calls it with its mutex held (inside a
// transaction where one is needed); ExportTo and ImportFrom copy the records with their ids and
// times (store_copier.h). Module-private to controller/store.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/rfc3339.h"
#include "controller/base/sha256.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/internal/sql_param.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// The table, the same DDL on both databases. A migration that has shipped is never edited.
inline constexpr std::string_view kAuditTable = R"sql(
-- The audit log (DESIGN §8.3): one append-only row per audited write; never a secret or a body.
CREATE TABLE audit (
  id BIGINT NOT NULL PRIMARY KEY,
  time_ms BIGINT NOT NULL,
  actor TEXT NOT NULL,
  role TEXT NOT NULL,
  verb TEXT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  resource_version_before BIGINT NOT NULL,
  resource_version_after BIGINT NOT NULL,
  result TEXT NOT NULL,
  source TEXT NOT NULL,
  spec_digest TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (time_ms);
)sql";

inline constexpr std::string_view kAuditColumns =
    "id, time_ms, actor, role, verb, kind, namespace, name, resource_version_before, "
    "resource_version_after, result, source, spec_digest";

// The record of an audited write of `key`; `spec` is the stored spec JSON after it ("" if gone).
inline Store::AuditRecord AuditOfWrite(const WriteAudit& who, std::string verb,
                                       const ObjectKey& key, int64_t before, int64_t after,
                                       std::string result, const std::string& spec) {
  Store::AuditRecord r = AuditOf(who, key, std::move(result));
  r.verb = std::move(verb);
  r.resource_version_before = before;
  r.resource_version_after = after;
  r.spec_digest = spec.empty() ? "" : "sha256:" + Sha256Hex(spec);
  return r;
}

// After a failed audited write (kOk does nothing): one record per object it tried to write,
// its result the error code's name, each appended in a transaction of its own. Best effort: the
// failure is already the caller's answer, and a database that is down records nothing. Not for
// kAborted: a compare-and-swap conflict is the signal to read again and retry, which every
// read-modify-write caller does, so it refused nothing.
inline void AuditFailedWrite(Store& store, const std::optional<WriteAudit>& who,
                             const std::vector<ObjectKey>& keys, const Status& status) {
  if (status.ok() || status.code() == api::StatusCode::kAborted || !who || !who->record_failures) {
    return;
  }
  for (const ObjectKey& key : keys) {
    static_cast<void>(store.AppendAudit(AuditOfWrite(
        *who, who->verb, key, 0, 0, std::string(api::StatusCodeName(status.code())), "")));
  }
}

// AuditFailedWrite for an Apply of `objects` (a dry run writes nothing, so records nothing).
inline void AuditFailedApply(Store& store, const std::vector<Object>& objects,
                             const ApplyOptions& options, const Status& status) {
  if (options.dry_run) {
    return;
  }
  std::vector<ObjectKey> keys;
  keys.reserve(objects.size());
  for (const Object& object : objects) {
    keys.push_back(api::KeyOf(object));
  }
  AuditFailedWrite(store, options.audit, keys, status);
}

template <typename Db>
class AuditLog {
 public:
  using Row = typename Db::CopyRow;

  // Appends `r` with the next id and the store's time. Requires the write lock (see the top).
  static Status Insert(Db& db, const Store::AuditRecord& r) {
    Store::AuditRecord stamped = r;
    stamped.time_ms = api::UnixMillis(db.clock_.Now());
    return InsertRow(db, stamped, "(SELECT COALESCE(MAX(id), 0) + 1 FROM audit)");
  }
  // Writes `r` as it is, id and time kept: ImportFrom's.
  static Status Import(Db& db, const Store::AuditRecord& r) {
    return InsertRow(db, r, "CAST(" + P(13) + " AS BIGINT)");
  }

  static StatusOr<std::vector<Store::AuditRecord>> List(Db& db, const std::string& database,
                                                        const Store::AuditQuery& q) {
    std::vector<Store::AuditRecord> out;
    RETURN_IF_ERROR(Select(db, database, q, [&](Store::AuditRecord r) {
      out.push_back(std::move(r));
      return api::OkStatus();
    }));
    return out;
  }
  // Every record, oldest first, into `each` (ExportTo's; not held in memory all at once).
  static Status ForEach(Db& db, const std::string& database,
                        const std::function<Status(Store::AuditRecord)>& each) {
    return Select(db, database, {}, each);
  }

  static StatusOr<int64_t> Expire(Db& db, int64_t cutoff_ms) {
    int64_t deleted = 0;
    RETURN_IF_ERROR(db.Query("DELETE FROM audit WHERE time_ms < CAST(" + P(1) +
                                 " AS BIGINT) AND id < (SELECT MAX(id) FROM audit) RETURNING id",
                             {std::to_string(cutoff_ms)}, [&](const Row&) -> Status {
                               ++deleted;
                               return api::OkStatus();
                             }));
    return deleted;
  }

 private:
  static std::string P(int n) { return Db::kParam + std::to_string(n); }

  // `id_sql`: the id's SQL expression (parameter 13 is r.id).
  static Status InsertRow(Db& db, const Store::AuditRecord& r, const std::string& id_sql) {
    std::string values = id_sql + ", CAST(" + P(1) + " AS BIGINT)";
    for (int i = 2; i <= 12; ++i) {
      const bool integer = i == 8 || i == 9;
      values += ", " + (integer ? "CAST(" + P(i) + " AS BIGINT)" : P(i));
    }
    std::vector<SqlParam> params = {std::to_string(r.time_ms),
                                    r.actor,
                                    r.role,
                                    r.verb,
                                    std::string(api::KindName(r.object.kind)),
                                    r.object.namespace_,
                                    r.object.name,
                                    std::to_string(r.resource_version_before),
                                    std::to_string(r.resource_version_after),
                                    r.result,
                                    r.source,
                                    r.spec_digest};
    if (id_sql.find(P(13)) != std::string::npos) {
      params.push_back(std::to_string(r.id));
    }
    return db.Query(
        "INSERT INTO audit (" + std::string(kAuditColumns) + ") VALUES (" + values + ")", params,
        nullptr);
  }

  static Status Select(Db& db, const std::string& database, const Store::AuditQuery& q,
                       const std::function<Status(Store::AuditRecord)>& each) {
    return db.Query(
        "SELECT " + std::string(kAuditColumns) + " FROM audit WHERE id > CAST(" + P(1) +
            " AS BIGINT) AND time_ms >= CAST(" + P(2) + " AS BIGINT) AND (" + P(3) +
            " = '' OR actor = " + P(3) + ") ORDER BY id LIMIT CAST(" + P(4) + " AS BIGINT)",
        {std::to_string(q.after_id), std::to_string(q.since_ms), q.actor,
         std::to_string(q.limit > 0 ? q.limit : INT32_MAX)},
        [&](const Row& row) -> Status {
          auto kind = api::ParseKind(row.Text(5));
          if (!kind.ok()) {
            return DataLossError("database " + database + ": audit record of unknown kind '" +
                                 row.Text(5) + "'");
          }
          Store::AuditRecord r;
          r.id = row.Int(0);
          r.time_ms = row.Int(1);
          r.actor = row.Text(2);
          r.role = row.Text(3);
          r.verb = row.Text(4);
          r.object = {*kind, row.Text(6), row.Text(7)};
          r.resource_version_before = row.Int(8);
          r.resource_version_after = row.Int(9);
          r.result = row.Text(10);
          r.source = row.Text(11);
          r.spec_digest = row.Text(12);
          return each(std::move(r));
        });
  }
};

}  // namespace sbx::controller::store_internal
