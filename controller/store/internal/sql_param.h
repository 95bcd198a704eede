// SqlParam: one statement parameter as the store's SQL written once for both backends passes it
// (Db::Query): text, a 64-bit integer, SQL NULL, or bytes. Each backend binds it in its own way:
// SqliteStore by type (sqlite3_bind_*), PostgresStore as a PgParam (text format; bytes in binary,
// for bytea columns).
//
// Two kinds of bytes, because the SQLite columns differ: Bytes is text that may hold any byte
// (an event's message, a task log entry's text: TEXT in SQLite, bytea in PostgreSQL), Blob is
// binary on both (an artifact's content). Module-private to controller/store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sbx::controller::store_internal {

struct SqlParam {
  enum class Type { kNull, kText, kInt, kBytes, kBlob };

  // Text converts implicitly: most parameters are names and times.
  SqlParam(std::string_view text) : type(Type::kText), value(text) {}  // NOLINT: implicit by design
  SqlParam(const std::string& text)
      : type(Type::kText), value(text) {}                         // NOLINT: implicit by design
  SqlParam(const char* text) : type(Type::kText), value(text) {}  // NOLINT: implicit by design

  static SqlParam Int(int64_t number) {
    SqlParam p(Type::kInt);
    p.number = number;
    return p;
  }
  static SqlParam Null() { return SqlParam(Type::kNull); }
  static SqlParam Bytes(std::string_view bytes) { return SqlParam(Type::kBytes, bytes); }
  static SqlParam Blob(std::string_view bytes) { return SqlParam(Type::kBlob, bytes); }

  Type type;
  std::string value;   // kText, kBytes, kBlob
  int64_t number = 0;  // kInt

 private:
  explicit SqlParam(Type t, std::string_view v = {}) : type(t), value(v) {}
};

}  // namespace sbx::controller::store_internal
