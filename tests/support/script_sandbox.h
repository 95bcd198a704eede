// ScriptSandbox: a directory standing in for a sandbox, in which unit tests run the reconcilers'
// exec-sync scripts for real, with bash: /home/sandbox-agent in arguments is rewritten to
// `home`, the way the emulator does when it has no mount namespace. The executor is a script
// named `codex` on PATH (SetCodex). The destructor kills every executor recorded under
// home/.sbx and removes the root. Header-only; one per test, not thread-safe.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "controller/cloud/databricks/sandbox_api.h"

namespace sbx::testing {

namespace script_sandbox_internal {
// Alive and not a zombie (nobody may reap a detached executor in a test container).
inline bool Alive(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] != 'Z';
}

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace script_sandbox_internal

using script_sandbox_internal::Alive;
using script_sandbox_internal::Slurp;

class ScriptSandbox {
 public:
  // Rooted at <tmp>/<prefix><pid>-<the running test's name>, emptied first; booted as `boot`.
  ScriptSandbox(const std::string& prefix, const std::string& boot)
      : root_(std::filesystem::temp_directory_path() /
              (prefix + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        home_(root_ / "home") {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(home_);
    std::filesystem::create_directories(root_ / "bin");
    SetBoot(boot);
  }
  ~ScriptSandbox() {
    KillExecutor();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ScriptSandbox(const ScriptSandbox&) = delete;
  ScriptSandbox& operator=(const ScriptSandbox&) = delete;

  std::filesystem::path root() const { return root_; }

  void SetCodex(const std::string& body) {
    const std::filesystem::path codex = root_ / "bin" / "codex";
    std::ofstream(codex) << "#!/bin/bash\n" << body << "\n";
    std::filesystem::permissions(codex, std::filesystem::perms::owner_all);
  }
  void SetBoot(const std::string& boot) { std::ofstream(root_ / "boot-id") << boot << "\n"; }
  std::string boot_marker() const { return (root_ / "boot-id").string(); }
  std::filesystem::path home() const { return home_; }
  std::filesystem::path executor_dir(const std::string& worker) const {
    return home_ / ".sbx" / worker;
  }

  int ExecutorPid(const std::string& worker) const {
    std::string pid = Slurp(executor_dir(worker) / "pid");
    return pid.empty() ? 0 : std::stoi(pid);
  }
  bool ExecutorAlive(const std::string& worker) const { return Alive(ExecutorPid(worker)); }
  // Kills every executor whose pid is recorded under home/.sbx (workers' and tasks').
  void KillExecutor() {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(home_ / ".sbx", ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() != "pid") {
        continue;
      }
      const std::string pid = Slurp(it->path());
      if (!pid.empty() && std::stoi(pid) > 0) {
        kill(std::stoi(pid), SIGKILL);
        waitpid(std::stoi(pid), nullptr, WNOHANG);
      }
    }
  }

  controller::databricks::ExecResult Run(const controller::databricks::ExecRequest& req) {
    std::vector<std::string> argv = {req.cmd};
    for (std::string a : req.args) {
      const std::string prefix = "/home/sandbox-agent";
      if (a.rfind(prefix, 0) == 0) {
        a = home_.string() + a.substr(prefix.size());
      }
      argv.push_back(a);
    }
    std::vector<std::string> env = {"PATH=" + (root_ / "bin").string() + ":/usr/bin:/bin"};
    for (const auto& [k, v] : req.envs) {
      env.push_back(k + "=" + v);
    }
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::filesystem::path out = root_ / "exec.out", err = root_ / "exec.err";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, req.cmd.c_str(), &actions, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&actions);
    controller::databricks::ExecResult r;
    if (rc != 0) {
      r.status = controller::databricks::ExecStatus::kFailed;
      return r;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r.status = controller::databricks::ExecStatus::kCompleted;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.stdout_text = Slurp(out);
    r.stderr_text = Slurp(err);
    return r;
  }

 private:
  std::filesystem::path root_;
  std::filesystem::path home_;
};

}  // namespace sbx::testing
