#include "emulator/databricks/internal/wire_format.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace sbx::emulator::internal::databricks {
namespace {

constexpr int kMaxPageSize = 1000;

}  // namespace

std::string_view StateName(SandboxState s) {
  switch (s) {
    case SandboxState::kPending:
      return "SANDBOX_STATE_PENDING";
    case SandboxState::kRunning:
      return "SANDBOX_STATE_RUNNING";
    case SandboxState::kStopping:
      return "SANDBOX_STATE_STOPPING";
    case SandboxState::kStopped:
      return "SANDBOX_STATE_STOPPED";
  }
  return "SANDBOX_STATE_UNSPECIFIED";
}

ApiError BadParam(std::string message) {
  return {400, "INVALID_PARAMETER_VALUE", std::move(message), {}};
}
ApiError NotFound(std::string message) { return {404, "NOT_FOUND", std::move(message), {}}; }

ApiError SandboxNotFound(const std::string& id) {
  return NotFound("Sandbox 'sandboxes/" + id + "' does not exist");
}

// protobuf JSON Duration: "<seconds>[.frac]s", not negative. Returns milliseconds.
std::optional<Duration> ParseProtoDuration(const json& j) {
  if (!j.is_string()) {
    return std::nullopt;
  }
  const std::string s = j.get<std::string>();
  if (s.size() < 2 || s.back() != 's') {
    return std::nullopt;
  }
  std::string_view num(s.data(), s.size() - 1);
  std::size_t dot = num.find('.');
  std::string_view whole = num.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : num.substr(dot + 1);
  if (whole.empty() || whole.size() > 12 || frac.size() > 9) {
    return std::nullopt;
  }
  if (dot != std::string_view::npos && frac.empty()) {
    return std::nullopt;
  }
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(whole) || !digits(frac)) {
    return std::nullopt;
  }
  std::int64_t ms = std::stoll(std::string(whole)) * 1000;
  std::string f(frac);
  f.resize(3, '0');
  ms += std::stoll(f);
  return Duration(ms);
}

std::string FormatDuration(Duration d) {
  std::int64_t ms = d.count();
  char buf[48];
  if (ms % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%03llds", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000));
  }
  return buf;
}

std::string FormatTime(SystemClock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (ms % 1000 != 0) {
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(ms % 1000));
    out += buf;
  }
  return out + "Z";
}

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view s) {
  if (s.size() % 2 != 0) {
    return std::nullopt;
  }
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    auto v = [](char c) -> int {
      if (c >= '0' && c <= '9') {
        return c - '0';
      }
      if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
      }
      return -1;
    };
    int hi = v(s[i]), lo = v(s[i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string Dump(const json& j) {
  // Command output may hold invalid UTF-8: the API promises U+FFFD for it (§3).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse Ok(const json& body) { return {200, "application/json", {}, Dump(body)}; }

// An empty body is `{}` (Go sends none on start/stop); `null` and non-objects are rejected
// like lakebox does.
std::variant<json, ApiError> ParseObject(const std::string& body) {
  if (Trim(body).empty()) {
    return json::object();
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return BadParam("Malformed JSON request body");
  }
  if (!j.is_object()) {
    return BadParam("Request body must be a JSON object");
  }
  return j;
}

std::variant<int, ApiError> ParsePageSize(const HttpRequest& req, int default_size) {
  auto it = req.query.find("page_size");
  if (it == req.query.end() || it->second.empty()) {
    return default_size;
  }
  try {
    std::size_t used = 0;
    long v = std::stol(it->second, &used);
    if (used != it->second.size() || v < 0) {
      throw std::invalid_argument("bad");
    }
    if (v == 0) {
      return default_size;
    }
    return static_cast<int>(std::min<long>(v, kMaxPageSize));
  } catch (const std::exception&) {
    return BadParam("page_size must be a non-negative integer");
  }
}

}  // namespace sbx::emulator::internal::databricks
