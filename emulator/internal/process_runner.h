// Process runner for emulated sandboxes: spawns a program (argv, no shell) with an explicit
// environment, optionally inside a private mount namespace with bind mounts, captures its
// output up to a cap, enforces a timeout by killing its process group, and finds or kills
// processes by an environment marker (which catches `setsid nohup … &` descendants).
//
// Spawn() and Wait() are split so a caller can register the pid under its own lock before
// anything else can race with it. Thread-safe: no shared state; each Process is owned by one
// thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sbx::emulator::internal {

enum class Isolation {
  kMountNamespace,  // unshare(CLONE_NEWNS) + bind mounts in the child (needs CAP_SYS_ADMIN)
  kPathRewrite,     // no namespace: the caller rewrites paths itself
};
std::string_view IsolationName(Isolation isolation);

// Forks a child that tries unshare(CLONE_NEWNS) and a private remount of "/"; returns
// kMountNamespace if that worked, else kPathRewrite.
Isolation ProbeIsolation();

struct BindMount {
  std::string source;  // host path
  std::string target;  // path inside the namespace (must exist on the host)
};

struct SpawnSpec {
  std::string cmd;                // program; looked up in `search_path` unless it has a '/'
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> env;   // "NAME=value", the complete environment
  std::string search_path;        // PATH used for the lookup (colon-separated)
  std::string cwd;                // working directory (inside the namespace)
  Isolation isolation = Isolation::kPathRewrite;
  std::vector<BindMount> binds;  // applied in order; kMountNamespace only
  // After the binds (kMountNamespace only): `source`'s entries appear in `target` on top of
  // target's own, as a read-only overlayfs (lowerdir=source:target). Where the kernel refuses
  // overlayfs, `source` is bind-mounted over `target` instead (target's own entries are hidden);
  // where that fails too (no such target) the overlay is skipped. Paths must not contain ':' or
  // ','.
  std::vector<BindMount> overlays;
};

struct ProcessResult {
  bool started = false;            // false: the program could not be executed
  std::string spawn_error;         // why not (strerror), if !started
  std::optional<int> exit_code;    // set when it exited normally
  std::optional<int> term_signal;  // set when killed by a signal
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
  bool truncated = false;
};

class Process {
 public:
  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&&) = delete;
  Process(const Process&) = delete;
  ~Process();  // kills and reaps the child if Wait() was never called

  // Forks the child (which sets up isolation, then execs). Returns a Process with pid() > 0, or
  // one with pid() == -1 and `spawn_error` set when fork itself failed.
  static Process Spawn(const SpawnSpec& spec);

  pid_t pid() const { return pid_; }  // also the process group id
  const std::string& fork_error() const { return fork_error_; }

  // Waits for the child to exit or `timeout` to pass (then SIGKILLs its process group).
  // Captures at most `output_cap` bytes of stdout+stderr together; the rest is read and
  // dropped (truncated = true). Once the child has exited, output still buffered is collected
  // but descendants that keep the pipes open are not waited for.
  ProcessResult Wait(std::chrono::milliseconds timeout, std::size_t output_cap);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int status_fd_ = -1;  // CLOEXEC pipe: receives errno if exec failed, EOF on success
  bool waited_ = false;
  std::string fork_error_;
};

// Pids of every live process whose environment has an entry equal to `marker`
// (e.g. "SBX_EMULATOR_SANDBOX=ab12/sb-1"), or starting with it when `marker` ends with '/'
// ("SBX_EMULATOR_SANDBOX=ab12/" = every sandbox of one emulator). Reads /proc/*/environ;
// skips the caller and zombies.
std::vector<pid_t> FindProcessesWithEnv(std::string_view marker);

// SIGKILLs every process FindProcessesWithEnv() reports, repeating until none is left (a dying
// process may fork); returns how many were killed.
int KillProcessesWithEnv(std::string_view marker);

}  // namespace sbx::emulator::internal
