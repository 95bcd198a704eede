// ExecSession / ExecSessions: the stand-in executor's exec-server sessions
// (reference/codex-exec-server.md §7.3, §7.5, §9.3). A session is what `initialize` creates: it
// owns the processes `process/start` spawned, keeps each one's output, exit and close events
// (one increasing `seq` per process, starting at 1) so that `process/read` can return them, and
// outlives the connection that created it: when the socket drops, the session is detached and
// its processes keep running for the resume window (30 s, like codex). A new connection that
// sends `initialize {resumeSessionId}` within the window gets the same session back and reads
// on from `afterSeq`; after the window the processes are SIGKILLed and the id is unknown.
//
// Our choices where the reference is silent: `process/read` returns the events with
// seq > afterSeq (default 0), at most `maxBytes` of chunk bytes (at least one chunk), and
// `nextSeq` is the seq to continue from (pass afterSeq = nextSeq - 1); `waitMs` (capped at
// 30 s) waits for an event after afterSeq. A process keeps at most 1 MiB of output for reading
// (oldest chunks dropped first). `tty:true` uses pipes, not a terminal, and reports its output
// as stream "pty".
//
// Thread-safety: thread-safe. Each child's output is pumped on its own thread, which calls the
// attached sink; the sink must be thread-safe. ExecSessions owns the sessions, their children,
// the pump threads and a reaper thread; its destructor kills every child and joins them.
// Module-private to emulator/executor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sbx::emulator::internal::executor {

// Where a session's notifications go while a connection is attached.
using Sink = std::function<void(const std::string&)>;

class ExecSessions;

class ExecSession {
 public:
  using json = nlohmann::json;

  struct StartRequest {
    std::string process_id;
    std::vector<std::string> argv;
    std::string cwd;  // a native path (already converted from the file:// URI)
    std::map<std::string, std::string> env;
    bool tty = false;
    bool pipe_stdin = false;
  };

  ExecSession(std::string id, Sink sink);
  ~ExecSession();  // KillAll()
  ExecSession(const ExecSession&) = delete;
  ExecSession& operator=(const ExecSession&) = delete;

  const std::string& id() const { return id_; }
  // Which attachment is current: each Create/Resume makes a new one. A connection detaches only
  // its own (an older connection closing after a resume must not detach the new one).
  uint64_t attachment() const;

  // Spawns argv (no shell) in cwd with env; "" on success, else the JSON-RPC error message of a
  // process id already in use. `accepted` runs once the id is taken and before any event of
  // the process can be sent (the caller's reply goes out first). A spawn failure is not an
  // error: the process reports exit 127 with the reason on stderr, like a shell would.
  std::string Start(const StartRequest& request, const std::function<void()>& accepted);
  // process/read's result, or nullopt for an unknown process id.
  std::optional<json> Read(const std::string& process_id, int64_t after_seq,
                           std::optional<size_t> max_bytes, std::chrono::milliseconds wait);
  // process/write: "accepted", "unknownProcess" or "stdinClosed" (no pipeStdin/tty, or exited).
  std::string Write(const std::string& process_id, const std::string& bytes);
  // Sends `sig` to the process's group; false if it is unknown or already reaped.
  bool Signal(const std::string& process_id, int sig);
  // SIGKILLs every child's process group and joins its output thread.
  void KillAll();

 private:
  friend class ExecSessions;

  struct Event {
    int64_t seq = 0;
    std::string stream;  // "stdout", "stderr" or "pty"
    std::string bytes;
  };
  struct Proc {
    std::string process_id;
    pid_t pid = -1;  // negated once reaped: never signalled again
    int out_fd = -1;
    int err_fd = -1;
    int in_fd = -1;  // write end of stdin (pipeStdin or tty); Guarded by ExecSession::mu_
    bool tty = false;
    int64_t next_seq = 1;
    std::deque<Event> chunks;  // retained output, oldest first
    size_t retained_bytes = 0;
    bool exited = false;
    int exit_code = 0;
    bool closed = false;
    std::string failure;  // why the spawn failed
    std::thread reader;
  };

  void Attach(Sink sink);
  void Detach(uint64_t attachment, std::chrono::steady_clock::time_point now);
  // Records and (if attached) sends one notification. mu_ held.
  void NotifyLocked(const std::string& method, const json& params);
  void AppendOutputLocked(Proc& p, const std::string& stream, const std::string& bytes);
  void Pump(Proc& p);

  const std::string id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Sink sink_;                // Guarded by mu_; empty while detached.
  uint64_t attachment_ = 1;  // Guarded by mu_.
  std::optional<std::chrono::steady_clock::time_point> detached_at_;  // Guarded by mu_.
  std::map<std::string, std::shared_ptr<Proc>> procs_;                // Guarded by mu_.
};

class ExecSessions {
 public:
  static constexpr std::chrono::milliseconds kDefaultResumeWindow{30'000};

  explicit ExecSessions(std::chrono::milliseconds resume_window = kDefaultResumeWindow);
  ~ExecSessions();  // KillAll()
  ExecSessions(const ExecSessions&) = delete;
  ExecSessions& operator=(const ExecSessions&) = delete;

  // A new session whose notifications go to `sink`.
  std::shared_ptr<ExecSession> Create(Sink sink);
  // The detached (or attached) session `id`, now attached to `sink`; null when the id is
  // unknown or its resume window has passed.
  std::shared_ptr<ExecSession> Resume(const std::string& id, Sink sink);
  // The connection of `session` (its `attachment`) is gone: the resume window starts.
  void Detach(const std::shared_ptr<ExecSession>& session, uint64_t attachment);
  // Kills every session's children and forgets the sessions.
  void KillAll();

 private:
  void ReapLoop(std::stop_token stop);

  const std::chrono::milliseconds resume_window_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::string, std::shared_ptr<ExecSession>> sessions_;  // Guarded by mu_.
  std::jthread reaper_;
};

}  // namespace sbx::emulator::internal::executor
