// ProcessRunner: runs a program as a child process, without a shell, and collects its output —
// the boundary between sbxd and the command-line tools it drives (the `git` CLI of GitSource).
//
// The program gets exactly `argv` (argv[0] looked up in PATH of `env`) and exactly `env` (no
// inherited variables: the caller decides what a child may see), stdin from `input` (then closed;
// /dev/null when empty), its own
// process group, the default signal mask and dispositions (sbxd blocks signals in its threads),
// and no descriptor of sbxd's but its pipes. Output beyond `max_output_bytes` per stream is
// dropped (the result says so). On timeout or stop the whole process group is killed
// (SIGKILL) and waited for.
//
// Thread-safe: Run may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "api/status.h"

namespace sbx::controller::gitops {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0]: a program name (PATH lookup) or a path
  std::vector<std::string> env;   // "NAME=VALUE", the child's whole environment
  std::string cwd;                // "" = sbxd's
  std::string input;              // written to the child's stdin, which is then closed
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  size_t max_output_bytes = size_t{4} << 20;  // per stream
};

struct ProcessResult {
  int exit_code = 0;  // 128 + signal for a signalled child
  std::string out;
  std::string err;
  bool truncated = false;  // output was cut at max_output_bytes
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // The child's outcome, whatever its exit code. kDeadlineExceeded on timeout, kCancelled when
  // `stop` was requested, kInternal/kNotFound when it cannot be started (argv[0] not found).
  [[nodiscard]] virtual api::StatusOr<ProcessResult> Run(const ProcessSpec& spec,
                                                         std::stop_token stop) = 0;
};

// posix_spawn + poll.
class PosixProcessRunner final : public ProcessRunner {
 public:
  [[nodiscard]] api::StatusOr<ProcessResult> Run(const ProcessSpec& spec,
                                                 std::stop_token stop) override;
};

}  // namespace sbx::controller::gitops
