// The usage ledger's SQL (Store::RecordUsage, Store::SumUsage, and its part of ExportTo and
// ImportFrom), written once for SqliteStore and PostgresStore: the table is the same on both
// (migration 6 of sqlite_schema.cc and postgres_schema.cc), and the statements differ only in
// their placeholders. Parameters go as text and are cast where a column is an integer (both
// databases read CAST(… AS BIGINT)).
//
// A template over the store, which befriends it and calls it with its mutex held (inside a
// transaction where one is needed); uses Db::Query, Db::CopyRow and Db::kParam as
// StoreCopier does (store_copier.h). Thread-safety: as the store's methods that call it.
// Module-private to controller/store.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "api/usage.h"
#include "controller/store/internal/object_row.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// The table, the same DDL on both databases (BIGINT is an INTEGER in SQLite): SQLite's
// migration 6 and PostgreSQL's 4. A migration that has shipped is never edited.
// Besides a row per ended AgentTask attempt, a Sandbox writes a row per counted piece of its
// RUNNING time (kind "Sandbox", task_uid its uid, attempt the piece's start in epoch ms,
// compute_millis its length, phase "", task_finished 0): see SandboxCompute.
inline constexpr std::string_view kUsageLedgerTable = R"sql(
-- The usage ledger (DESIGN §8.2): one row per ended attempt of an AgentTask, kept when the task
-- is deleted; summed per workspace and period (Store::SumUsage).
CREATE TABLE usage_records (
  workspace TEXT NOT NULL,
  task_uid TEXT NOT NULL,
  attempt BIGINT NOT NULL,
  kind TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  finished_at_ms BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL,
  compute_millis BIGINT NOT NULL,
  task_finished BIGINT NOT NULL,
  phase TEXT NOT NULL,
  PRIMARY KEY (task_uid, attempt)
);
CREATE INDEX usage_records_by_workspace ON usage_records (workspace, finished_at_ms);
)sql";

inline constexpr std::string_view kUsageColumns =
    "workspace, task_uid, attempt, kind, namespace, name, finished_at_ms, input_tokens, "
    "cached_input_tokens, output_tokens, reasoning_tokens, compute_millis, task_finished, phase";

template <typename Db>
class UsageLedger {
 public:
  using Row = typename Db::CopyRow;

  // `on_conflict`: " ON CONFLICT (task_uid, attempt) DO NOTHING" for RecordUsage; "" for an
  // import, where a duplicate is a broken source.
  static Status Insert(Db& db, const Store::UsageRecord& r, std::string_view on_conflict) {
    std::string values;
    for (int i = 1; i <= 14; ++i) {
      const bool integer = i == 3 || (i >= 7 && i <= 13);
      values += (i > 1 ? ", " : "") + (integer ? "CAST(" + P(i) + " AS BIGINT)" : P(i));
    }
    return db.Query("INSERT INTO usage_records (" + std::string(kUsageColumns) + ") VALUES (" +
                        values + ")" + std::string(on_conflict),
                    {r.workspace, r.task_uid, std::to_string(r.attempt),
                     std::string(api::KindName(r.task.kind)), r.task.namespace_, r.task.name,
                     std::to_string(r.finished_at_ms), std::to_string(r.input_tokens),
                     std::to_string(r.cached_input_tokens), std::to_string(r.output_tokens),
                     std::to_string(r.reasoning_tokens), std::to_string(r.compute_millis),
                     r.task_finished ? "1" : "0", r.phase},
                    nullptr);
  }

  static StatusOr<api::UsageSum> Sum(Db& db, const std::string& workspace, int64_t from_ms,
                                     int64_t to_ms) {
    api::UsageSum sum;
    RETURN_IF_ERROR(db.Query(
        "SELECT " + Total("input_tokens") + ", " + Total("cached_input_tokens") + ", " +
            Total("output_tokens") + ", " + Total("reasoning_tokens") + ", " + SandboxCompute() +
            ", " + Total("task_finished") + " FROM usage_records WHERE workspace = " + P(1) +
            " AND finished_at_ms >= CAST(" + P(2) + " AS BIGINT) AND finished_at_ms < CAST(" +
            P(3) + " AS BIGINT)",
        {workspace, std::to_string(from_ms), std::to_string(to_ms)}, [&](const Row& row) -> Status {
          sum = {row.Int(0), row.Int(1), row.Int(2), row.Int(3), row.Int(4), row.Int(5)};
          return api::OkStatus();
        }));
    return sum;
  }

  static StatusOr<std::vector<Store::UsageTotal>> Totals(Db& db) {
    std::vector<Store::UsageTotal> out;
    RETURN_IF_ERROR(db.Query(
        "SELECT workspace, phase, " + Total("input_tokens") + ", " + Total("cached_input_tokens") +
            ", " + Total("output_tokens") + ", " + Total("reasoning_tokens") + ", " +
            SandboxCompute() + ", " + Total("task_finished") +
            " FROM usage_records GROUP BY workspace, phase ORDER BY workspace, phase",
        {}, [&](const Row& row) -> Status {
          out.push_back({row.Text(0),
                         row.Text(1),
                         {row.Int(2), row.Int(3), row.Int(4), row.Int(5), row.Int(6), row.Int(7)}});
          return api::OkStatus();
        }));
    return out;
  }

  // Every record, by (task_uid, attempt), into `each`.
  static Status ForEach(Db& db, const std::string& database,
                        const std::function<Status(const Store::UsageRecord&)>& each) {
    return db.Query(
        "SELECT " + std::string(kUsageColumns) + " FROM usage_records ORDER BY task_uid, attempt",
        {}, [&](const Row& row) -> Status {
          auto kind = api::ParseKind(row.Text(3));
          if (!kind.ok()) {
            return DataLossError("database " + database + ": usage record of unknown kind '" +
                                 row.Text(3) + "'");
          }
          Store::UsageRecord r;
          r.workspace = row.Text(0);
          r.task_uid = row.Text(1);
          r.attempt = row.Int(2);
          r.task = {*kind, row.Text(4), row.Text(5)};
          r.finished_at_ms = row.Int(6);
          r.input_tokens = row.Int(7);
          r.cached_input_tokens = row.Int(8);
          r.output_tokens = row.Int(9);
          r.reasoning_tokens = row.Int(10);
          r.compute_millis = row.Int(11);
          r.task_finished = row.Int(12) != 0;
          r.phase = row.Text(13);
          return each(r);
        });
  }

 private:
  static std::string P(int n) { return Db::kParam + std::to_string(n); }
  // Compute is what the workspace's sandboxes ran: the rows of kind Sandbox (RUNNING pieces,
  // controller/reconcilers/sandbox_usage.h). A task's row keeps its own compute for the record,
  // but tasks sharing a sandbox overlap, so those are not summed.
  static std::string SandboxCompute() {
    return "CAST(COALESCE(SUM(CASE WHEN kind = 'Sandbox' THEN compute_millis ELSE 0 END), 0) AS "
           "BIGINT)";
  }
  // PostgreSQL sums a BIGINT column to NUMERIC: cast back, on both.
  static std::string Total(std::string_view column) {
    return "CAST(COALESCE(SUM(" + std::string(column) + "), 0) AS BIGINT)";
  }
};

}  // namespace sbx::controller::store_internal
