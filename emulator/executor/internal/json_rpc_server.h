// JsonRpcServer: the stand-in executor's exec-server JSON-RPC server on one connection
// (reference/codex-exec-server.md §7, §9.3): initialize (a new session, or `resumeSessionId`
// within the resume window of ExecSessions) / initialized, environment/info, process/start
// (argv, no shell, `cwd` a file:// URI, env merged over the executor's own minus
// CODEX_API_KEY, `pipeStdin`, `tty`), process/read, process/write, process/signal,
// process/terminate, fs/readFile and fs/writeFile; the session streams process/output,
// process/exited and process/closed with one increasing `seq` per process while this connection
// is attached. Errors use codex's codes and texts (-32600, -32601, -32602). Module-private to
// emulator/executor.
//
// Thread-safety: OnFrame() from one thread (the WebSocket's message handler); `send` is called
// from that thread and from the session's output threads, so it must be thread-safe. Detach()
// from any thread. Borrows the ExecSessions, which must outlive it; the session (and its
// processes) belongs to the ExecSessions, so it survives this connection.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "emulator/executor/internal/exec_session.h"

namespace sbx::emulator::internal::executor {

class JsonRpcServer {
 public:
  // Outgoing frames go through `send`.
  JsonRpcServer(ExecSessions& sessions, std::function<void(const std::string&)> send);
  ~JsonRpcServer();  // Detach()
  JsonRpcServer(const JsonRpcServer&) = delete;
  JsonRpcServer& operator=(const JsonRpcServer&) = delete;

  // Handles one text frame. False: the connection must be closed (non-JSON or an unexpected
  // notification, like codex).
  bool OnFrame(const std::string& text);
  // The connection is gone: the session's resume window starts (its processes keep running).
  // Idempotent.
  void Detach();
  // The session's id once initialize succeeded, else "".
  std::string session_id() const;

 private:
  using json = nlohmann::json;

  json InitializeResult() const;
  void Reply(const json& id, const json& result);
  void Error(const json& id, int code, const std::string& message);
  void Initialize(const json& id, const json& params);
  void ProcessStart(const json& id, const json& params);
  void ProcessRead(const json& id, const json& params);
  void ProcessWrite(const json& id, const json& params);
  void FsReadFile(const json& id, const json& params);
  void FsWriteFile(const json& id, const json& params);

  ExecSessions& sessions_;
  std::function<void(const std::string&)> send_;
  bool initialized_ = false;  // I/O thread only
  mutable std::mutex mu_;
  std::shared_ptr<ExecSession> session_;  // Guarded by mu_; set by initialize.
  uint64_t attachment_ = 0;               // Guarded by mu_: session_'s attachment of ours.
};

}  // namespace sbx::emulator::internal::executor
