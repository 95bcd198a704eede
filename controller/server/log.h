// sbx::log — the controller's structured logging facade (spdlog underneath, kept out of this
// header). A line is an event name plus key=value fields:
//
//   text: 2026-11-29T10:00:00.123Z INFO reconciled kind=Sandbox name=default/a result=done
//   json: {"ts":"2026-11-29T10:00:00.123Z","level":"info","event":"reconciled","kind":"Sandbox"}
//
// Text values that are empty or hold spaces, quotes, '=' or control characters are written
// double-quoted with C-style escapes; JSON lines are one object per line, escaped by
// nlohmann::json. Init() also makes this the format of spdlog's default logger, so the clients'
// free-text spdlog::debug(...) lines come out in the same format (as the event) and go through
// the same redaction.
//
// Redaction: RegisterSecret(value) makes every later line scrubbed of `value` (and of its text-
// and JSON-escaped forms) — replaced by "[REDACTED]" — just before the line is written, whatever
// put it there (a field, an event, an error message from a library).
//
// Why a process-wide logger (the one exception to STYLE rule 12): spdlog's registry and default
// logger are themselves process-global, and libraries we link log through them; a logger
// threaded through every constructor would still not capture those lines. The global state is
// minimal (format, level, sink, secrets) and lives in log.cc.
//
// Thread-safety: every function may be called from any thread at any time. Before Init() lines
// go to stderr in text format at level info. Init* may be called again (the last call wins).
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace sbx::log {

enum class Format { kText, kJson };
enum class Level { kDebug, kInfo, kWarn, kError };

struct Field {
  std::string_view key;  // a bare word: [A-Za-z0-9_.-]
  std::string value;
};

// Process-wide: lines at `level` or above go to stderr in `format`.
void Init(Format format, Level level);
// Like Init, but every line (without its trailing newline) goes to `sink` instead of stderr.
// For tests; the sink is called under the logger's lock, one line at a time.
void InitWithSink(Format format, Level level, std::function<void(std::string_view line)> sink);

// Whether a line at `level` would be written (to skip building expensive fields).
bool Enabled(Level level);
void Write(Level level, std::string_view event, std::initializer_list<Field> fields = {});

inline void Debug(std::string_view e, std::initializer_list<Field> f = {}) {
  Write(Level::kDebug, e, f);
}
inline void Info(std::string_view e, std::initializer_list<Field> f = {}) {
  Write(Level::kInfo, e, f);
}
inline void Warn(std::string_view e, std::initializer_list<Field> f = {}) {
  Write(Level::kWarn, e, f);
}
inline void Error(std::string_view e, std::initializer_list<Field> f = {}) {
  Write(Level::kError, e, f);
}

// "debug", "info", "warn" (or "warning"), "error"; case-insensitive. nullopt otherwise.
std::optional<Level> ParseLevel(std::string_view text);
// "text" or "json"; case-insensitive. nullopt otherwise.
std::optional<Format> ParseFormat(std::string_view text);

// Registers a secret value that must never appear in output: every line is scrubbed of all
// registered values (replaced by "[REDACTED]") before it is written. Empty values are ignored.
// Registered values stay registered for the life of the process. Thread-safe.
void RegisterSecret(std::string value);

// `text` scrubbed of every registered secret, the way lines are: for whatever else sbxd writes
// where people look (status and events in the store go through ScrubbingStore with this).
// Terminates whatever the secrets are (one that is part of "[REDACTED]" included). Thread-safe.
std::string Scrub(std::string_view text);

}  // namespace sbx::log
