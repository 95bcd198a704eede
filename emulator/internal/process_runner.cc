#include "emulator/internal/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

namespace sbx::emulator::internal {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// Everything the child needs, prepared before fork(): after fork() in a multi-threaded
// process only async-signal-safe calls are allowed, so no allocation happens in the child.
struct ChildPlan {
  std::vector<std::string> argv_store;
  std::vector<char*> argv;
  std::vector<std::string> env_store;
  std::vector<char*> envp;
  std::vector<std::string> candidates;  // absolute program paths to try in order
  std::string cwd;
  std::vector<BindMount> binds;
  std::vector<BindMount> overlays;
  std::vector<std::string> overlay_options;  // "lowerdir=source:target", one per overlay
  bool namespaced = false;
};

ChildPlan MakePlan(const SpawnSpec& spec) {
  ChildPlan plan;
  plan.argv_store.push_back(spec.cmd);
  plan.argv_store.insert(plan.argv_store.end(), spec.args.begin(), spec.args.end());
  for (auto& a : plan.argv_store) {
    plan.argv.push_back(a.data());
  }
  plan.argv.push_back(nullptr);
  plan.env_store = spec.env;
  for (auto& e : plan.env_store) {
    plan.envp.push_back(e.data());
  }
  plan.envp.push_back(nullptr);
  if (spec.cmd.find('/') != std::string::npos) {
    plan.candidates.push_back(spec.cmd);
  } else if (!spec.cmd.empty()) {
    std::size_t start = 0;
    while (start <= spec.search_path.size()) {
      std::size_t colon = spec.search_path.find(':', start);
      if (colon == std::string::npos) {
        colon = spec.search_path.size();
      }
      std::string dir = spec.search_path.substr(start, colon - start);
      if (dir.empty()) {
        dir = ".";
      }
      plan.candidates.push_back(dir + "/" + spec.cmd);
      start = colon + 1;
    }
  }
  plan.cwd = spec.cwd;
  plan.binds = spec.binds;
  plan.overlays = spec.overlays;
  for (const auto& o : spec.overlays) {
    plan.overlay_options.push_back("lowerdir=" + o.source + ":" + o.target);
  }
  plan.namespaced = spec.isolation == Isolation::kMountNamespace;
  return plan;
}

[[noreturn]] void ChildFail(int status_fd, int err) {
  (void)!::write(status_fd, &err, sizeof err);
  ::_exit(127);
}

[[noreturn]] void RunChild(const ChildPlan& plan, int out_w, int err_w, int status_w, int devnull) {
  ::setpgid(0, 0);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);  // the emulator's main may block SIGTERM
  ::signal(SIGPIPE, SIG_DFL);
  if (::dup2(devnull, 0) < 0 || ::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) {
    ChildFail(status_w, errno);
  }
  // Nothing of the emulator (sockets, other sandboxes' pipes) leaks into the sandbox.
  if (::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
    for (int fd = 3; fd < 4096; ++fd) {
      if (fd != status_w) {
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
  }
  if (plan.namespaced) {
    if (::unshare(CLONE_NEWNS) != 0) {
      ChildFail(status_w, errno);
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      ChildFail(status_w, errno);
    }
    for (const auto& b : plan.binds) {
      if (::mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        ChildFail(status_w, errno);
      }
    }
    for (size_t i = 0; i < plan.overlays.size(); ++i) {
      const BindMount& o = plan.overlays[i];
      if (::mount("overlay", o.target.c_str(), "overlay", MS_RDONLY,
                  plan.overlay_options[i].c_str()) != 0) {
        // No overlayfs here: the source alone over the target (see SpawnSpec::overlays).
        (void)::mount(o.source.c_str(), o.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
      }
    }
  }
  if (!plan.cwd.empty() && ::chdir(plan.cwd.c_str()) != 0) {
    ChildFail(status_w, errno);
  }
  int err = ENOENT;
  for (const auto& c : plan.candidates) {
    ::execve(c.c_str(), plan.argv.data(), plan.envp.data());
    // Like execvp: keep looking after ENOENT/ENOTDIR, remember EACCES.
    if (errno == EACCES) {
      err = EACCES;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
  }
  ChildFail(status_w, err);
}

// Reads what is available on a non-blocking fd. Returns false at EOF or on error.
bool ReadAvailable(int fd, std::string& sink, std::size_t& total, std::size_t cap,
                   bool& truncated) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      std::size_t keep = total < cap ? std::min<std::size_t>(cap - total, n) : 0;
      sink.append(buf, keep);
      total += keep;
      if (keep < static_cast<std::size_t>(n)) {
        truncated = true;
      }
      continue;
    }
    if (n == 0) {
      return false;
    }
    if (errno == EINTR) {
      continue;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace

std::string_view IsolationName(Isolation isolation) {
  return isolation == Isolation::kMountNamespace ? "mount-namespace" : "path-rewrite";
}

Isolation ProbeIsolation() {
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = ::unshare(CLONE_NEWNS) == 0 &&
              ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    ::_exit(ok ? 0 : 1);
  }
  if (pid < 0) {
    return Isolation::kPathRewrite;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? Isolation::kMountNamespace
                                                       : Isolation::kPathRewrite;
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      out_fd_(std::exchange(other.out_fd_, -1)),
      err_fd_(std::exchange(other.err_fd_, -1)),
      status_fd_(std::exchange(other.status_fd_, -1)),
      waited_(std::exchange(other.waited_, true)),
      fork_error_(std::move(other.fork_error_)) {}

Process::~Process() {
  if (pid_ > 0 && !waited_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  CloseFd(status_fd_);
}

Process Process::Spawn(const SpawnSpec& spec) {
  Process p;
  ChildPlan plan = MakePlan(spec);
  int out[2] = {-1, -1}, err[2] = {-1, -1}, st[2] = {-1, -1};
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(st, O_CLOEXEC) != 0 ||
      devnull < 0) {
    p.fork_error_ = std::string("pipe: ") + std::strerror(errno);
    for (int fd : {out[0], out[1], err[0], err[1], st[0], st[1], devnull}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    return p;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    RunChild(plan, out[1], err[1], st[1], devnull);
  }
  int fork_errno = errno;
  for (int fd : {out[1], err[1], st[1], devnull}) {
    ::close(fd);
  }
  if (pid < 0) {
    p.fork_error_ = std::string("fork: ") + std::strerror(fork_errno);
    for (int fd : {out[0], err[0], st[0]}) {
      ::close(fd);
    }
    return p;
  }
  ::setpgid(pid, pid);  // also done in the child; whichever runs first wins the race
  p.pid_ = pid;
  p.out_fd_ = out[0];
  p.err_fd_ = err[0];
  p.status_fd_ = st[0];
  ::fcntl(p.out_fd_, F_SETFL, O_NONBLOCK);
  ::fcntl(p.err_fd_, F_SETFL, O_NONBLOCK);
  return p;
}

ProcessResult Process::Wait(std::chrono::milliseconds timeout, std::size_t output_cap) {
  ProcessResult r;
  if (pid_ <= 0 || waited_) {
    r.spawn_error = fork_error_.empty() ? "not started" : fork_error_;
    return r;
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;

  // Blocks until the child has exec'd (EOF: CLOEXEC closed the pipe) or reported an errno.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(status_fd_, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  CloseFd(status_fd_);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    waited_ = true;
    r.spawn_error = std::strerror(child_errno);
    return r;
  }
  r.started = true;

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  std::size_t total = 0;
  int status = 0;
  bool exited = false;
  while (!exited) {
    auto now = Clock::now();
    if (now >= deadline) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      exited = true;
      r.timed_out = true;
      break;
    }
    auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    pollfd fds[3];
    int nfds = 0;
    if (out_fd_ >= 0) {
      fds[nfds++] = {out_fd_, POLLIN, 0};
    }
    if (err_fd_ >= 0) {
      fds[nfds++] = {err_fd_, POLLIN, 0};
    }
    if (pidfd >= 0) {
      fds[nfds++] = {pidfd, POLLIN, 0};
    }
    // Without a pidfd, exit is noticed by polling waitpid every 10 ms.
    int wait_ms = pidfd >= 0 ? static_cast<int>(std::min<long long>(remaining, 60000))
                             : static_cast<int>(std::min<long long>(remaining, 10));
    int rc = ::poll(fds, nfds, wait_ms);
    if (rc < 0 && errno != EINTR) {
      break;
    }
    if (out_fd_ >= 0 && !ReadAvailable(out_fd_, r.stdout_text, total, output_cap, r.truncated)) {
      CloseFd(out_fd_);
    }
    if (err_fd_ >= 0 && !ReadAvailable(err_fd_, r.stderr_text, total, output_cap, r.truncated)) {
      CloseFd(err_fd_);
    }
    pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_) {
      exited = true;
    }
  }
  if (pidfd >= 0) {
    ::close(pidfd);
  }
  waited_ = true;
  // Output the child wrote before exiting is still in the pipes; a backgrounded descendant may
  // hold them open forever, so take what is there and stop.
  if (out_fd_ >= 0) {
    ReadAvailable(out_fd_, r.stdout_text, total, output_cap, r.truncated);
  }
  if (err_fd_ >= 0) {
    ReadAvailable(err_fd_, r.stderr_text, total, output_cap, r.truncated);
  }
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.term_signal = WTERMSIG(status);
    }
  }
  return r;
}

std::vector<pid_t> FindProcessesWithEnv(std::string_view marker) {
  std::vector<pid_t> pids;
  const bool prefix = !marker.empty() && marker.back() == '/';
  const pid_t self = ::getpid();
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) {
    return pids;
  }
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0 || pid == self) {
      continue;
    }
    std::ifstream in("/proc/" + std::string(e->d_name) + "/environ", std::ios::binary);
    if (!in) {
      continue;
    }
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t start = 0;
    while (start < env.size()) {
      std::size_t nul = env.find('\0', start);
      if (nul == std::string::npos) {
        nul = env.size();
      }
      std::string_view entry(env.data() + start, nul - start);
      if (prefix ? entry.starts_with(marker) : entry == marker) {
        pids.push_back(static_cast<pid_t>(pid));
        break;
      }
      start = nul + 1;
    }
  }
  ::closedir(dir);
  return pids;
}

int KillProcessesWithEnv(std::string_view marker) {
  std::set<pid_t> killed;
  for (int round = 0; round < 50; ++round) {
    auto pids = FindProcessesWithEnv(marker);
    if (pids.empty()) {
      break;
    }
    for (pid_t pid : pids) {
      if (::kill(pid, SIGKILL) == 0) {
        killed.insert(pid);
      }
    }
    // A SIGKILLed process keeps its environ readable until it is gone; give it a moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 5 ? 1 : 10));
  }
  return static_cast<int>(killed.size());
}

}  // namespace sbx::emulator::internal
