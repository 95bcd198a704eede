// PgConnection: one libpq connection with the few operations PostgresStore needs — parameterised
// statements in text format (bytea parameters in binary), results read by row and column, the
// mapping of SQLSTATE codes to Status codes, and reconnecting a broken connection between
// transactions. Also RedactDatabaseUrl, which every message naming the database goes through.
//
// Thread-safety: none; PostgresStore guards each connection with its own mutex. Module-private
// to controller/store (the only place that includes <libpq-fe.h>).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"

struct pg_conn;
struct pg_result;

namespace sbx::controller::store_internal {

using api::Status;
using api::StatusOr;

// `url` with its password replaced by "***": the userinfo password of a postgres:// URL, a
// `password=` query parameter, or a `password=` keyword of a key/value connection string.
std::string RedactDatabaseUrl(std::string_view url);

// One statement parameter: SQL NULL, text, or bytes (sent in binary, for bytea columns).
struct PgParam {
  std::optional<std::string> value;
  bool binary = false;
};
PgParam P(std::string_view text);
PgParam P(int64_t value);
PgParam Bytes(std::string_view bytes);
PgParam NullIfEmpty(std::string_view text);
PgParam Null();

// A statement's result; owns the PGresult.
class PgResult {
 public:
  explicit PgResult(pg_result* result);
  PgResult(PgResult&&) noexcept;
  PgResult& operator=(PgResult&&) noexcept;
  ~PgResult();

  int Rows() const;
  bool IsNull(int row, int column) const;
  std::string Text(int row, int column) const;
  int64_t Int(int row, int column) const;
  // A bytea column (text format, hex-escaped) decoded to its bytes.
  std::string Bytes(int row, int column) const;
  // Rows changed by INSERT/UPDATE/DELETE.
  int64_t Affected() const;

 private:
  pg_result* result_;
};

// Row `row` of a result, read like a statement at its current step: the shape the row readers
// of store_rows.h take. Valid while the result is.
class PgRow {
 public:
  PgRow(const PgResult& result, int row) : result_(result), row_(row) {}
  bool IsNull(int column) const { return result_.IsNull(row_, column); }
  std::string Text(int column) const { return result_.Text(row_, column); }
  int64_t Int(int column) const { return result_.Int(row_, column); }
  std::string Bytes(int column) const { return result_.Bytes(row_, column); }

 private:
  const PgResult& result_;
  int row_;
};

class PgConnection {
 public:
  // Connects to `url` (a postgres:// URI or key/value string, passed to libpq as is).
  // kUnavailable if the server cannot be reached, kUnauthenticated if it refuses the login;
  // messages name the redacted URL only.
  static StatusOr<std::unique_ptr<PgConnection>> Connect(const std::string& url);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement (several, separated by ';', when `params` is empty); `params` are $1, …
  // Reconnects first if the connection broke and no transaction is open. Errors are mapped from the
  // SQLSTATE (see the .cc) and name the redacted database and a short form of the statement.
  StatusOr<PgResult> Exec(std::string_view sql, const std::vector<PgParam>& params = {});

  // Transactions: Begin runs BEGIN; Commit COMMIT; Rollback ROLLBACK (errors ignored).
  Status Begin();
  Status Commit();
  void Rollback();
  bool in_transaction() const { return in_transaction_; }

  // LISTEN support: the socket to poll(), reading input, and draining notifications. Returns
  // the number of notifications drained; kUnavailable if the connection broke.
  int Socket() const;
  StatusOr<int> DrainNotifications();

  const std::string& redacted_url() const { return redacted_url_; }

 private:
  PgConnection(pg_conn* conn, std::string redacted_url);
  Status ErrorFrom(pg_result* result, std::string_view sql) const;
  Status EnsureConnected();

  pg_conn* conn_;
  const std::string redacted_url_;
  bool in_transaction_ = false;
};

// A transaction on `conn`: rolled back unless committed.
class PgTxn {
 public:
  explicit PgTxn(PgConnection& conn) : conn_(conn) {}
  PgTxn(const PgTxn&) = delete;
  PgTxn& operator=(const PgTxn&) = delete;
  ~PgTxn() { conn_.Rollback(); }
  [[nodiscard]] Status Begin() { return conn_.Begin(); }
  // One snapshot for several reads: REPEATABLE READ.
  [[nodiscard]] Status BeginRead() {
    RETURN_IF_ERROR(Begin());
    return conn_.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").status();
  }
  [[nodiscard]] Status Commit() { return conn_.Commit(); }
  void Rollback() { conn_.Rollback(); }

 private:
  PgConnection& conn_;
};

}  // namespace sbx::controller::store_internal
