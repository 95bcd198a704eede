#include "controller/server/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/text.h"

namespace sbx::log {
namespace {

constexpr std::string_view kRedacted = "[REDACTED]";

// The process-wide state (see the header for why there is any). Shared by the sink, which
// spdlog's registry keeps alive until after static destructors have run, so the sink holds a
// shared_ptr to it rather than referring to a static that may already be gone.
struct State {
  std::mutex mu;
  Format format = Format::kText;               // Guarded by mu.
  std::function<void(std::string_view)> sink;  // Guarded by mu. Null: stderr.
  std::vector<std::string> secrets;            // Guarded by mu. Longest first.
  std::shared_ptr<spdlog::logger> logger;      // Set once by Install().
};

// Structured fields travel from Write() to the sink through this thread-local: spdlog's
// synchronous logger calls the sink on the calling thread, and lines logged straight through
// spdlog (by libraries) find it null and are written as a free-text event.
struct PendingFields {
  std::initializer_list<Field> fields;
};
thread_local const PendingFields* t_pending = nullptr;

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// spdlog's trace folds into debug and critical into error.
std::string_view LevelName(spdlog::level::level_enum level, Format format) {
  const bool text = format == Format::kText;
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return text ? "DEBUG" : "debug";
    case spdlog::level::info:
      return text ? "INFO" : "info";
    case spdlog::level::warn:
      return text ? "WARN" : "warn";
    default:
      return text ? "ERROR" : "error";
  }
}

std::string FormatTimestamp(std::chrono::system_clock::time_point t) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const int millis = static_cast<int>(ms - static_cast<int64_t>(secs) * 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

// C-style escapes for the text format: backslash, double quote and control characters.
std::string EscapeText(std::string_view s, bool escape_quote) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += escape_quote ? "\\\"" : "\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out;
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) {
    return true;
  }
  return std::any_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return c == ' ' || c == '"' || c == '=' || c == '\\' || u < 0x20 || u == 0x7f;
  });
}

std::string TextValue(std::string_view v) {
  if (!NeedsQuotes(v)) {
    return std::string(v);
  }
  return "\"" + EscapeText(v, /*escape_quote=*/true) + "\"";
}

// A JSON string literal. Invalid UTF-8 is replaced rather than thrown on: a log line must never
// take the process down.
std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RenderLine(const spdlog::details::log_msg& msg, Format format,
                       const PendingFields* pending) {
  const std::string_view event(msg.payload.data(), msg.payload.size());
  std::string line;
  if (format == Format::kText) {
    line = FormatTimestamp(msg.time);
    line += ' ';
    line += LevelName(msg.level, format);
    line += ' ';
    line += EscapeText(event, /*escape_quote=*/false);
    if (pending != nullptr) {
      for (const Field& f : pending->fields) {
        line += ' ';
        line += f.key;
        line += '=';
        line += TextValue(f.value);
      }
    }
  } else {
    line = "{\"ts\":\"" + FormatTimestamp(msg.time) + "\",\"level\":\"";
    line += LevelName(msg.level, format);
    line += "\",\"event\":";
    line += JsonString(event);
    if (pending != nullptr) {
      for (const Field& f : pending->fields) {
        line += ',';
        line += JsonString(f.key);
        line += ':';
        line += JsonString(f.value);
      }
    }
    line += '}';
  }
  return line;
}

// Every occurrence of every secret is found in the ORIGINAL text and the (possibly overlapping)
// spans are replaced once each, so a secret that is part of "[REDACTED]" cannot make this loop,
// and a secret found inside another's span is redacted with it.
std::string ScrubText(std::string_view text, const std::vector<std::string>& secrets) {
  std::vector<std::pair<size_t, size_t>> spans;  // [begin, end)
  for (const std::string& secret : secrets) {
    for (size_t p = text.find(secret); p != std::string_view::npos; p = text.find(secret, p + 1)) {
      spans.emplace_back(p, p + secret.size());
    }
  }
  if (spans.empty()) {
    return std::string(text);
  }
  std::sort(spans.begin(), spans.end());
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  for (size_t i = 0; i < spans.size();) {
    size_t begin = spans[i].first;
    size_t end = spans[i].second;
    for (++i; i < spans.size() && spans[i].first < end; ++i) {
      end = std::max(end, spans[i].second);
    }
    out.append(text.substr(copied, begin - copied));
    out.append(kRedacted);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

class Sink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit Sink(std::shared_ptr<State> state) : state_(std::move(state)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const PendingFields* pending = t_pending;
    std::lock_guard lock(state_->mu);
    std::string line = RenderLine(msg, state_->format, pending);
    line = ScrubText(line, state_->secrets);
    if (state_->sink) {
      state_->sink(line);
      return;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override {}

 private:
  std::shared_ptr<State> state_;
};

const std::shared_ptr<State>& SharedState() {
  static const std::shared_ptr<State> state = std::make_shared<State>();
  return state;
}

// Installs our logger as spdlog's default, once. Replacing spdlog's default logger races with a
// thread logging through it, so it is done once, at the first Init/Write, and later Inits only
// change the shared state; call Init first thing in main.
spdlog::logger& Logger() {
  static std::once_flag once;
  std::call_once(once, [] {
    State& state = *SharedState();
    state.logger = std::make_shared<spdlog::logger>("sbx", std::make_shared<Sink>(SharedState()));
    state.logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(state.logger);
  });
  return *SharedState()->logger;
}

void Configure(Format format, Level level, std::function<void(std::string_view)> sink) {
  spdlog::logger& logger = Logger();
  {
    State& state = *SharedState();
    std::lock_guard lock(state.mu);
    state.format = format;
    state.sink = std::move(sink);
  }
  logger.set_level(ToSpd(level));
}

}  // namespace

void Init(Format format, Level level) { Configure(format, level, nullptr); }

void InitWithSink(Format format, Level level, std::function<void(std::string_view line)> sink) {
  Configure(format, level, std::move(sink));
}

bool Enabled(Level level) { return Logger().should_log(ToSpd(level)); }

void Write(Level level, std::string_view event, std::initializer_list<Field> fields) {
  spdlog::logger& logger = Logger();
  if (!logger.should_log(ToSpd(level))) {
    return;
  }
  const PendingFields pending{fields};
  t_pending = &pending;
  // spdlog catches and reports exceptions from sinks itself; nothing escapes log().
  logger.log(ToSpd(level), spdlog::string_view_t(event.data(), event.size()));
  t_pending = nullptr;
}

std::optional<Level> ParseLevel(std::string_view text) {
  const std::string s = api::Lower(text);
  if (s == "debug") {
    return Level::kDebug;
  }
  if (s == "info") {
    return Level::kInfo;
  }
  if (s == "warn" || s == "warning") {
    return Level::kWarn;
  }
  if (s == "error") {
    return Level::kError;
  }
  return std::nullopt;
}

std::optional<Format> ParseFormat(std::string_view text) {
  const std::string s = api::Lower(text);
  if (s == "text") {
    return Format::kText;
  }
  if (s == "json") {
    return Format::kJson;
  }
  return std::nullopt;
}

std::string Scrub(std::string_view text) {
  State& state = *SharedState();
  std::lock_guard lock(state.mu);
  return ScrubText(text, state.secrets);
}

void RegisterSecret(std::string value) {
  if (value.empty()) {
    return;
  }
  // The value as it would appear inside a quoted text value and inside a JSON string: a secret
  // holding a quote or a backslash is written escaped, and must be scrubbed in that form too.
  std::vector<std::string> forms = {EscapeText(value, /*escape_quote=*/true)};
  const std::string json = JsonString(value);
  forms.push_back(json.substr(1, json.size() - 2));
  forms.insert(forms.begin(), std::move(value));
  State& state = *SharedState();
  std::lock_guard lock(state.mu);
  for (std::string& form : forms) {
    if (std::find(state.secrets.begin(), state.secrets.end(), form) == state.secrets.end()) {
      state.secrets.push_back(std::move(form));
    }
  }
  // Longest first, so a secret that contains another is scrubbed whole.
  std::stable_sort(state.secrets.begin(), state.secrets.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

}  // namespace sbx::log
