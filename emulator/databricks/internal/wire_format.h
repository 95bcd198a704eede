// The Databricks Sandbox API wire format as the emulator speaks it
// (reference/databricks-sandbox-api.md §2, §3, §8): sandbox states, the error shape, protobuf
// JSON durations ("900s", "0.300s"), RFC 3339 times, page tokens, request bodies. Module-private
// to emulator/databricks.
//
// Thread-safety: stateless free functions.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "emulator/databricks/databricks_emulator.h"
#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::databricks {

using json = nlohmann::json;
using Duration = DatabricksEmulator::Duration;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

enum class SandboxState { kPending, kRunning, kStopping, kStopped };

std::string_view StateName(SandboxState s);  // "SANDBOX_STATE_RUNNING", …

// A 4xx/5xx answer in the Databricks error shape (§8.1).
struct ApiError {
  int status;
  std::string error_code;
  std::string message;
  std::optional<std::chrono::seconds> retry_after;
  std::optional<json> detail;  // one more google.rpc detail (e.g. QuotaFailure), after RequestInfo
};

ApiError BadParam(std::string message);  // 400 INVALID_PARAMETER_VALUE
ApiError NotFound(std::string message);  // 404 NOT_FOUND
ApiError SandboxNotFound(const std::string& id);

// protobuf JSON Duration: "<seconds>[.frac]s", not negative. Returns milliseconds.
std::optional<Duration> ParseProtoDuration(const json& j);
std::string FormatDuration(Duration d);
std::string FormatTime(SystemClock::time_point t);  // RFC 3339, Z, milliseconds if any
std::string Hex(std::string_view s);
std::optional<std::string> Unhex(std::string_view s);
// JSON text; invalid UTF-8 (command output) becomes U+FFFD as the API promises (§3).
std::string Dump(const json& j);
HttpResponse Ok(const json& body);

// An empty body is `{}` (Go sends none on start/stop); `null` and non-objects are rejected
// like lakebox does.
std::variant<json, ApiError> ParseObject(const std::string& body);
// ?page_size: absent or 0 → `default_size`, above 1000 → 1000, else 400.
std::variant<int, ApiError> ParsePageSize(const HttpRequest& req, int default_size);

}  // namespace sbx::emulator::internal::databricks
