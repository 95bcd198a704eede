// JsonRpcServer: the stand-in executor's exec-server JSON-RPC server on one WebSocket
// (reference/codex-exec-server.md §7): initialize / initialized, environment/info,
// process/start (argv, no shell, `cwd` a file:// URI, env merged over the executor's own minus
// CODEX_API_KEY), process/terminate and process/signal; it streams process/output,
// process/exited and process/closed with one increasing `seq` per process. Errors use codex's
// codes and texts (-32600, -32601, -32602). Module-private to emulator/executor.
//
// Thread-safety: OnFrame() from one thread (the WebSocket's message handler); each child's
// output is pumped on its own thread, which calls `send` concurrently, so `send` must be
// thread-safe. KillAll() from any thread. Owns its child processes and their threads; the
// destructor kills and joins them.
#pragma once

#include <sys/types.h>

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace sbx::emulator::internal::executor {

class JsonRpcServer {
 public:
  // Outgoing frames go through `send`.
  explicit JsonRpcServer(std::function<void(const std::string&)> send);
  ~JsonRpcServer();  // KillAll()
  JsonRpcServer(const JsonRpcServer&) = delete;
  JsonRpcServer& operator=(const JsonRpcServer&) = delete;

  // Handles one text frame. False: the connection must be closed (non-JSON or an unexpected
  // notification, like codex).
  bool OnFrame(const std::string& text);
  // SIGKILLs every child's process group and joins its output thread.
  void KillAll();

 private:
  using json = nlohmann::json;

  // One child process started by process/start.
  struct Child {
    std::string process_id;
    pid_t pid = -1;
    int out_fd = -1;
    int err_fd = -1;
    std::thread reader;
  };

  json InitializeResult();
  void Reply(const json& id, const json& result);
  void Error(const json& id, int code, const std::string& message);
  void Notify(const std::string& method, const json& params);
  void ProcessStart(const json& id, const json& params);
  std::shared_ptr<Child> Spawn(const std::string& process_id, const std::vector<std::string>& argv,
                               const std::string& cwd,
                               const std::map<std::string, std::string>& env);
  // Streams the child's output until it exited and its pipes are drained, then exited + closed.
  void Pump(Child& c);
  bool Signal(const std::string& process_id, int sig);

  std::function<void(const std::string&)> send_;
  std::string session_id_;
  bool initialize_called_ = false;  // I/O thread only
  bool initialized_ = false;        // I/O thread only
  std::string spawn_error_;         // I/O thread only
  std::mutex mu_;
  std::list<std::shared_ptr<Child>> children_;  // Guarded by mu_ (pid changes too).
};

}  // namespace sbx::emulator::internal::executor
