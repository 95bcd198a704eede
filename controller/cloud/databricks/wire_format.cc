#include "controller/cloud/databricks/wire_format.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "controller/cloud/http/json_fields.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::databricks {

using api::InternalError;
using api::InvalidArgumentError;
using http::BodyExcerpt;
using http::FieldError;
using http::Find;
using http::GetBool;
using http::GetOptProtoInt64;
using http::GetString;

namespace {

using json = nlohmann::json;

constexpr std::string_view kStatePrefix = "SANDBOX_STATE_";
constexpr std::string_view kExecPrefix = "EXECUTE_COMMAND_STATUS_";

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
  const json* v = http::GetObject(obj, key, path);
  return v == nullptr ? kEmpty : *v;
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
  s.custom_tags = http::GetStringMap(metadata, "custom_tags", path + ".metadata.");
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
  c.pid = GetOptProtoInt64(j, "pid", path + ".");
  c.finished = GetBool(j, "finished", path + ".");
  if (auto code = GetOptProtoInt64(j, "exit_code", path + ".")) {
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
  if (s == "UNSPECIFIED") {
    return SandboxState::kUnspecified;
  }
  if (s == "PENDING") {
    return SandboxState::kPending;
  }
  if (s == "RUNNING") {
    return SandboxState::kRunning;
  }
  if (s == "STOPPING") {
    return SandboxState::kStopping;
  }
  if (s == "STOPPED") {
    return SandboxState::kStopped;
  }
  return SandboxState::kUnknown;
}

ExecStatus ParseExecStatus(std::string_view raw) {
  if (!raw.starts_with(kExecPrefix)) {
    return ExecStatus::kUnknown;
  }
  const std::string_view s = raw.substr(kExecPrefix.size());
  if (s == "COMPLETED") {
    return ExecStatus::kCompleted;
  }
  if (s == "FAILED") {
    return ExecStatus::kFailed;
  }
  if (s == "TIMED_OUT") {
    return ExecStatus::kTimedOut;
  }
  return ExecStatus::kUnknown;
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
    if (auto code = GetOptProtoInt64(j, "exit_code", "$.")) {
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

}  // namespace sbx::controller::databricks
