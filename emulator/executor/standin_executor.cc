#include "emulator/executor/standin_executor.h"

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <cpprest/ws_client.h>
#include <fcntl.h>
#include <poll.h>
#include <pplx/threadpool.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "emulator/openai/openai_emulator.h"

extern char** environ;

namespace sbx::emulator {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace wsc = web::websockets::client;

constexpr char kSandboxHome[] = "/home/sandbox-agent";

std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string StatusText(int status) {
  std::string reason = ReasonPhrase(status);
  return std::to_string(status) + (reason.empty() ? "" : " " + reason);
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.pop_back();
  }
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
    ++i;
  }
  return s.substr(i);
}

std::string Base64Encode(const std::string& in) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0;
  int bits = -6;
  for (unsigned char c : in) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out += kChars[(val >> bits) & 0x3F];
      bits -= 6;
    }
  }
  if (bits > -6) {
    out += kChars[((val << 8) >> (bits + 8)) & 0x3F];
  }
  while (out.size() % 4) {
    out += '=';
  }
  return out;
}

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

struct RegistryAnswer {
  int exit_code = 0;  // 0 = ok
  std::string url;
  bool retry = false;  // 503 registration_conflict / 502 authentication_service_unavailable
};

// ---- the JSON-RPC server on one WebSocket ---------------------------------------------------

class Link;

// One child process started by process/start.
struct Child {
  std::string process_id;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::thread reader;
};

// Serves exec-server JSON-RPC on one connection. Outgoing frames go through `send`.
class JsonRpcServer {
 public:
  explicit JsonRpcServer(std::function<void(const std::string&)> send) : send_(std::move(send)) {}
  ~JsonRpcServer() { KillAll(); }

  // Handles one text frame. False: the connection must be closed (non-JSON or an unexpected
  // notification, like codex).
  bool OnFrame(const std::string& text) {
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

  void KillAll() {
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

 private:
  json InitializeResult() {
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

  void Reply(const json& id, const json& result) {
    send_(json{{"id", id}, {"result", result}}.dump());
  }
  void Error(const json& id, int code, const std::string& message) {
    send_(json{{"id", id}, {"error", {{"code", code}, {"message", message}}}}.dump());
  }
  void Notify(const std::string& method, const json& params) {
    send_(json{{"method", method}, {"params", params}}.dump());
  }

  void ProcessStart(const json& id, const json& params) {
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
                                {"chunk", Base64Encode(spawn_error_ + "\n")}});
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

  std::shared_ptr<Child> Spawn(const std::string& process_id, const std::vector<std::string>& argv,
                               const std::string& cwd,
                               const std::map<std::string, std::string>& env) {
    auto child = std::make_shared<Child>();
    child->process_id = process_id;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      spawn_error_ = "cannot create pipes";
      return child;
    }
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) {
      env_strings.push_back(k + "=" + v);
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

  // Streams the child's output until it exited and its pipes are drained, then exited + closed.
  void Pump(Child& c) {
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
                                      {"chunk", Base64Encode(std::string(buf, size_t(got)))}});
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

  bool Signal(const std::string& process_id, int sig) {
    std::lock_guard lock(mu_);
    for (const auto& c : children_) {
      if (c->process_id == process_id && c->pid > 0) {
        ::kill(-c->pid, sig);
        return true;
      }
    }
    return false;
  }

  std::function<void(const std::string&)> send_;
  std::string session_id_ = RandomHex(8) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" +
                            RandomHex(4) + "-" + RandomHex(12);
  bool initialize_called_ = false;  // I/O thread only
  bool initialized_ = false;        // I/O thread only
  std::string spawn_error_;         // I/O thread only
  std::mutex mu_;
  std::list<std::shared_ptr<Child>> children_;  // Guarded by mu_ (pid changes too).
};

// ---- registration -----------------------------------------------------------------------------

RegistryAnswer Register(const StandinExecutorOptions& o, std::ostream& err) {
  std::string base = o.remote;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  const std::string url = base + "/cloud/environment/" + o.environment_id + "/register";
  RegistryAnswer answer;
  int status = 0;
  std::string body;
  try {
    web::http::client::http_client_config config;
    config.set_timeout(o.request_timeout);
    web::http::client::http_client client(url, config);
    web::http::http_request req(web::http::methods::POST);
    req.headers().add("Authorization", "Bearer " + o.api_key);
    json payload = {{"security_profile", kPlainJsonRpcProfile}, {"executor_public_key", nullptr}};
    if (!o.name.empty()) {
      payload["name"] = o.name;
    }
    req.set_body(payload.dump(), "application/json");
    auto resp = client.request(req).get();
    status = resp.status_code();
    body = resp.extract_string(true).get();
  } catch (const std::exception&) {
    err << "Error: environment registry request failed: error sending request for url (" << url
        << ")" << std::endl;
    answer.exit_code = 1;
    return answer;
  }
  if (status >= 200 && status < 300) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      err << "Error: failed to serialize or deserialize exec-server JSON: expected value"
          << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    for (const char* field :
         {"environment_id", "url", "security_profile", "executor_registration_id"}) {
      if (!j.contains(field) || !j[field].is_string()) {
        err << "Error: failed to serialize or deserialize exec-server JSON: missing field `"
            << field << "`" << std::endl;
        answer.exit_code = 1;
        return answer;
      }
    }
    if (j["environment_id"] != o.environment_id) {
      err << "Error: exec-server protocol error: environment registry returned a different "
             "environment id"
          << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    if (j["security_profile"] != kPlainJsonRpcProfile) {
      err << "Error: exec-server protocol error: unsupported security profile `"
          << j["security_profile"].get<std::string>() << "`" << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    answer.url = j["url"].get<std::string>();
    return answer;
  }
  // {"error":{"code","message"}} → message; else the raw trimmed body (≤ 4096 chars).
  std::string code;
  std::string message;
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    if (e.contains("code") && e["code"].is_string()) {
      code = e["code"].get<std::string>();
    }
    if (e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    }
  }
  if (message.empty()) {
    message = Trim(body).substr(0, 4096);
  }
  if ((status == 503 && code == "registration_conflict") ||
      (status == 502 && code == "authentication_service_unavailable")) {
    answer.retry = true;
    return answer;
  }
  answer.exit_code = 1;
  if (status == 401 || status == 403) {
    err << "Error: environment registry authentication error: environment registry "
           "authentication failed ("
        << StatusText(status) << "): " << (message.empty() ? "empty error body" : message)
        << std::endl;
  } else {
    err << "Error: environment registry request failed (" << StatusText(status)
        << (code.empty() ? "" : ", " + code)
        << "): " << (message.empty() ? "empty or malformed error body" : message) << std::endl;
  }
  return answer;
}

// Sleeps `d` or until stop; false if stopped.
bool SleepFor(std::chrono::milliseconds d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  return !cv.wait_for(lock, stop, d, [] { return false; });
}

std::chrono::milliseconds Jitter(std::chrono::milliseconds d) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return d + std::chrono::milliseconds(rng() % (d.count() / 4 + 1));
}

}  // namespace

std::string CheckRemoteHost(const std::string& remote) {
  const std::string kRefused =
      "remote exec-server API-key authentication is restricted to HTTPS openai.com and "
      "openai.org hosts and subdomains or loopback hosts";
  try {
    web::uri uri(remote);
    std::string scheme = uri.scheme();
    std::string host = uri.host();
    std::transform(host.begin(), host.end(), host.begin(), ::tolower);
    if (host.size() > 2 && host.front() == '[') {
      host = host.substr(1, host.size() - 2);
    }
    bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
    if ((scheme == "http" || scheme == "https") && loopback) {
      return "";
    }
    auto ends_with = [&](const std::string& suffix) {
      return host == suffix.substr(1) ||
             (host.size() > suffix.size() &&
              host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0);
    };
    if (scheme == "https" && (ends_with(".openai.com") || ends_with(".openai.org"))) {
      return "";
    }
    return kRefused;
  } catch (const std::exception&) {
    return kRefused;
  }
}

int RunStandinExecutor(const StandinExecutorOptions& options, std::ostream& err,
                       std::stop_token stop) {
  // One executor per emulated sandbox: cpprest's default pool of 40 threads each made 1,000
  // sandboxes exhaust the machine's pid space (45 threads a process). Two are plenty for one
  // WebSocket and a registration call. (Too late if cpprest already ran in this process: then the
  // existing pool is kept.)
  try {
    crossplat::threadpool::initialize_with_threads(2);
  } catch (const std::exception&) {
  }
  if (options.api_key.empty()) {
    err << "Error: remote exec-server registration requires ChatGPT authentication or API key "
           "authentication; run `codex login` or set CODEX_API_KEY"
        << std::endl;
    return 1;
  }
  if (std::string refused = CheckRemoteHost(options.remote); !refused.empty()) {
    err << "Error: " << refused << std::endl;
    return 1;
  }
  if (options.environment_id.empty()) {
    err << "Error: --remote requires --environment-id" << std::endl;
    return 1;
  }

  // Registration (with codex's two retried codes: 500ms·2^min(n,4), capped at 5 s).
  auto register_once = [&]() -> RegistryAnswer {
    for (int attempt = 0;; ++attempt) {
      RegistryAnswer a = Register(options, err);
      if (!a.retry) {
        return a;
      }
      auto delay = std::min<std::chrono::milliseconds>(500ms * (1 << std::min(attempt, 4)), 5s);
      if (!SleepFor(Jitter(delay), stop)) {
        return RegistryAnswer{0, "", false};
      }
    }
  };
  RegistryAnswer reg = register_once();
  if (reg.exit_code != 0) {
    return 1;
  }
  if (stop.stop_requested()) {
    return 0;
  }

  auto backoff = options.first_reconnect_delay;
  int connect_failures = 0;
  while (!stop.stop_requested()) {
    // Shared with the client's callbacks, which may outlive one loop iteration.
    struct LinkState {
      std::mutex mu;
      std::condition_variable_any cv;
      bool closed = false;
    };
    auto state = std::make_shared<LinkState>();
    auto client = std::make_shared<wsc::websocket_callback_client>();
    std::weak_ptr<wsc::websocket_callback_client> weak = client;
    auto send = [weak](const std::string& text) {
      if (auto c = weak.lock()) {
        wsc::websocket_outgoing_message msg;
        msg.set_utf8_message(text);
        try {
          c->send(msg).then([](pplx::task<void> t) {
            try {
              t.get();
            } catch (...) {
              // The socket is gone; the close handler reconnects.
            }
          });
        } catch (...) {
        }
      }
    };
    auto server = std::make_shared<JsonRpcServer>(send);
    client->set_message_handler([server, weak](const wsc::websocket_incoming_message& msg) {
      if (msg.message_type() != wsc::websocket_message_type::text_message) {
        return;
      }
      std::string text;
      try {
        text = msg.extract_string().get();
      } catch (...) {
        return;
      }
      if (!server->OnFrame(text)) {
        if (auto c = weak.lock()) {
          c->close().then([](pplx::task<void> t) {
            try {
              t.get();
            } catch (...) {
            }
          });
        }
      }
    });
    client->set_close_handler(
        [state](wsc::websocket_close_status, const std::string&, const std::error_code&) {
          std::lock_guard lock(state->mu);
          state->closed = true;
          state->cv.notify_all();
        });

    auto connected = std::make_shared<std::promise<bool>>();
    auto future = connected->get_future();
    try {
      client->connect(web::uri(reg.url)).then([connected](pplx::task<void> t) {
        try {
          t.get();
          connected->set_value(true);
        } catch (...) {
          connected->set_value(false);
        }
      });
    } catch (const std::exception&) {
      connected->set_value(false);
    }
    bool ok = future.wait_for(options.request_timeout) == std::future_status::ready && future.get();
    if (ok) {
      connect_failures = 0;
      backoff = options.first_reconnect_delay;
      std::unique_lock lock(state->mu);
      state->cv.wait(lock, stop, [&] { return state->closed; });
    } else if (++connect_failures >= 3) {
      // The registration may be stale (e.g. the registry restarted): register again.
      connect_failures = 0;
      reg = register_once();
      if (reg.exit_code != 0) {
        server->KillAll();
        return 1;
      }
    }
    try {
      client->close().wait();
    } catch (...) {
    }
    if (stop.stop_requested()) {
      server->KillAll();
      break;
    }
    // Children survive a dropped link only briefly in codex (30 s resume); the stand-in has no
    // resume, so they are ended with the link.
    server->KillAll();
    if (!SleepFor(Jitter(backoff), stop)) {
      break;
    }
    backoff = std::min(backoff * 2, options.max_reconnect_delay);
  }
  return 0;
}

}  // namespace sbx::emulator
