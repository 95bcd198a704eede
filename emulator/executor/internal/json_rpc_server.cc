#include "emulator/executor/internal/json_rpc_server.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "api/base64.h"
#include "api/percent_encoding.h"

extern char** environ;

namespace sbx::emulator::internal::executor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kSandboxHome[] = "/home/sandbox-agent";
// fs/readFile refuses bigger files (the WebSocket's messages are bounded anyway).
constexpr std::uintmax_t kMaxReadFileBytes = 16u << 20;

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
  return api::PercentDecode(rest);
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

// Rust's io::Error text, which codex's errors carry: "No such file or directory (os error 2)".
std::string OsError(int err) {
  return std::string(std::strerror(err)) + " (os error " + std::to_string(err) + ")";
}

// codex answers I/O failures of fs/* with this code (our choice: the reference names none).
constexpr int kInternalError = -32603;

}  // namespace

JsonRpcServer::JsonRpcServer(ExecSessions& sessions, std::function<void(const std::string&)> send)
    : sessions_(sessions), send_(std::move(send)) {}

JsonRpcServer::~JsonRpcServer() { Detach(); }

void JsonRpcServer::Detach() {
  std::shared_ptr<ExecSession> session;
  uint64_t attachment = 0;
  {
    std::lock_guard lock(mu_);
    session.swap(session_);
    attachment = attachment_;
  }
  if (session != nullptr) {  // after a Detach, the ExecSessions is never touched again
    sessions_.Detach(session, attachment);
  }
}

std::string JsonRpcServer::session_id() const {
  std::lock_guard lock(mu_);
  return session_ ? session_->id() : "";
}

bool JsonRpcServer::OnFrame(const std::string& text) {
  json msg = json::parse(text, nullptr, false);
  if (msg.is_discarded() || !msg.is_object()) {
    return false;
  }
  if (!msg.contains("method")) {
    return true;  // a response to nothing we sent: ignore
  }
  std::string method = msg["method"].is_string() ? msg["method"].get<std::string>() : "";
  json params = msg.contains("params") ? msg["params"] : json::object();
  if (params.is_null()) {
    params = json::object();
  }
  if (!msg.contains("id")) {
    if (method == "initialized") {
      initialized_ = true;
      return true;
    }
    return false;
  }
  const json id = msg["id"];
  if (!params.is_object()) {
    Error(id, -32602, "invalid type: expected struct");
    return true;
  }
  if (method == "initialize") {
    Initialize(id, params);
    return true;
  }
  if (session_id().empty()) {
    Error(id, -32600, "client must call initialize before using environment info methods");
    return true;
  }
  if (method.starts_with("fs/") && !initialized_) {
    Error(id, -32600, "client must send initialized before using filesystem methods");
    return true;
  }
  std::shared_ptr<ExecSession> session;
  {
    std::lock_guard lock(mu_);
    session = session_;
  }
  if (method == "process/start") {
    ProcessStart(id, params);
  } else if (method == "process/read") {
    ProcessRead(id, params);
  } else if (method == "process/write") {
    ProcessWrite(id, params);
  } else if (method == "process/terminate" || method == "process/signal") {
    if (!params.contains("processId")) {
      Error(id, -32602, "missing field `processId`");
      return true;
    }
    const std::string pid = params.value("processId", "");
    if (method == "process/terminate") {
      Reply(id, {{"running", session->Signal(pid, SIGKILL)}});
    } else {
      session->Signal(pid, params.value("signal", "") == "interrupt" ? SIGINT : SIGTERM);
      Reply(id, json::object());
    }
  } else if (method == "fs/readFile") {
    FsReadFile(id, params);
  } else if (method == "fs/writeFile") {
    FsWriteFile(id, params);
  } else if (method == "environment/info") {
    Reply(id, InitializeResult()["environmentInfo"]);
  } else {
    Error(id, -32601, "exec-server stub does not implement `" + method + "` yet");
  }
  return true;
}

void JsonRpcServer::Initialize(const json& id, const json& params) {
  std::shared_ptr<ExecSession> session;
  if (params.contains("resumeSessionId") && !params["resumeSessionId"].is_null()) {
    if (!params["resumeSessionId"].is_string()) {
      return Error(id, -32602, "invalid type: resumeSessionId, expected a string");
    }
    const std::string resume = params["resumeSessionId"].get<std::string>();
    session = sessions_.Resume(resume, send_);
    if (session == nullptr) {
      return Error(id, -32600, "unknown session id " + resume);
    }
  } else {
    session = sessions_.Create(send_);
  }
  const uint64_t attachment = session->attachment();
  std::shared_ptr<ExecSession> previous;
  uint64_t previous_attachment = 0;
  {
    std::lock_guard lock(mu_);
    previous = std::exchange(session_, session);
    previous_attachment = std::exchange(attachment_, attachment);
  }
  if (previous != nullptr && previous != session) {
    sessions_.Detach(previous, previous_attachment);
  }
  Reply(id, InitializeResult());
}

nlohmann::json JsonRpcServer::InitializeResult() const {
  const char* home = std::getenv("HOME");
  char cwd[4096];
  std::string here = ::getcwd(cwd, sizeof(cwd)) ? cwd : "/";
  return {{"sessionId", session_id()},
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

void JsonRpcServer::ProcessStart(const json& id, const json& params) {
  for (const char* field : {"processId", "argv", "cwd"}) {
    if (!params.contains(field)) {
      return Error(id, -32602, std::string("missing field `") + field + "`");
    }
  }
  if (!params["processId"].is_string() || !params["argv"].is_array() || params["argv"].empty() ||
      !params["cwd"].is_string()) {
    return Error(id, -32602, "invalid type in process/start params");
  }
  auto cwd = PathFromFileUri(params["cwd"].get<std::string>());
  if (!cwd) {
    return Error(id, -32602, "invalid URI: relative URL without a base");
  }
  ExecSession::StartRequest request;
  request.process_id = params["processId"].get<std::string>();
  request.cwd = RewriteSandboxHome(*cwd);
  for (const auto& a : params["argv"]) {
    if (!a.is_string()) {
      return Error(id, -32602, "argv must be strings");
    }
    request.argv.push_back(a.get<std::string>());
  }
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) {
      request.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  request.env.erase("CODEX_API_KEY");  // scope the key to the executor (reference pitfall)
  if (params.contains("env") && params["env"].is_object()) {
    for (const auto& [k, v] : params["env"].items()) {
      if (v.is_string()) {
        request.env[k] = v.get<std::string>();
      }
    }
  }
  request.tty = params.value("tty", false);
  request.pipe_stdin = params.contains("pipeStdin") && params["pipeStdin"].is_boolean() &&
                       params["pipeStdin"].get<bool>();
  std::shared_ptr<ExecSession> session;
  {
    std::lock_guard lock(mu_);
    session = session_;
  }
  // The reply goes out before the first notification can: the process starts after it.
  std::string in_use = session->Start(request, [&] {
    Reply(id, {{"processId", request.process_id}, {"sandboxType", "none"}});
  });
  if (!in_use.empty()) {
    Error(id, -32600, in_use);
  }
}

void JsonRpcServer::ProcessRead(const json& id, const json& params) {
  if (!params.contains("processId")) {
    return Error(id, -32602, "missing field `processId`");
  }
  if (!params["processId"].is_string()) {
    return Error(id, -32602, "invalid type: processId, expected a string");
  }
  int64_t after_seq = 0;
  std::optional<size_t> max_bytes;
  int64_t wait_ms = 0;
  if (params.contains("afterSeq") && !params["afterSeq"].is_null()) {
    if (!params["afterSeq"].is_number_integer()) {
      return Error(id, -32602, "invalid type: afterSeq, expected an integer");
    }
    after_seq = params["afterSeq"].get<int64_t>();
  }
  if (params.contains("maxBytes") && !params["maxBytes"].is_null()) {
    if (!params["maxBytes"].is_number_unsigned()) {
      return Error(id, -32602, "invalid type: maxBytes, expected a non-negative integer");
    }
    max_bytes = params["maxBytes"].get<size_t>();
  }
  if (params.contains("waitMs") && !params["waitMs"].is_null()) {
    if (!params["waitMs"].is_number_unsigned()) {
      return Error(id, -32602, "invalid type: waitMs, expected a non-negative integer");
    }
    wait_ms = params["waitMs"].get<int64_t>();
  }
  std::shared_ptr<ExecSession> session;
  {
    std::lock_guard lock(mu_);
    session = session_;
  }
  const std::string process_id = params["processId"].get<std::string>();
  std::optional<json> result =
      session->Read(process_id, after_seq, max_bytes, std::chrono::milliseconds(wait_ms));
  if (!result) {
    return Error(id, -32600, "unknown process id " + process_id);
  }
  Reply(id, *result);
}

void JsonRpcServer::ProcessWrite(const json& id, const json& params) {
  for (const char* field : {"processId", "chunk"}) {
    if (!params.contains(field)) {
      return Error(id, -32602, std::string("missing field `") + field + "`");
    }
  }
  if (!params["processId"].is_string() || !params["chunk"].is_string()) {
    return Error(id, -32602, "invalid type in process/write params");
  }
  std::optional<std::string> bytes = api::Base64Decode(params["chunk"].get<std::string>());
  if (!bytes) {
    return Error(id, -32602, "invalid base64 in `chunk`");
  }
  std::shared_ptr<ExecSession> session;
  {
    std::lock_guard lock(mu_);
    session = session_;
  }
  Reply(id, {{"status", session->Write(params["processId"].get<std::string>(), *bytes)}});
}

void JsonRpcServer::FsReadFile(const json& id, const json& params) {
  if (!params.contains("path")) {
    return Error(id, -32602, "missing field `path`");
  }
  if (!params["path"].is_string()) {
    return Error(id, -32602, "invalid type: path, expected a string");
  }
  auto path = PathFromFileUri(params["path"].get<std::string>());
  if (!path) {
    return Error(id, -32602, "invalid URI: relative URL without a base");
  }
  const std::string native = RewriteSandboxHome(*path);
  std::error_code ec;
  if (std::filesystem::is_directory(native, ec)) {
    return Error(id, kInternalError, OsError(EISDIR));
  }
  const std::uintmax_t size = std::filesystem::file_size(native, ec);
  if (ec) {
    return Error(id, kInternalError, OsError(ec.value()));
  }
  if (size > kMaxReadFileBytes) {
    return Error(id, kInternalError,
                 "file is larger than " + std::to_string(kMaxReadFileBytes) + " bytes: " + *path);
  }
  std::ifstream in(native, std::ios::binary);
  if (!in) {
    return Error(id, kInternalError, OsError(errno != 0 ? errno : EIO));
  }
  std::ostringstream data;
  data << in.rdbuf();
  Reply(id, {{"dataBase64", api::Base64Encode(data.str())}});
}

void JsonRpcServer::FsWriteFile(const json& id, const json& params) {
  for (const char* field : {"path", "dataBase64"}) {
    if (!params.contains(field)) {
      return Error(id, -32602, std::string("missing field `") + field + "`");
    }
  }
  if (!params["path"].is_string() || !params["dataBase64"].is_string()) {
    return Error(id, -32602, "invalid type in fs/writeFile params");
  }
  auto path = PathFromFileUri(params["path"].get<std::string>());
  if (!path) {
    return Error(id, -32602, "invalid URI: relative URL without a base");
  }
  std::optional<std::string> bytes = api::Base64Decode(params["dataBase64"].get<std::string>());
  if (!bytes) {
    return Error(id, -32602, "invalid base64 in `dataBase64`");
  }
  const std::string native = RewriteSandboxHome(*path);
  std::ofstream out(native, std::ios::binary | std::ios::trunc);
  if (!out) {
    return Error(id, kInternalError, OsError(errno != 0 ? errno : EIO));
  }
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) {
    return Error(id, kInternalError, OsError(errno != 0 ? errno : EIO));
  }
  Reply(id, json::object());
}

}  // namespace sbx::emulator::internal::executor
