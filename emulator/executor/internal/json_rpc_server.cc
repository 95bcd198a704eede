#include "emulator/executor/internal/json_rpc_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <utility>

#include "api/base64.h"

extern char** environ;

namespace sbx::emulator::internal::executor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kSandboxHome[] = "/home/sandbox-agent";

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// "file:///abs/path" → "/abs/path"; nullopt for anything else (codex rejects native paths).
std::optional<std::string> PathFromFileUri(const std::string& uri) {
  const std::string prefix = "file://";
  if (uri.rfind(prefix, 0) != 0) {
    return std::nullopt;
  }
  std::string rest = uri.substr(prefix.size());
  if (rest.empty() || rest[0] != '/') {
    return std::nullopt;  // host part unsupported
  }
  return PercentDecode(rest);
}

std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += kHex[rng() % 16];
  }
  return out;
}

std::string RewriteSandboxHome(std::string path) {
  const char* home = std::getenv("SBX_SANDBOX_HOME");
  if (home == nullptr || std::string(home) == kSandboxHome) {
    return path;
  }
  const std::string prefix = kSandboxHome;
  if (path == prefix || path.rfind(prefix + "/", 0) == 0) {
    path = home + path.substr(prefix.size());
  }
  return path;
}

}  // namespace

JsonRpcServer::JsonRpcServer(std::function<void(const std::string&)> send)
    : send_(std::move(send)),
      session_id_(RandomHex(8) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" + RandomHex(4) +
                  "-" + RandomHex(12)) {}

JsonRpcServer::~JsonRpcServer() { KillAll(); }

// Handles one text frame. False: the connection must be closed (non-JSON or an unexpected
// notification, like codex).
bool JsonRpcServer::OnFrame(const std::string& text) {
  json msg = json::parse(text, nullptr, false);
  if (msg.is_discarded() || !msg.is_object()) {
    return false;
  }
  if (!msg.contains("method")) {
    return true;  // a response to nothing we sent: ignore
  }
  std::string method = msg.value("method", "");
  json params = msg.value("params", json::object());
  if (!msg.contains("id")) {
    if (method == "initialized") {
      initialized_ = true;
      return true;
    }
    return false;
  }
  json id = msg["id"];
  if (method == "initialize") {
    initialize_called_ = true;
    Reply(id, InitializeResult());
    return true;
  }
  if (!initialize_called_) {
    Error(id, -32600, "client must call initialize before using environment info methods");
    return true;
  }
  if (method == "process/start") {
    ProcessStart(id, params);
  } else if (method == "process/terminate") {
    std::string pid = params.value("processId", "");
    bool running = Signal(pid, SIGKILL);
    Reply(id, {{"running", running}});
  } else if (method == "process/signal") {
    std::string pid = params.value("processId", "");
    Signal(pid, params.value("signal", "") == "interrupt" ? SIGINT : SIGTERM);
    Reply(id, json::object());
  } else if (method == "environment/info") {
    Reply(id, InitializeResult()["environmentInfo"]);
  } else {
    Error(id, -32601, "exec-server stub does not implement `" + method + "` yet");
  }
  return true;
}

void JsonRpcServer::KillAll() {
  std::list<std::shared_ptr<Child>> children;
  {
    std::lock_guard lock(mu_);
    children.swap(children_);
  }
  for (auto& c : children) {
    if (c->pid > 0) {
      ::kill(-c->pid, SIGKILL);
    }
  }
  for (auto& c : children) {
    if (c->reader.joinable()) {
      c->reader.join();
    }
  }
}

nlohmann::json JsonRpcServer::InitializeResult() {
  const char* home = std::getenv("HOME");
  char cwd[4096];
  std::string here = ::getcwd(cwd, sizeof(cwd)) ? cwd : "/";
  return {{"sessionId", session_id_},
          {"environmentInfo",
           {{"shell", {{"name", "bash"}, {"path", "/bin/bash"}}},
            {"executorVersion", "sbx-standin-executor 0.1.0"},
            {"providerId", "sbx-emulator"},
            {"cwd", "file://" + here},
            {"userHomeDir", std::string("file://") + (home ? home : "/")},
            {"platformOs", "linux"},
            {"prependPathDirs", json::array()},
            {"temporaryDirectories", json::array({"file:///tmp"})},
            {"tempDir", "file:///tmp"},
            {"capabilities", json::object()}}}};
}

void JsonRpcServer::Reply(const json& id, const json& result) {
  send_(json{{"id", id}, {"result", result}}.dump());
}

void JsonRpcServer::Error(const json& id, int code, const std::string& message) {
  send_(json{{"id", id}, {"error", {{"code", code}, {"message", message}}}}.dump());
}

void JsonRpcServer::Notify(const std::string& method, const json& params) {
  send_(json{{"method", method}, {"params", params}}.dump());
}

void JsonRpcServer::ProcessStart(const json& id, const json& params) {
  auto missing = [&](const char* field) {
    Error(id, -32602, std::string("missing field `") + field + "`");
  };
  if (!params.is_object()) {
    return Error(id, -32602, "invalid type: expected struct");
  }
  if (!params.contains("processId")) {
    return missing("processId");
  }
  if (!params.contains("argv")) {
    return missing("argv");
  }
  if (!params.contains("cwd")) {
    return missing("cwd");
  }
  if (!params["processId"].is_string() || !params["argv"].is_array() || params["argv"].empty() ||
      !params["cwd"].is_string()) {
    return Error(id, -32602, "invalid type in process/start params");
  }
  auto cwd = PathFromFileUri(params["cwd"].get<std::string>());
  if (!cwd) {
    return Error(id, -32602, "invalid URI: relative URL without a base");
  }
  std::vector<std::string> argv;
  for (const auto& a : params["argv"]) {
    if (!a.is_string()) {
      return Error(id, -32602, "argv must be strings");
    }
    argv.push_back(a.get<std::string>());
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) {
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  env.erase("CODEX_API_KEY");  // scope the key to the executor (reference pitfall)
  if (params.contains("env") && params["env"].is_object()) {
    for (const auto& [k, v] : params["env"].items()) {
      if (v.is_string()) {
        env[k] = v.get<std::string>();
      }
    }
  }
  std::string process_id = params["processId"].get<std::string>();
  {
    std::lock_guard lock(mu_);
    for (const auto& c : children_) {
      if (c->process_id == process_id) {
        return Error(id, -32600, "process id " + process_id + " is already in use");
      }
    }
  }
  auto child = Spawn(process_id, argv, RewriteSandboxHome(*cwd), env);
  Reply(id, {{"processId", process_id}, {"sandboxType", "none"}});
  if (child->pid < 0) {
    // exec failed before anything ran: report it like a shell would (127).
    Notify("process/output", {{"processId", process_id},
                              {"seq", 1},
                              {"stream", "stderr"},
                              {"chunk", api::Base64Encode(spawn_error_ + "\n")}});
    Notify("process/exited",
           {{"processId", process_id}, {"seq", 2}, {"exitCode", 127}, {"sandboxDenied", false}});
    Notify("process/closed", {{"processId", process_id}, {"seq", 3}});
    return;
  }
  Child* raw = child.get();
  {
    std::lock_guard lock(mu_);
    children_.push_back(child);
  }
  raw->reader = std::thread([this, raw] { Pump(*raw); });
}

std::shared_ptr<JsonRpcServer::Child> JsonRpcServer::Spawn(
    const std::string& process_id, const std::vector<std::string>& argv, const std::string& cwd,
    const std::map<std::string, std::string>& env) {
  auto child = std::make_shared<Child>();
  child->process_id = process_id;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    spawn_error_ = "cannot create pipes";
    return child;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) {
    env_strings.emplace_back(k).append("=").append(v);
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);
  for (const auto& e : env_strings) {
    cenv.push_back(const_cast<char*>(e.c_str()));
  }
  cenv.push_back(nullptr);
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    spawn_error_ = "cannot create pipes";
    return child;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (::chdir(cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(status_pipe[1], &e, sizeof(e));
      ::_exit(127);
    }
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    int e = errno;
    (void)!::write(status_pipe[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(status_pipe[1]);
  int child_errno = 0;
  ssize_t got = pid > 0 ? ::read(status_pipe[0], &child_errno, sizeof(child_errno)) : -1;
  ::close(status_pipe[0]);
  if (pid < 0 || got > 0) {
    spawn_error_ = pid < 0 ? "fork failed"
                           : std::string("cannot start ") + argv[0] + " in " + cwd + ": " +
                                 std::strerror(child_errno);
    if (pid > 0) {
      ::waitpid(pid, nullptr, 0);
    }
    ::close(out[0]);
    ::close(err[0]);
    return child;
  }
  child->pid = pid;
  child->out_fd = out[0];
  child->err_fd = err[0];
  return child;
}

void JsonRpcServer::Pump(Child& c) {
  int64_t seq = 0;
  std::optional<int> exit_code;
  std::optional<std::chrono::steady_clock::time_point> drain_until;
  int fds[2] = {c.out_fd, c.err_fd};
  const char* names[2] = {"stdout", "stderr"};
  char buf[16384];
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2];
    int n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) {
        p[n] = {fds[i], POLLIN, 0};
        which[n++] = i;
      }
    }
    int r = ::poll(p, n, 50);
    if (r > 0) {
      for (int k = 0; k < n; ++k) {
        if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) {
          continue;
        }
        ssize_t got = ::read(p[k].fd, buf, sizeof(buf));
        if (got > 0) {
          Notify("process/output", {{"processId", c.process_id},
                                    {"seq", ++seq},
                                    {"stream", names[which[k]]},
                                    {"chunk", api::Base64Encode(std::string(buf, size_t(got)))}});
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(fds[which[k]]);
          fds[which[k]] = -1;
        }
      }
    }
    if (!exit_code) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        // Descendants may hold the pipes open: drain briefly, then stop waiting for them.
        drain_until = std::chrono::steady_clock::now() + 200ms;
      }
    } else if (drain_until && std::chrono::steady_clock::now() > *drain_until) {
      break;
    }
  }
  for (int fd : fds) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  if (!exit_code) {
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  {
    std::lock_guard lock(mu_);
    c.pid = -c.pid;  // reaped: never signal this pid (group) again
  }
  Notify("process/exited", {{"processId", c.process_id},
                            {"seq", ++seq},
                            {"exitCode", *exit_code},
                            {"sandboxDenied", false}});
  Notify("process/closed", {{"processId", c.process_id}, {"seq", ++seq}});
}

bool JsonRpcServer::Signal(const std::string& process_id, int sig) {
  std::lock_guard lock(mu_);
  for (const auto& c : children_) {
    if (c->process_id == process_id && c->pid > 0) {
      ::kill(-c->pid, sig);
      return true;
    }
  }
  return false;
}

}  // namespace sbx::emulator::internal::executor
