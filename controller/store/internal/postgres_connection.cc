#include "controller/store/internal/postgres_connection.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace sbx::controller::store_internal {

// Defined in sqlite_statement.cc: a short, single-line description of a statement.
std::string Describe(std::string_view sql);

namespace {

// Replaces the value that starts at `pos` (up to the first of `stops`, or the end) by "***".
void RedactFrom(std::string& s, size_t pos, std::string_view stops) {
  size_t end = s.find_first_of(stops, pos);
  if (end == std::string::npos) {
    end = s.size();
  }
  s.replace(pos, end - pos, "***");
}

}  // namespace

std::string RedactDatabaseUrl(std::string_view url) {
  std::string s(url);
  // postgres://user:password@host/… — the userinfo ends at the last '@' before the path.
  if (const size_t scheme = s.find("://"); scheme != std::string::npos) {
    const size_t start = scheme + 3;
    size_t path = s.find_first_of("/?", start);
    if (path == std::string::npos) {
      path = s.size();
    }
    const size_t at = s.rfind('@', path);
    if (at != std::string::npos && at >= start) {
      const size_t colon = s.find(':', start);
      if (colon != std::string::npos && colon < at) {
        s.replace(colon + 1, at - colon - 1, "***");
      }
    }
  }
  // password=… as a URI query parameter or a key/value keyword (possibly quoted).
  for (size_t pos = 0; (pos = s.find("password", pos)) != std::string::npos;) {
    size_t eq = pos + std::strlen("password");
    while (eq < s.size() && s[eq] == ' ') {
      ++eq;
    }
    if (eq >= s.size() || s[eq] != '=') {
      pos = eq;
      continue;
    }
    size_t value = eq + 1;
    while (value < s.size() && s[value] == ' ') {
      ++value;
    }
    if (value < s.size() && s[value] == '\'') {
      size_t close = value + 1;
      while (close < s.size() && s[close] != '\'') {
        close += s[close] == '\\' ? 2 : 1;
      }
      s.replace(value, std::min(close + 1, s.size()) - value, "***");
    } else {
      RedactFrom(s, value, " &");
    }
    pos = value + 3;
  }
  return s;
}

PgParam P(std::string_view text) { return PgParam{std::string(text), false}; }
PgParam P(int64_t value) { return PgParam{std::to_string(value), false}; }
PgParam Bytes(std::string_view bytes) { return PgParam{std::string(bytes), true}; }
PgParam NullIfEmpty(std::string_view text) {
  return text.empty() ? PgParam{} : PgParam{std::string(text), false};
}
PgParam Null() { return PgParam{}; }

// ---- PgResult ---------------------------------------------------------------------------------

PgResult::PgResult(pg_result* result) : result_(result) {}
PgResult::PgResult(PgResult&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}
PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    PQclear(result_);
    result_ = std::exchange(other.result_, nullptr);
  }
  return *this;
}
PgResult::~PgResult() { PQclear(result_); }

int PgResult::Rows() const { return PQntuples(result_); }
bool PgResult::IsNull(int row, int column) const { return PQgetisnull(result_, row, column) != 0; }
std::string PgResult::Text(int row, int column) const {
  return std::string(PQgetvalue(result_, row, column),
                     static_cast<size_t>(PQgetlength(result_, row, column)));
}
int64_t PgResult::Int(int row, int column) const {
  if (IsNull(row, column)) {
    return 0;
  }
  return std::strtoll(PQgetvalue(result_, row, column), nullptr, 10);
}
std::string PgResult::Bytes(int row, int column) const {
  if (IsNull(row, column)) {
    return "";
  }
  size_t length = 0;
  unsigned char* bytes = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(result_, row, column)), &length);
  if (bytes == nullptr) {
    return "";
  }
  std::string out(reinterpret_cast<const char*>(bytes), length);
  PQfreemem(bytes);
  return out;
}
int64_t PgResult::Affected() const { return std::strtoll(PQcmdTuples(result_), nullptr, 10); }

// ---- PgConnection -----------------------------------------------------------------------------

namespace {

// NOTICEs ("relation already exists, skipping") would go to stderr; the store has nothing to
// tell anyone about them.
void IgnoreNotice(void*, const char*) {}

// libpq's messages can quote the connection string's host and user but never its password;
// redact anyway, so that no future libpq wording can leak it.
std::string ConnectionMessage(pg_conn* conn) {
  std::string message = conn != nullptr ? PQerrorMessage(conn) : "out of memory";
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  // One line: libpq puts a newline and a tab before its hints.
  std::string line;
  for (char c : message) {
    if (c == '\n' || c == '\t') {
      c = ' ';
    }
    if (c == ' ' && !line.empty() && line.back() == ' ') {
      continue;
    }
    line.push_back(c);
  }
  return line;
}

}  // namespace

PgConnection::PgConnection(pg_conn* conn, std::string redacted_url)
    : conn_(conn), redacted_url_(std::move(redacted_url)) {}

PgConnection::~PgConnection() { PQfinish(conn_); }

StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& url) {
  std::string redacted = RedactDatabaseUrl(url);
  pg_conn* conn = PQconnectdb(url.c_str());
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    const std::string message = RedactDatabaseUrl(ConnectionMessage(conn));
    PQfinish(conn);
    if (message.find("password authentication failed") != std::string::npos ||
        message.find("no password supplied") != std::string::npos) {
      return api::UnauthenticatedError("database " + redacted + ": " + message +
                                       " (give the password in the URL or through PGPASSFILE)");
    }
    return api::UnavailableError("cannot connect to database " + redacted + ": " + message);
  }
  PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);
  return std::unique_ptr<PgConnection>(new PgConnection(conn, std::move(redacted)));
}

Status PgConnection::EnsureConnected() {
  if (PQstatus(conn_) == CONNECTION_OK) {
    return api::OkStatus();
  }
  if (in_transaction_) {
    return api::UnavailableError(
        "database " + redacted_url_ +
        ": connection lost in a transaction: " + RedactDatabaseUrl(ConnectionMessage(conn_)));
  }
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return api::UnavailableError("database " + redacted_url_ + ": reconnecting failed: " +
                                 RedactDatabaseUrl(ConnectionMessage(conn_)));
  }
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  return api::OkStatus();
}

Status PgConnection::ErrorFrom(pg_result* result, std::string_view sql) const {
  const char* state_field =
      result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = state_field != nullptr ? state_field : "";
  std::string detail = result != nullptr ? PQresultErrorMessage(result) : "";
  if (detail.empty()) {
    detail = ConnectionMessage(conn_);
  }
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) {
    detail.pop_back();
  }
  detail = RedactDatabaseUrl(detail);
  const std::string where = "database " + redacted_url_ + ": " + Describe(sql) + ": " + detail +
                            (state.empty() ? "" : " (SQLSTATE " + state + ")");
  const std::string klass = state.substr(0, 2);
  if (state.empty() || klass == "08" || klass == "57" || state == "40001" || state == "40P01" ||
      state == "55P03") {
    // Connection trouble, shutdown, serialization failure, deadlock, lock not available:
    // transient; the caller may retry.
    return api::UnavailableError(where);
  }
  if (klass == "28") {
    return api::UnauthenticatedError(where);
  }
  if (state == "42501") {
    return api::PermissionDeniedError(where);
  }
  if (klass == "53") {
    return api::ResourceExhaustedError(where);
  }
  if (klass == "3D" || klass == "42") {
    return api::FailedPreconditionError(where);
  }
  if (klass == "XX") {
    return Status(api::StatusCode::kDataLoss, where);
  }
  return api::InternalError(where);
}

StatusOr<PgResult> PgConnection::Exec(std::string_view sql, const std::vector<PgParam>& params) {
  RETURN_IF_ERROR(EnsureConnected());
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  values.reserve(params.size());
  for (const PgParam& p : params) {
    values.push_back(p.value ? p.value->data() : nullptr);
    lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
    formats.push_back(p.binary ? 1 : 0);
  }
  const std::string text(sql);
  // Without parameters, the simple protocol: it takes several statements (the migrations).
  pg_result* raw = params.empty()
                       ? PQexec(conn_, text.c_str())
                       : PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), nullptr,
                                      values.data(), lengths.data(), formats.data(), 0);
  const ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Status error = ErrorFrom(raw, sql);
    PQclear(raw);
    return error;
  }
  return PgResult(raw);
}

Status PgConnection::Begin() {
  RETURN_IF_ERROR(Exec("BEGIN").status());
  in_transaction_ = true;
  return api::OkStatus();
}

Status PgConnection::Commit() {
  Status status = Exec("COMMIT").status();
  in_transaction_ = false;
  return status;
}

void PgConnection::Rollback() {
  if (!in_transaction_) {
    return;
  }
  if (PQstatus(conn_) == CONNECTION_OK) {
    PQclear(PQexec(conn_, "ROLLBACK"));
  }
  in_transaction_ = false;
}

int PgConnection::Socket() const { return PQsocket(conn_); }

StatusOr<int> PgConnection::DrainNotifications() {
  if (PQconsumeInput(conn_) == 0) {
    return api::UnavailableError("database " + redacted_url_ + ": listening connection lost: " +
                                 RedactDatabaseUrl(ConnectionMessage(conn_)));
  }
  int drained = 0;
  while (PGnotify* notify = PQnotifies(conn_)) {
    PQfreemem(notify);
    ++drained;
  }
  return drained;
}

}  // namespace sbx::controller::store_internal
