#include "emulator/executor/internal/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "api/base64.h"

namespace sbx::emulator::internal::executor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr size_t kRetainedBytesPerProcess = 1 << 20;
constexpr std::chrono::milliseconds kMaxReadWait = 30s;

std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += kHex[rng() % 16];
  }
  return out;
}

std::string NewSessionId() {
  return RandomHex(8) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" +
         RandomHex(12);
}

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// ---- ExecSession ------------------------------------------------------------------------------

ExecSession::ExecSession(std::string id, Sink sink) : id_(std::move(id)), sink_(std::move(sink)) {}

ExecSession::~ExecSession() { KillAll(); }

uint64_t ExecSession::attachment() const {
  std::lock_guard lock(mu_);
  return attachment_;
}

void ExecSession::Attach(Sink sink) {
  std::lock_guard lock(mu_);
  sink_ = std::move(sink);
  ++attachment_;
  detached_at_.reset();
}

void ExecSession::Detach(uint64_t attachment, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  if (attachment != attachment_) {
    return;  // a newer connection resumed it
  }
  sink_ = nullptr;
  detached_at_ = now;
}

void ExecSession::NotifyLocked(const std::string& method, const json& params) {
  cv_.notify_all();
  if (sink_) {
    sink_(json{{"method", method}, {"params", params}}.dump());
  }
}

void ExecSession::AppendOutputLocked(Proc& p, const std::string& stream, const std::string& bytes) {
  const int64_t seq = p.next_seq++;
  p.chunks.push_back(Event{seq, stream, bytes});
  p.retained_bytes += bytes.size();
  while (p.retained_bytes > kRetainedBytesPerProcess && p.chunks.size() > 1) {
    p.retained_bytes -= p.chunks.front().bytes.size();
    p.chunks.pop_front();
  }
  NotifyLocked("process/output", {{"processId", p.process_id},
                                  {"seq", seq},
                                  {"stream", stream},
                                  {"chunk", api::Base64Encode(bytes)}});
}

std::string ExecSession::Start(const StartRequest& r, const std::function<void()>& accepted) {
  auto p = std::make_shared<Proc>();
  p->process_id = r.process_id;
  p->tty = r.tty;
  {
    std::lock_guard lock(mu_);
    if (procs_.contains(r.process_id)) {
      return "process id " + r.process_id + " is already in use";
    }
    procs_[r.process_id] = p;
  }
  accepted();
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, status_pipe[2] = {-1, -1};
  const bool want_stdin = r.pipe_stdin || r.tty;
  std::string failure;
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(status_pipe, O_CLOEXEC) != 0 || (want_stdin && ::pipe2(in, O_CLOEXEC) != 0)) {
    failure = "cannot create pipes";
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : r.env) {
    env_strings.emplace_back(k).append("=").append(v);
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : r.argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);
  for (const auto& e : env_strings) {
    cenv.push_back(const_cast<char*>(e.c_str()));
  }
  cenv.push_back(nullptr);
  pid_t pid = -1;
  if (failure.empty()) {
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      // The executor blocks SIGTERM/SIGINT for its signal thread and ignores SIGPIPE; a child
      // gets the defaults (an ignored signal would stay ignored across exec).
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      int stdin_fd = want_stdin ? in[0] : ::open("/dev/null", O_RDONLY);
      ::dup2(stdin_fd, 0);
      ::dup2(out[1], 1);
      ::dup2(r.tty ? out[1] : err[1], 2);  // a terminal has one stream
      if (::chdir(r.cwd.c_str()) != 0) {
        int e = errno;
        (void)!::write(status_pipe[1], &e, sizeof(e));
        ::_exit(127);
      }
      ::execvpe(cargv[0], cargv.data(), cenv.data());
      int e = errno;
      (void)!::write(status_pipe[1], &e, sizeof(e));
      ::_exit(127);
    }
  }
  for (int fd : {out[1], err[1], status_pipe[1], in[0]}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  int child_errno = 0;
  ssize_t got = pid > 0 ? ::read(status_pipe[0], &child_errno, sizeof(child_errno)) : -1;
  if (status_pipe[0] >= 0) {
    ::close(status_pipe[0]);
  }
  if (failure.empty() && (pid < 0 || got > 0)) {
    failure = pid < 0 ? "fork failed"
                      : std::string("cannot start ") + r.argv[0] + " in " + r.cwd + ": " +
                            std::strerror(child_errno);
    if (pid > 0) {
      ::waitpid(pid, nullptr, 0);
    }
  }
  if (!failure.empty()) {
    for (int fd : {out[0], err[0], in[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    // Nothing ran: report it like a shell would (127), through the same events as a real exit.
    std::lock_guard lock(mu_);
    p->failure = failure;
    AppendOutputLocked(*p, "stderr", failure + "\n");
    p->exited = true;
    p->exit_code = 127;
    NotifyLocked("process/exited", {{"processId", p->process_id},
                                    {"seq", p->next_seq++},
                                    {"exitCode", 127},
                                    {"sandboxDenied", false}});
    p->closed = true;
    NotifyLocked("process/closed", {{"processId", p->process_id}, {"seq", p->next_seq++}});
    return "";
  }
  std::lock_guard lock(mu_);
  p->pid = pid;
  p->out_fd = out[0];
  p->err_fd = err[0];
  p->in_fd = in[1];
  Proc* raw = p.get();
  p->reader = std::thread([this, raw] { Pump(*raw); });
  return "";
}

void ExecSession::Pump(Proc& p) {
  std::optional<int> exit_code;
  std::optional<std::chrono::steady_clock::time_point> drain_until;
  int fds[2] = {p.out_fd, p.err_fd};
  const char* names[2] = {p.tty ? "pty" : "stdout", p.tty ? "pty" : "stderr"};
  char buf[16384];
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd polled[2];
    int n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) {
        polled[n] = {fds[i], POLLIN, 0};
        which[n++] = i;
      }
    }
    if (::poll(polled, n, 50) > 0) {
      for (int k = 0; k < n; ++k) {
        if (!(polled[k].revents & (POLLIN | POLLHUP | POLLERR))) {
          continue;
        }
        ssize_t got = ::read(polled[k].fd, buf, sizeof(buf));
        if (got > 0) {
          std::lock_guard lock(mu_);
          AppendOutputLocked(p, names[which[k]], std::string(buf, size_t(got)));
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(fds[which[k]]);
          fds[which[k]] = -1;
        }
      }
    }
    if (!exit_code) {
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
        exit_code = ExitCodeOf(status);
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
    ::waitpid(p.pid, &status, 0);
    exit_code = ExitCodeOf(status);
  }
  std::lock_guard lock(mu_);
  p.pid = -p.pid;  // reaped: never signal this pid (group) again
  if (p.in_fd >= 0) {
    ::close(p.in_fd);
    p.in_fd = -1;
  }
  p.exited = true;
  p.exit_code = *exit_code;
  NotifyLocked("process/exited", {{"processId", p.process_id},
                                  {"seq", p.next_seq++},
                                  {"exitCode", *exit_code},
                                  {"sandboxDenied", false}});
  p.closed = true;
  NotifyLocked("process/closed", {{"processId", p.process_id}, {"seq", p.next_seq++}});
}

std::optional<nlohmann::json> ExecSession::Read(const std::string& process_id, int64_t after_seq,
                                                std::optional<size_t> max_bytes,
                                                std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  auto it = procs_.find(process_id);
  if (it == procs_.end()) {
    return std::nullopt;
  }
  std::shared_ptr<Proc> p = it->second;
  // Anything after after_seq: a chunk, or the exit/close events (their seqs follow the output).
  auto has_news = [&] { return p->next_seq - 1 > after_seq; };
  if (wait.count() > 0 && !has_news()) {
    cv_.wait_for(lock, std::min(wait, kMaxReadWait), has_news);
  }
  json chunks = json::array();
  size_t bytes = 0;
  int64_t next_seq = p->next_seq;
  for (const Event& e : p->chunks) {
    if (e.seq <= after_seq) {
      continue;
    }
    if (max_bytes && !chunks.empty() && bytes + e.bytes.size() > *max_bytes) {
      next_seq = e.seq;  // the caller continues from here
      break;
    }
    bytes += e.bytes.size();
    chunks.push_back({{"seq", e.seq}, {"stream", e.stream}, {"chunk", api::Base64Encode(e.bytes)}});
  }
  json out = {{"chunks", std::move(chunks)},
              {"nextSeq", next_seq},
              {"exited", p->exited},
              {"closed", p->closed},
              {"sandboxDenied", false}};
  if (p->exited) {
    out["exitCode"] = p->exit_code;
  }
  if (!p->failure.empty()) {
    out["failure"] = p->failure;
  }
  return out;
}

std::string ExecSession::Write(const std::string& process_id, const std::string& bytes) {
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    auto it = procs_.find(process_id);
    if (it == procs_.end()) {
      return "unknownProcess";
    }
    if (it->second->in_fd < 0 || it->second->exited) {
      return "stdinClosed";
    }
    // A duplicate, so that the pump closing the original on exit cannot pull it away mid-write.
    fd = ::fcntl(it->second->in_fd, F_DUPFD_CLOEXEC, 0);
  }
  if (fd < 0) {
    return "stdinClosed";
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    done += size_t(n);
  }
  ::close(fd);
  return done == bytes.size() ? "accepted" : "stdinClosed";
}

bool ExecSession::Signal(const std::string& process_id, int sig) {
  std::lock_guard lock(mu_);
  auto it = procs_.find(process_id);
  if (it == procs_.end() || it->second->pid <= 0) {
    return false;
  }
  ::kill(-it->second->pid, sig);
  return true;
}

void ExecSession::KillAll() {
  std::map<std::string, std::shared_ptr<Proc>> procs;
  {
    std::lock_guard lock(mu_);
    procs = procs_;
    for (auto& [id, p] : procs) {
      if (p->pid > 0) {
        ::kill(-p->pid, SIGKILL);
      }
    }
  }
  for (auto& [id, p] : procs) {
    if (p->reader.joinable()) {
      p->reader.join();
    }
  }
}

// ---- ExecSessions -----------------------------------------------------------------------------

ExecSessions::ExecSessions(std::chrono::milliseconds resume_window)
    : resume_window_(resume_window), reaper_([this](std::stop_token st) { ReapLoop(st); }) {
  // process/write writes to children's stdin pipes: a child that exited must not take the
  // executor down with SIGPIPE (the write then fails with EPIPE → "stdinClosed").
  ::signal(SIGPIPE, SIG_IGN);
}

ExecSessions::~ExecSessions() {
  reaper_.request_stop();
  reaper_.join();
  KillAll();
}

std::shared_ptr<ExecSession> ExecSessions::Create(Sink sink) {
  auto session = std::make_shared<ExecSession>(NewSessionId(), std::move(sink));
  std::lock_guard lock(mu_);
  sessions_[session->id()] = session;
  return session;
}

std::shared_ptr<ExecSession> ExecSessions::Resume(const std::string& id, Sink sink) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return nullptr;
  }
  {
    std::lock_guard session_lock(it->second->mu_);
    if (it->second->detached_at_ &&
        std::chrono::steady_clock::now() - *it->second->detached_at_ >= resume_window_) {
      return nullptr;  // expired; the reaper ends it
    }
  }
  it->second->Attach(std::move(sink));
  return it->second;
}

void ExecSessions::Detach(const std::shared_ptr<ExecSession>& session, uint64_t attachment) {
  if (session == nullptr) {
    return;
  }
  session->Detach(attachment, std::chrono::steady_clock::now());
  cv_.notify_all();
}

void ExecSessions::KillAll() {
  std::map<std::string, std::shared_ptr<ExecSession>> sessions;
  {
    std::lock_guard lock(mu_);
    sessions.swap(sessions_);
  }
  for (auto& [id, s] : sessions) {
    s->KillAll();
  }
}

void ExecSessions::ReapLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::shared_ptr<ExecSession>> expired;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, stop, std::min<std::chrono::milliseconds>(resume_window_ / 4, 1s),
                   [] { return false; });
      const auto now = std::chrono::steady_clock::now();
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        bool gone = false;
        {
          std::lock_guard session_lock(it->second->mu_);
          gone = it->second->detached_at_ && now - *it->second->detached_at_ >= resume_window_;
        }
        if (gone) {
          expired.push_back(it->second);
          it = sessions_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& s : expired) {
      s->KillAll();  // no resume came: the processes are terminated (§7.5)
    }
  }
}

}  // namespace sbx::emulator::internal::executor
