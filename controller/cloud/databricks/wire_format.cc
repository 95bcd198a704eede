#include "controller/cloud/databricks/wire_format.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace sbx::controller::databricks {

using api::CancelledError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::UnauthenticatedError;
namespace {

using json = nlohmann::json;

constexpr std::string_view kStatePrefix = "SANDBOX_STATE_";
constexpr std::string_view kExecPrefix = "EXECUTE_COMMAND_STATUS_";

// Thrown inside this file only, turned into a Status by Decode*; carries a field path.
struct FieldError {
  std::string message;
};

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) {
    return nullptr;
  }
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

std::string GetString(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return "";
  }
  if (!v->is_string()) {
    throw FieldError{path + key + ": expected a string"};
  }
  return v->get<std::string>();
}

bool GetBool(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return false;
  }
  if (!v->is_boolean()) {
    throw FieldError{path + key + ": expected a boolean"};
  }
  return v->get<bool>();
}

// int64 in proto3 JSON: a number or a decimal string.
std::optional<int64_t> GetInt64(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::trunc(d) == d) {
      return static_cast<int64_t>(d);
    }
  }
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) {
      return static_cast<int64_t>(n);
    }
  }
  throw FieldError{path + key + ": expected an integer"};
}

std::optional<std::chrono::seconds> GetDuration(const json& obj, const char* key,
                                                const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (!v->is_string()) {
    throw FieldError{path + key + ": expected a duration string like \"900s\""};
  }
  auto d = ParseDuration(v->get<std::string>());
  if (!d.ok()) {
    throw FieldError{path + key + ": " + d.status().message()};
  }
  return *d;
}

const json& GetObjectOrEmpty(const json& obj, const char* key, const std::string& path) {
  static const json kEmpty = json::object();
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return kEmpty;
  }
  if (!v->is_object()) {
    throw FieldError{path + key + ": expected an object"};
  }
  return *v;
}

Sandbox SandboxFromJson(const json& j, const std::string& path) {
  if (!j.is_object()) {
    throw FieldError{path + ": expected an object"};
  }
  Sandbox s;
  s.name = GetString(j, "name", path + ".");
  constexpr std::string_view kNamePrefix = "sandboxes/";
  if (s.name.starts_with(kNamePrefix)) {
    s.sandbox_id = s.name.substr(kNamePrefix.size());
  }
  s.display_name = GetString(j, "display_name", path + ".");
  const json& spec = GetObjectOrEmpty(j, "spec", path + ".");
  const json& compute = GetObjectOrEmpty(spec, "compute", path + ".spec.");
  s.inactivity_timeout = GetDuration(compute, "inactivity_timeout", path + ".spec.compute.");
  const json& environment = GetObjectOrEmpty(spec, "environment", path + ".spec.");
  s.image_uri = GetString(environment, "image_uri", path + ".spec.environment.");
  const json& metadata = GetObjectOrEmpty(j, "metadata", path + ".");
  const json& tags = GetObjectOrEmpty(metadata, "custom_tags", path + ".metadata.");
  for (const auto& [k, v] : tags.items()) {
    if (!v.is_string()) {
      throw FieldError{path + ".metadata.custom_tags." + k + ": expected a string"};
    }
    s.custom_tags[k] = v.get<std::string>();
  }
  const json& status = GetObjectOrEmpty(j, "status", path + ".");
  s.state_raw = GetString(status, "state", path + ".status.");
  s.state = ParseSandboxState(s.state_raw);
  s.create_time = GetString(j, "create_time", path + ".");
  s.update_time = GetString(j, "update_time", path + ".");
  return s;
}

Command CommandFromJson(const json& j, const std::string& path) {
  if (!j.is_object()) {
    throw FieldError{path + ": expected an object"};
  }
  Command c;
  c.command_id = GetString(j, "command_id", path + ".");
  c.cmd = GetString(j, "cmd", path + ".");
  if (const json* args = Find(j, "args")) {
    if (!args->is_array()) {
      throw FieldError{path + ".args: expected an array"};
    }
    for (const auto& a : *args) {
      if (!a.is_string()) {
        throw FieldError{path + ".args: expected strings"};
      }
      c.args.push_back(a.get<std::string>());
    }
  }
  c.pid = GetInt64(j, "pid", path + ".");
  c.finished = GetBool(j, "finished", path + ".");
  if (auto code = GetInt64(j, "exit_code", path + ".")) {
    c.exit_code = static_cast<int>(*code);
  }
  return c;
}

// Parses `body` and runs `fn` on it, turning every failure into kInternal with an excerpt.
template <typename T, typename Fn>
StatusOr<T> Decode(std::string_view body, const char* what, Fn fn) {
  try {
    const json j = json::parse(body);
    return fn(j);
  } catch (const FieldError& e) {
    return InternalError(std::string("unexpected ") + what + " in response: " + e.message);
  } catch (const std::exception& e) {
    return InternalError(std::string("response is not a valid ") + what + " (" + BodyExcerpt(body) +
                         ")");
  }
}

}  // namespace

std::string FormatDuration(std::chrono::seconds d) { return std::to_string(d.count()) + "s"; }

StatusOr<std::chrono::seconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("bad duration \"" + BodyExcerpt(text, 40) +
                                "\" (want e.g. \"900s\")");
  };
  if (text.size() < 2 || text.back() != 's') {
    return bad();
  }
  const std::string number(text.substr(0, text.size() - 1));
  size_t i = (number[0] == '-' || number[0] == '+') ? 1 : 0;
  bool digits = false;
  bool dot = false;
  for (; i < number.size(); ++i) {
    if (number[i] >= '0' && number[i] <= '9') {
      digits = true;
    } else if (number[i] == '.' && !dot) {
      dot = true;
    } else {
      return bad();
    }
  }
  if (!digits) {
    return bad();
  }
  const double seconds = std::strtod(number.c_str(), nullptr);
  if (!std::isfinite(seconds) || std::fabs(seconds) > 315576000000.0) {  // protobuf's range
    return bad();
  }
  return std::chrono::seconds(std::llround(seconds));
}

SandboxState ParseSandboxState(std::string_view raw) {
  if (raw.empty()) {
    return SandboxState::kUnspecified;
  }
  if (!raw.starts_with(kStatePrefix)) {
    return SandboxState::kUnknown;
  }
  const std::string_view s = raw.substr(kStatePrefix.size());
  if (s == "UNSPECIFIED") return SandboxState::kUnspecified;
  if (s == "PENDING") return SandboxState::kPending;
  if (s == "RUNNING") return SandboxState::kRunning;
  if (s == "STOPPING") return SandboxState::kStopping;
  if (s == "STOPPED") return SandboxState::kStopped;
  return SandboxState::kUnknown;
}

ExecStatus ParseExecStatus(std::string_view raw) {
  if (!raw.starts_with(kExecPrefix)) {
    return ExecStatus::kUnknown;
  }
  const std::string_view s = raw.substr(kExecPrefix.size());
  if (s == "COMPLETED") return ExecStatus::kCompleted;
  if (s == "FAILED") return ExecStatus::kFailed;
  if (s == "TIMED_OUT") return ExecStatus::kTimedOut;
  return ExecStatus::kUnknown;
}

std::string UrlEscape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string EncodeSandboxForCreate(const Sandbox& desired) {
  json j = json::object();
  if (!desired.display_name.empty()) {
    j["display_name"] = desired.display_name;
  }
  if (desired.inactivity_timeout) {
    j["spec"]["compute"]["inactivity_timeout"] = FormatDuration(*desired.inactivity_timeout);
  }
  if (!desired.image_uri.empty()) {
    j["spec"]["environment"]["image_uri"] = desired.image_uri;
  }
  if (!desired.custom_tags.empty()) {
    j["metadata"]["custom_tags"] = desired.custom_tags;
  }
  return j.dump();
}

StatusOr<std::string> EncodeSandboxUpdate(const Sandbox& desired,
                                          const std::vector<std::string>& mask) {
  if (mask.empty()) {
    return InvalidArgumentError("update mask is empty");
  }
  json j = json::object();
  for (const std::string& path : mask) {
    if (path == kMaskDisplayName) {
      j["display_name"] = desired.display_name;
    } else if (path == kMaskInactivityTimeout) {
      // An unset timeout sends no value for the masked path: the server resets it.
      if (desired.inactivity_timeout) {
        j["spec"]["compute"]["inactivity_timeout"] = FormatDuration(*desired.inactivity_timeout);
      }
    } else if (path == "spec.environment.image_uri") {
      j["spec"]["environment"]["image_uri"] = desired.image_uri;
    } else if (path == "metadata.custom_tags") {
      j["metadata"]["custom_tags"] = desired.custom_tags;
    } else {
      return InvalidArgumentError("update mask path \"" + BodyExcerpt(path, 80) +
                                  "\" is not supported");
    }
  }
  return j.dump();
}

std::string EncodeExecRequest(const ExecRequest& request) {
  json j = json::object();
  j["cmd"] = request.cmd;
  if (!request.args.empty()) {
    j["args"] = request.args;
  }
  if (!request.envs.empty()) {
    j["envs"] = request.envs;
  }
  j["execution_timeout"] = FormatDuration(request.execution_timeout);
  // Invalid UTF-8 must not make dump() throw; replace it like the server does.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<Sandbox> DecodeSandbox(std::string_view body) {
  return Decode<Sandbox>(body, "sandbox", [](const json& j) { return SandboxFromJson(j, "$"); });
}

StatusOr<SandboxPage> DecodeSandboxPage(std::string_view body) {
  return Decode<SandboxPage>(body, "sandbox list", [](const json& j) {
    if (!j.is_object()) {
      throw FieldError{"$: expected an object"};
    }
    SandboxPage page;
    if (const json* list = Find(j, "sandboxes")) {
      if (!list->is_array()) {
        throw FieldError{"$.sandboxes: expected an array"};
      }
      for (size_t i = 0; i < list->size(); ++i) {
        page.sandboxes.push_back(
            SandboxFromJson((*list)[i], "$.sandboxes[" + std::to_string(i) + "]"));
      }
    }
    page.next_page_token = GetString(j, "next_page_token", "$.");
    return page;
  });
}

StatusOr<ExecResult> DecodeExecResult(std::string_view body) {
  return Decode<ExecResult>(body, "exec result", [](const json& j) {
    if (!j.is_object()) {
      throw FieldError{"$: expected an object"};
    }
    ExecResult r;
    r.command_id = GetString(j, "command_id", "$.");
    r.status = ParseExecStatus(GetString(j, "status", "$."));
    if (auto code = GetInt64(j, "exit_code", "$.")) {
      r.exit_code = static_cast<int>(*code);
    }
    r.stdout_text = GetString(j, "stdout", "$.");
    r.stderr_text = GetString(j, "stderr", "$.");
    r.truncated = GetBool(j, "truncated", "$.");
    return r;
  });
}

StatusOr<std::pair<std::vector<Command>, std::string>> DecodeCommandPage(std::string_view body) {
  using Page = std::pair<std::vector<Command>, std::string>;
  return Decode<Page>(body, "command list", [](const json& j) {
    if (!j.is_object()) {
      throw FieldError{"$: expected an object"};
    }
    Page page;
    if (const json* list = Find(j, "commands")) {
      if (!list->is_array()) {
        throw FieldError{"$.commands: expected an array"};
      }
      for (size_t i = 0; i < list->size(); ++i) {
        page.first.push_back(CommandFromJson((*list)[i], "$.commands[" + std::to_string(i) + "]"));
      }
    }
    page.second = GetString(j, "next_page_token", "$.");
    return page;
  });
}

std::string BodyExcerpt(std::string_view body, size_t max) {
  std::string out;
  const size_t n = std::min(body.size(), max);
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(body[i]);
    out.push_back((c < 0x20 || c == 0x7F) ? ' ' : static_cast<char>(c));
  }
  if (body.size() > max) {
    out += "…";
  }
  return out;
}

}  // namespace sbx::controller::databricks
