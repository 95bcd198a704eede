#include "emulator/databricks/internal/exec_api.h"

#include <limits>
#include <stdexcept>

namespace sbx::emulator::internal::databricks {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSystemPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos;
       pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace

ExecApi::ExecApi(State& state) : state_(state) {}

internal::SpawnSpec ExecApi::MakeSpawnSpec(const SandboxRec& sb, const std::string& cmd,
                                           const std::vector<std::string>& args,
                                           const std::map<std::string, std::string>& envs) const {
  const bool ns = state_.isolation == internal::Isolation::kMountNamespace;
  const fs::path dir = state_.SandboxDir(sb.id);
  const std::string real_home = (dir / "home").string();
  const std::string real_tmp = (dir / "tmp").string();
  std::map<std::string, std::string> env;
  env["PATH"] = std::string(ns ? std::string(kNamespaceBinDir) : state_.bin_dir.string()) + ":" +
                std::string(kSystemPath);
  env["LANG"] = "C.UTF-8";
  env["SBX_SANDBOX_HOME"] = ns ? std::string(kSandboxHome) : real_home;
  if (!ns) {
    env["TMPDIR"] = real_tmp;
  }
  if (!state_.options.exec_home_env.empty()) {
    env["HOME"] = state_.options.exec_home_env;
  }
  for (const auto& [k, v] : envs) {
    env[k] = v;  // envs are merged over the default env
  }
  env[std::string(kMarkerName)] = state_.instance_id + "/" + sb.id;  // cannot be overridden

  internal::SpawnSpec spec;
  spec.cmd = cmd;
  spec.args = args;
  if (!ns) {
    // Without a namespace, /home/sandbox-agent is rewritten to the sandbox's real home.
    ReplaceAll(spec.cmd, kSandboxHome, real_home);
    for (auto& a : spec.args) {
      ReplaceAll(a, kSandboxHome, real_home);
    }
    for (auto& [k, v] : env) {
      if (k != kMarkerName && k != "SBX_SANDBOX_HOME") {
        ReplaceAll(v, kSandboxHome, real_home);
      }
    }
  }
  spec.search_path = env["PATH"];
  for (const auto& [k, v] : env) {
    std::string& entry = spec.env.emplace_back(k);
    entry.append("=").append(v);
  }
  spec.isolation = state_.isolation;
  spec.cwd = ns ? std::string(kSandboxHome) : real_home;
  if (ns) {
    spec.binds = {{real_home, std::string(kSandboxHome)},
                  {state_.bin_dir.string(), std::string(kNamespaceBinDir)},
                  {real_tmp, "/tmp"}};
    // codex is "built in" on the service: the bin dir's programs also appear in
    // /usr/local/bin, which every PATH has, also a login shell's that /etc/profile reset.
    spec.overlays = {{std::string(kNamespaceBinDir), std::string(kBuiltinBinDir)}};
  }
  return spec;
}

HttpResponse ExecApi::ExecSync(const std::string& id, const HttpRequest& req) {
  auto parsed = ParseObject(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return state_.ErrorResponse(*e);
  }
  const json& body = std::get<json>(parsed);
  if (!body.contains("cmd") || !body["cmd"].is_string() || body["cmd"].get<std::string>().empty()) {
    return state_.ErrorResponse(BadParam("cmd is required and must be a non-empty string"));
  }
  std::string cmd = body["cmd"].get<std::string>();
  std::vector<std::string> args;
  if (body.contains("args")) {
    if (!body["args"].is_array()) {
      return state_.ErrorResponse(BadParam("args must be an array of strings"));
    }
    for (const auto& a : body["args"]) {
      if (!a.is_string()) {
        return state_.ErrorResponse(BadParam("args must be an array of strings"));
      }
      args.push_back(a.get<std::string>());
    }
  }
  std::map<std::string, std::string> envs;
  if (body.contains("envs")) {
    if (!body["envs"].is_object()) {
      return state_.ErrorResponse(BadParam("envs must be an object of strings"));
    }
    for (auto it = body["envs"].begin(); it != body["envs"].end(); ++it) {
      if (!it.value().is_string() || it.key().empty() || it.key().find('=') != std::string::npos) {
        return state_.ErrorResponse(BadParam("envs must map variable names to strings"));
      }
      envs[it.key()] = it.value().get<std::string>();
    }
  }
  Duration timeout = state_.options.default_execution_timeout;
  if (body.contains("execution_timeout")) {
    // The reference says INVALID_ARGUMENT with an undocumented HTTP status; Databricks REST
    // reports invalid arguments as 400 INVALID_PARAMETER_VALUE, so that is what we send.
    auto d = ParseProtoDuration(body["execution_timeout"]);
    if (!d) {
      return state_.ErrorResponse(
          BadParam("execution_timeout must be a non-negative duration like \"30s\""));
    }
    if (d->count() > 0) {
      timeout = std::min(*d, state_.options.max_execution_timeout);
    }
  }

  std::string command_id = state_.RandomHex(16);
  std::optional<internal::Process> process;
  {
    std::lock_guard lock(state_.mu);
    if (state_.stopped) {
      return state_.ErrorResponse(
          {503, "TEMPORARILY_UNAVAILABLE", "Emulator is shutting down", {}});
    }
    SandboxRec* sb = state_.FindLocked(id);
    if (sb == nullptr || sb->deleting) {
      return state_.ErrorResponse(SandboxNotFound(id));
    }
    // §13.3: undocumented. We answer 400 INVALID_STATE (an error_code the SDKs map to
    // BadRequest) rather than block or auto-start.
    if (sb->state != SandboxState::kRunning) {
      return state_.ErrorResponse({400,
                                   "INVALID_STATE",
                                   "Sandbox 'sandboxes/" + id + "' is not running (state " +
                                       std::string(StateName(sb->state)) + ")",
                                   {}});
    }
    std::vector<std::string> env_names;
    env_names.reserve(envs.size());
    for (const auto& [k, v] : envs) {
      env_names.push_back(k);
    }
    state_.exec_log.push_back({id, command_id, cmd, args, env_names});
    // Spawned under the lock, so a concurrent stop either sees this pid or refuses us first.
    process.emplace(internal::Process::Spawn(MakeSpawnSpec(*sb, cmd, args, envs)));
    CommandRec rec{command_id, cmd, args, {}, false, {}};
    if (process->pid() > 0) {
      rec.pid = process->pid();
      sb->exec_pgids.insert(process->pid());
    }
    sb->commands.push_back(rec);
    ++sb->running_execs;
    if (state_.options.exec_counts_as_activity) {
      sb->last_activity = SteadyClock::now();
    }
  }

  internal::ProcessResult result = process->Wait(timeout, state_.options.exec_output_cap_bytes);
  if (!result.started && !process->fork_error().empty()) {
    result.spawn_error = process->fork_error();
  }
  pid_t pgid = process->pid();
  process.reset();

  {
    std::lock_guard lock(state_.mu);
    auto it = state_.sandboxes.find(id);
    if (it != state_.sandboxes.end()) {
      SandboxRec& sb = it->second;
      sb.exec_pgids.erase(pgid);
      --sb.running_execs;
      if (state_.options.exec_counts_as_activity) {
        sb.last_activity = SteadyClock::now();
      }
      for (auto& c : sb.commands) {
        if (c.command_id == command_id) {
          c.finished = true;
          c.exit_code = result.exit_code;
          if (!result.started) {
            c.pid.reset();
          }
        }
      }
      state_.cv.notify_all();
    }
  }

  json out = {{"command_id", command_id}};
  if (!result.started) {
    out["status"] = "EXECUTE_COMMAND_STATUS_FAILED";
    out["stderr"] = "failed to start '" + cmd + "': " + result.spawn_error;
    return Ok(out);
  }
  out["status"] =
      result.timed_out ? "EXECUTE_COMMAND_STATUS_TIMED_OUT" : "EXECUTE_COMMAND_STATUS_COMPLETED";
  if (result.exit_code) {
    out["exit_code"] = *result.exit_code;
  }
  // proto3 JSON: empty strings and false booleans are omitted.
  if (!result.stdout_text.empty()) {
    out["stdout"] = result.stdout_text;
  }
  if (!result.stderr_text.empty()) {
    out["stderr"] = result.stderr_text;
  }
  if (result.truncated) {
    out["truncated"] = true;
  }
  return Ok(out);
}

HttpResponse ExecApi::ListCommands(const std::string& id, const HttpRequest& req) {
  auto size = ParsePageSize(req, std::numeric_limits<int>::max());  // all if no size given
  if (auto* e = std::get_if<ApiError>(&size)) {
    return state_.ErrorResponse(*e);
  }
  int page_size = std::get<int>(size);
  std::size_t offset = 0;
  if (auto t = req.query.find("page_token"); t != req.query.end() && !t->second.empty()) {
    try {
      std::size_t used = 0;
      offset = std::stoul(t->second.substr(1), &used);
      if (t->second[0] != 'c' || used + 1 != t->second.size()) {
        throw std::invalid_argument("x");
      }
    } catch (const std::exception&) {
      return state_.ErrorResponse(BadParam("Invalid page_token"));
    }
  }
  std::lock_guard lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  if (sb == nullptr) {
    return state_.ErrorResponse(SandboxNotFound(id));
  }
  if (state_.options.list_commands_counts_as_activity && sb->state == SandboxState::kRunning) {
    sb->last_activity = SteadyClock::now();
    state_.cv.notify_all();
  }
  json commands = json::array();
  std::size_t i = offset;
  for (; i < sb->commands.size() && static_cast<int>(commands.size()) < page_size; ++i) {
    const CommandRec& c = sb->commands[i];
    json j = {{"command_id", c.command_id}, {"cmd", c.cmd}};
    if (!c.args.empty()) {
      j["args"] = c.args;
    }
    if (c.pid) {
      j["pid"] = std::to_string(*c.pid);  // proto3 JSON int64 is a string
    }
    if (c.finished) {
      j["finished"] = true;
    }
    if (c.finished && c.exit_code) {
      j["exit_code"] = *c.exit_code;
    }
    commands.push_back(j);
  }
  json out = json::object();
  if (!commands.empty()) {
    out["commands"] = commands;
  }
  if (i < sb->commands.size()) {
    out["next_page_token"] = "c" + std::to_string(i);
  }
  return Ok(out);
}

}  // namespace sbx::emulator::internal::databricks
