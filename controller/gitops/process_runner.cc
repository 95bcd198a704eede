#include "controller/gitops/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace sbx::controller::gitops {
namespace {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  void Close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
};

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

// posix_spawn's attributes and file actions, destroyed on every path.
struct SpawnSetup {
  posix_spawnattr_t attr{};
  posix_spawn_file_actions_t actions{};
  bool attr_ok = false;
  bool actions_ok = false;
  ~SpawnSetup() {
    if (attr_ok) {
      posix_spawnattr_destroy(&attr);
    }
    if (actions_ok) {
      posix_spawn_file_actions_destroy(&actions);
    }
  }
};

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return WEXITSTATUS(wait_status);
  }
  if (WIFSIGNALED(wait_status)) {
    return 128 + WTERMSIG(wait_status);
  }
  return -1;
}

// The value of PATH in `env`, or a default.
std::string PathOf(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    if (e.starts_with("PATH=")) {
      return e.substr(5);
    }
  }
  return "/usr/local/bin:/usr/bin:/bin";
}

// argv[0] as an absolute path: posix_spawnp would search sbxd's PATH, not the child's.
std::string Resolve(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) {
    return program;
  }
  const std::string path = PathOf(env);
  size_t start = 0;
  while (start <= path.size()) {
    const size_t colon = path.find(':', start);
    const std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      std::string candidate = dir;
      candidate += '/';
      candidate += program;
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    if (colon == std::string::npos) {
      break;
    }
    start = colon + 1;
  }
  return "";
}

// The child's three standard streams, sbxd's ends and the child's.
struct ChildPipes {
  Fd out_read;
  Fd out_write;
  Fd err_read;
  Fd err_write;
  Fd in_read;   // only with input
  Fd in_write;  // only with input; closed once all is written (EOF on the child's stdin)
};

// stdin: a socket pair rather than a pipe, so that writing to a child that exits early fails
// with EPIPE under MSG_NOSIGNAL instead of raising SIGPIPE in sbxd.
api::Status OpenPipes(bool with_input, ChildPipes& p) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return api::InternalError(Errno("pipe"));
  }
  p.out_read.Reset(out_pipe[0]);
  p.out_write.Reset(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return api::InternalError(Errno("pipe"));
  }
  p.err_read.Reset(err_pipe[0]);
  p.err_write.Reset(err_pipe[1]);
  if (with_input) {
    int in_pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
      return api::InternalError(Errno("socketpair"));
    }
    p.in_read.Reset(in_pair[0]);
    p.in_write.Reset(in_pair[1]);
    ::fcntl(p.in_write.get(), F_SETFL, ::fcntl(p.in_write.get(), F_GETFL) | O_NONBLOCK);
    ::shutdown(p.in_read.get(), SHUT_WR);
  }
  return api::OkStatus();
}

// Starts `program` in a process group of its own, with default signal dispositions and an
// empty mask, its stdio on `p` (stdin /dev/null without input). Closes the child's ends.
api::StatusOr<pid_t> Spawn(const ProcessSpec& spec, const std::string& program, ChildPipes& p) {
  SpawnSetup setup;
  if (posix_spawnattr_init(&setup.attr) != 0 ||
      posix_spawn_file_actions_init(&setup.actions) != 0) {
    return api::InternalError("posix_spawn setup failed");
  }
  setup.attr_ok = setup.actions_ok = true;
  sigset_t none;
  sigset_t defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGQUIT}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  if (spec.input.empty()) {
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&setup.actions, p.in_read.get(), 0);
  }
  posix_spawn_file_actions_adddup2(&setup.actions, p.out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&setup.actions, p.err_write.get(), 2);
  if (!spec.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&setup.actions, spec.cwd.c_str());
  }
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (int rc =
          posix_spawn(&pid, program.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
      rc != 0) {
    return api::InternalError("cannot start " + spec.argv[0] + ": " + std::strerror(rc));
  }
  p.out_write.Close();
  p.err_write.Close();
  p.in_read.Close();
  if (!spec.input.empty()) {
    ::shutdown(p.in_write.get(), SHUT_RD);
  }
  return pid;
}

using Deadline = std::chrono::steady_clock::time_point;

// Why a run ends early: sbxd stops, or the deadline passed.
std::optional<api::Status> Interrupted(const ProcessSpec& spec, std::stop_token stop,
                                       Deadline deadline) {
  if (stop.stop_requested()) {
    return api::CancelledError(spec.argv[0] + " stopped: sbxd is shutting down");
  }
  if (std::chrono::steady_clock::now() >= deadline) {
    return api::DeadlineExceededError(spec.argv[0] + " did not finish within " +
                                      std::to_string(spec.timeout.count() / 1000) + "s");
  }
  return std::nullopt;
}

// Feeds stdin as the child reads it and collects its output (it may write output meanwhile:
// no deadlock) until both outputs close. The reason it ended early, if it did.
std::optional<api::Status> Pump(const ProcessSpec& spec, ChildPipes& p, std::stop_token stop,
                                Deadline deadline, ProcessResult& result) {
  bool out_open = true;
  bool err_open = true;
  size_t written = 0;
  char buffer[16 * 1024];
  while (out_open || err_open) {
    if (std::optional<api::Status> abort = Interrupted(spec, stop, deadline)) {
      return abort;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd fds[3];
    int n = 0;
    if (out_open) {
      fds[n++] = {p.out_read.get(), POLLIN, 0};
    }
    if (err_open) {
      fds[n++] = {p.err_read.get(), POLLIN, 0};
    }
    if (p.in_write.get() >= 0) {
      fds[n++] = {p.in_write.get(), POLLOUT, 0};
    }
    const int ready = ::poll(fds, n, static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100)));
    if (ready < 0 && errno != EINTR) {
      return api::InternalError(Errno("poll"));
    }
    for (int i = 0; i < n && ready > 0; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      if (fds[i].fd == p.in_write.get()) {
        const ssize_t sent = ::send(p.in_write.get(), spec.input.data() + written,
                                    spec.input.size() - written, MSG_NOSIGNAL);
        if (sent > 0) {
          written += static_cast<size_t>(sent);
        }
        if ((sent < 0 && errno != EAGAIN && errno != EINTR) || written == spec.input.size()) {
          p.in_write.Close();  // all written, or the child stopped reading: EOF on its stdin
        }
        continue;
      }
      const bool is_out = fds[i].fd == p.out_read.get();
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got <= 0) {
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
          continue;
        }
        (is_out ? out_open : err_open) = false;
        continue;
      }
      std::string& into = is_out ? result.out : result.err;
      const size_t room = spec.max_output_bytes - std::min(spec.max_output_bytes, into.size());
      if (static_cast<size_t>(got) > room) {
        result.truncated = true;
      }
      into.append(buffer, std::min(room, static_cast<size_t>(got)));
    }
  }
  return std::nullopt;
}

// Waits for the child; a child that closed its output may still run, and gets the rest of the
// deadline too. After `abort` (or a stop, or the deadline) its whole group is killed and reaped.
// The wait status, or `abort`'s error.
api::StatusOr<int> Reap(const ProcessSpec& spec, pid_t pid, std::stop_token stop, Deadline deadline,
                        std::optional<api::Status> abort) {
  int wait_status = 0;
  while (!abort) {
    const pid_t done = ::waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) {
      return wait_status;
    }
    if (done < 0 && errno != EINTR) {
      return api::InternalError(Errno("waitpid"));
    }
    abort = Interrupted(spec, stop, deadline);
    if (!abort) {
      ::poll(nullptr, 0, 10);
    }
  }
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) {
      return api::InternalError(Errno("waitpid"));
    }
  }
  return *abort;
}

}  // namespace

api::StatusOr<ProcessResult> PosixProcessRunner::Run(const ProcessSpec& spec,
                                                     std::stop_token stop) {
  if (spec.argv.empty()) {
    return api::InvalidArgumentError("no program to run");
  }
  const std::string program = Resolve(spec.argv[0], spec.env);
  if (program.empty()) {
    return api::NotFoundError("program \"" + spec.argv[0] + "\" not found in PATH");
  }
  ChildPipes pipes;
  RETURN_IF_ERROR(OpenPipes(!spec.input.empty(), pipes));
  ASSIGN_OR_RETURN(const pid_t pid, Spawn(spec, program, pipes));
  const Deadline deadline = std::chrono::steady_clock::now() + spec.timeout;
  ProcessResult result;
  std::optional<api::Status> abort = Pump(spec, pipes, stop, deadline, result);
  ASSIGN_OR_RETURN(const int wait_status, Reap(spec, pid, stop, deadline, std::move(abort)));
  result.exit_code = ExitCodeOf(wait_status);
  return result;
}

}  // namespace sbx::controller::gitops
