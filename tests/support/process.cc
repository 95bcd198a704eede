#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace sbx::testing {
namespace {

namespace fs = std::filesystem;

// The first line of `text` matching `pattern`, as its groups.
std::optional<std::vector<std::string>> MatchLine(const std::string& text,
                                                  const std::regex& pattern) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, pattern)) {
      std::vector<std::string> groups;
      for (const auto& g : m) {
        groups.push_back(g.str());
      }
      return groups;
    }
  }
  return std::nullopt;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return WEXITSTATUS(wait_status);
  }
  if (WIFSIGNALED(wait_status)) {
    return 128 + WTERMSIG(wait_status);
  }
  return -1;
}

}  // namespace

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ProcessAlive(int64_t pid) {
  if (pid <= 0) {
    return false;
  }
  // "<pid> (<comm>) <state> …": the state follows the last ')', as comm may hold one.
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

api::StatusOr<std::unique_ptr<Process>> Process::Start(const fs::path& binary,
                                                       ProcessOptions options) {
  if (options.stdout_path.empty() || options.stderr_path.empty()) {
    return api::InvalidArgumentError("Process::Start needs stdout_path and stderr_path");
  }
  std::vector<std::string> argv_s = {binary.string()};
  argv_s.insert(argv_s.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);

  // Environment: ours, minus unset_env and the overridden names, plus env.
  std::set<std::string> drop(options.unset_env.begin(), options.unset_env.end());
  for (const auto& [k, v] : options.env) {
    drop.insert(k);
  }
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!drop.contains(entry.substr(0, entry.find('=')))) {
      env_s.push_back(entry);
    }
  }
  for (const auto& [k, v] : options.env) {
    env_s.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (std::string& e : env_s) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);

  std::string stdin_path = "/dev/null";
  if (!options.stdin_text.empty()) {
    stdin_path = options.stdout_path.string() + ".stdin";
    std::ofstream(stdin_path, std::ios::binary) << options.stdin_text;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, options.stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, options.stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string cwd;
  if (options.cwd) {
    cwd = options.cwd->string();
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (so Kill reaches the children too) and default signal handling and mask,
  // whatever the test runner's are.
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv_s[0].c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return api::InternalError("cannot start " + binary.string() + ": " + std::strerror(rc));
  }
  return std::unique_ptr<Process>(new Process(pid, std::move(options)));
}

Process::~Process() {
  if (Running()) {
    Kill();
  }
}

bool Process::Running() {
  if (exit_code_) {
    return false;
  }
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = ExitCodeOf(status);
    return false;
  }
  return r == 0;
}

void Process::Signal(int signal) {
  if (Running()) {
    ::kill(pid_, signal);
  }
}

int Process::Kill() {
  if (!exit_code_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_code_ = ExitCodeOf(status);
  }
  return *exit_code_;
}

std::optional<int> Process::Wait(Deadline deadline) {
  PollUntil([&] { return !Running(); }, deadline, std::chrono::milliseconds(10));
  return exit_code_;
}

std::string Process::Stdout() const { return ReadFile(options_.stdout_path); }
std::string Process::Stderr() const { return ReadFile(options_.stderr_path); }

std::optional<std::vector<std::string>> Process::WaitForLine(const std::regex& pattern,
                                                             Deadline deadline, bool from_stderr) {
  std::optional<std::vector<std::string>> found;
  PollUntil(
      [&] {
        const bool running = Running();  // before reading: output written before exit is seen
        found = MatchLine(from_stderr ? Stderr() : Stdout(), pattern);
        return found.has_value() || !running;
      },
      deadline);
  return found;
}

std::string Process::FindInOutput(const std::regex& pattern, int group, bool from_stderr) {
  auto m = MatchLine(from_stderr ? Stderr() : Stdout(), pattern);
  if (!m || group >= static_cast<int>(m->size())) {
    return "";
  }
  return (*m)[group];
}

RunResult RunProcess(const fs::path& binary, const std::vector<std::string>& args,
                     const fs::path& scratch_dir, const std::map<std::string, std::string>& env,
                     std::chrono::milliseconds timeout, const std::string& stdin_text) {
  static std::atomic<int> counter{0};
  const std::string stem =
      binary.filename().string() + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  ProcessOptions options;
  options.args = args;
  options.env = env;
  options.stdout_path = scratch_dir / (stem + ".out");
  options.stderr_path = scratch_dir / (stem + ".err");
  options.stdin_text = stdin_text;
  RunResult result;
  auto process = Process::Start(binary, options);
  if (!process.ok()) {
    result.err = process.status().ToString();
    return result;
  }
  std::optional<int> code = (*process)->Wait(In(timeout));
  if (!code) {
    (*process)->Kill();
  } else {
    result.exit_code = *code;
  }
  result.out = (*process)->Stdout();
  result.err = (*process)->Stderr();
  std::error_code ec;
  fs::remove(options.stdout_path, ec);
  fs::remove(options.stderr_path, ec);
  fs::remove(options.stdout_path.string() + ".stdin", ec);
  return result;
}

}  // namespace sbx::testing
