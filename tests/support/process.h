// Process: a child process for integration and e2e tests — start a built binary with arguments,
// extra environment and stdout/stderr redirected to files, watch its output for a line, signal
// it, and wait for its exit with a deadline. Also RunProcess (start + wait + read output) and
// ReadFile / WriteFile for the files a test shares with its children. Deadlines and PollUntil
// come from tests/support/poll.h.
//
// The child runs in its own process group; the destructor (and Kill) signals the whole group, so
// a test that fails half-way leaves no daemon behind. Output goes to files (never a pipe that
// could fill up and block the child) which the test reads whenever it likes.
//
// Test-only. A Process is used from one thread (thread-compatible); it owns the child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "api/status.h"
#include "tests/support/poll.h"

namespace sbx::testing {

// A live process (not a zombie) with this pid on this host.
bool ProcessAlive(int64_t pid);

// The whole content of `path` ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);
// Writes `content` to `path`, creating its parent directories.
void WriteFile(const std::filesystem::path& path, const std::string& content);

struct ProcessOptions {
  std::vector<std::string> args;             // argv[1..]
  std::map<std::string, std::string> env;    // set (or overridden) over the test's environment
  std::vector<std::string> unset_env;        // removed from the inherited environment
  std::filesystem::path stdout_path;         // required: created/truncated
  std::filesystem::path stderr_path;         // required: created/truncated
  std::optional<std::filesystem::path> cwd;  // working directory; default: the test's
  std::string stdin_text;                    // fed through a file; empty = /dev/null
};

class Process {
 public:
  // Starts `binary`. kInvalidArgument without output paths; kInternal when spawn fails.
  static api::StatusOr<std::unique_ptr<Process>> Start(const std::filesystem::path& binary,
                                                       ProcessOptions options);
  ~Process();  // SIGKILLs the process group if it still runs, and reaps the child
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // False once the child has exited (reaps it; the exit code is kept for Wait).
  bool Running();
  // Sends `signal` to the child only (not its group): SIGTERM should reach the daemon itself.
  void Signal(int signal);
  // SIGKILL to the whole process group, then reaps. Returns the exit code (128+9).
  int Kill();
  // The exit code (128+N when killed by signal N), or nullopt if still running at `deadline`.
  std::optional<int> Wait(Deadline deadline);

  std::string Stdout() const;
  std::string Stderr() const;
  // Polls stdout (or stderr) until a line matches `pattern` (std::regex_search); returns the
  // match groups of the first such line (element 0 = whole match), or nullopt at the deadline
  // or when the child exited without printing it.
  std::optional<std::vector<std::string>> WaitForLine(const std::regex& pattern, Deadline deadline,
                                                      bool from_stderr = false);
  // The first stdout/stderr line matching, group `group`, or "" (no waiting).
  std::string FindInOutput(const std::regex& pattern, int group = 0, bool from_stderr = false);

 private:
  Process(pid_t pid, ProcessOptions options) : pid_(pid), options_(std::move(options)) {}

  pid_t pid_;
  ProcessOptions options_;
  std::optional<int> exit_code_;
};

struct RunResult {
  int exit_code = -1;  // -1: did not finish before the deadline (it was killed)
  std::string out;
  std::string err;
};

// Runs `binary` to completion (killed at `timeout`). Output files go to `scratch_dir` with a
// unique name. For short CLI invocations like `sbxctl get … -o json`.
RunResult RunProcess(const std::filesystem::path& binary, const std::vector<std::string>& args,
                     const std::filesystem::path& scratch_dir,
                     const std::map<std::string, std::string>& env = {},
                     std::chrono::milliseconds timeout = std::chrono::seconds(60),
                     const std::string& stdin_text = "");

}  // namespace sbx::testing
