// SqliteStore's statement and transaction handles, shared by its translation units
// (sqlite_store*.cc): SqliteStore::Stmt, a cached prepared statement in use, and SqliteStore::Txn,
// a write transaction or a read snapshot. Both are nested in SqliteStore, so they reach its
// connection and its error mapping; only SqliteStore's .cc files include this header (it includes
// <sqlite3.h>).
//
// Thread-safety: used with SqliteStore::mu_ held, like the connection they wrap.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>
#include <utility>

#include "controller/store/sqlite_store.h"

namespace sbx::controller {

namespace store_internal {
// A short, single-line description of a statement for error messages.
std::string Describe(std::string_view sql);
}  // namespace store_internal

// A cached prepared statement in use; resets it (and its bindings) when it goes out of scope.
class SqliteStore::Stmt {
 public:
  Stmt(const SqliteStore* store, sqlite3_stmt* stmt) : store_(store), stmt_(stmt) {}
  Stmt(Stmt&& other) noexcept
      : store_(other.store_),
        stmt_(std::exchange(other.stmt_, nullptr)),
        bind_rc_(other.bind_rc_) {}
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }

  Stmt& Bind(int index, std::string_view text) {
    Check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& Bind(int index, int64_t value) {
    Check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  Stmt& BindBlob(int index, std::string_view bytes) {
    Check(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
    return *this;
  }
  // Binds NULL for "".
  Stmt& BindOrNull(int index, std::string_view text) {
    if (text.empty()) {
      Check(sqlite3_bind_null(stmt_, index));
      return *this;
    }
    return Bind(index, text);
  }

  // True when a row is available, false when done.
  StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) {
      return store_->Error(bind_rc_, store_internal::Describe(sqlite3_sql(stmt_)));
    }
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) {
      return true;
    }
    if (rc == SQLITE_DONE) {
      return false;
    }
    return store_->Error(rc, store_internal::Describe(sqlite3_sql(stmt_)));
  }
  // Steps to completion, ignoring rows.
  Status Run() {
    for (;;) {
      ASSIGN_OR_RETURN(bool row, Step());
      if (!row) {
        return api::OkStatus();
      }
    }
  }

  std::string Text(int column) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (text == nullptr) {
      return "";
    }
    return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  // A column that may hold any bytes: SQLite keeps them as they are in TEXT and BLOB alike.
  std::string Bytes(int column) const { return Text(column); }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) {
      bind_rc_ = rc;
    }
  }

  const SqliteStore* store_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock up front, so it waits for other
// writers through the busy timeout instead of failing on a lock upgrade). Rolls back unless
// committed.
class SqliteStore::Txn {
 public:
  explicit Txn(SqliteStore& store) : store_(store) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() { Rollback(); }

  // A write transaction: BEGIN IMMEDIATE takes the database's one write lock at once.
  Status Begin() { return Open("BEGIN IMMEDIATE"); }
  // A read snapshot: a deferred transaction (one WAL snapshot; writers are not blocked).
  Status BeginRead() { return Open("BEGIN"); }
  Status Commit() {
    RETURN_IF_ERROR(store_.Exec("COMMIT"));
    open_ = false;
    return api::OkStatus();
  }
  void Rollback() {
    if (open_ && sqlite3_get_autocommit(store_.db_) == 0) {
      (void)store_.Exec("ROLLBACK");
    }
    open_ = false;
  }

 private:
  Status Open(std::string_view begin) {
    RETURN_IF_ERROR(store_.Exec(begin));
    open_ = true;
    return api::OkStatus();
  }

  SqliteStore& store_;
  bool open_ = false;
};

}  // namespace sbx::controller
