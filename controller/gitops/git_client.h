// GitClient: what a GitSource needs of a git repository — fetch a ref into a local cache and
// read the manifest files of one commit — done with the `git` CLI through a ProcessRunner
// (argv only, never a shell; every command with a timeout).
//
// The cache holds one bare repository per GitSource (`<cache_dir>/<key>.git`); a fetch brings
// the ref's commit (shallow, depth 1) to `refs/sbx/target`. Files are read straight from the
// commit's tree (`git ls-tree`, `git cat-file`): there is no working tree, so no checkout
// filter, hook or symlink of the repository can make sbxd read or run anything else.
//
// Isolation: git runs with an environment of its own (PATH, HOME=<cache_dir>, the proxy
// variables, GIT_TERMINAL_PROMPT=0, no system or global git config, so no credential helper or
// url rewrite of the host applies) and only the protocols https, ssh (http for a loopback
// host) and, when the operator allowed it, file.
//
// Credentials live in memory and in the child only:
//   token    → "Authorization: Basic base64(x-access-token:TOKEN)" in an environment variable
//              of the child, named by `--config-env=http.extraHeader=VAR` (never in argv or the
//              url);
//   ssh key  → a 0600 file in the cache, named by GIT_SSH_COMMAND, removed after the fetch.
// Error messages carry git's stderr (its last lines) with the token and key scrubbed.
//
// Thread-safety: calls for different keys may run at once; calls for one key must not (the
// Manager never reconciles one object twice at a time).
#pragma once

#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/gitops/process_runner.h"

namespace sbx::controller::gitops {

struct GitClientOptions {
  std::string cache_dir;  // created 0700 when missing
  std::chrono::milliseconds fetch_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
  bool allow_file_urls = false;  // file:// repositories (tests, local mirrors)
  // The most the manifests of one commit's path may hold together (ReadFiles refuses more
  // before it reads any): a repository must not make sbxd hold gigabytes.
  size_t max_total_bytes = size_t{64} << 20;
  // Variables of sbxd's environment passed to git: PATH and the proxy settings.
  std::vector<std::string> environment;
};

struct GitAuth {
  std::string token;    // HTTPS
  std::string ssh_key;  // PEM/OpenSSH private key
};

// One manifest file of a commit: its path within the repository and its bytes.
struct GitFile {
  std::string path;
  std::string content;
};

class GitClient {
 public:
  GitClient(ProcessRunner& runner, GitClientOptions options);

  // Fetches `ref` from `url` into the cache of `key` (a file name: "<namespace>_<name>") and
  // returns the full commit id it points to. kInvalidArgument for a url the policy refuses;
  // kUnavailable when git fails (its stderr, scrubbed, in the message); kDeadlineExceeded.
  [[nodiscard]] api::StatusOr<std::string> Fetch(const std::string& key, const std::string& url,
                                                 const api::GitRef& ref, const GitAuth& auth,
                                                 std::stop_token stop);

  // The *.yaml, *.yml and *.json files under `path` (a directory, recursively, or one file) of
  // `commit`, sorted by path. Symlinks and submodules are skipped. kNotFound when `path` is not
  // in the commit; a file larger than `max_file_bytes` is kInvalidArgument naming it and its
  // size (it is not read), and so are files larger than options.max_total_bytes together.
  [[nodiscard]] api::StatusOr<std::vector<GitFile>> ReadFiles(const std::string& key,
                                                              const std::string& commit,
                                                              const std::string& path,
                                                              size_t max_file_bytes,
                                                              std::stop_token stop);

  // Removes the cache of `key` (a GitSource gone). Missing is fine. Every method refuses, with
  // kInvalidArgument and without touching the disk, a key that is not one file name of
  // [a-z0-9_-] inside the cache directory.
  api::Status Remove(const std::string& key);

  const GitClientOptions& options() const { return options_; }

 private:
  // `input` goes to git's stdin; output beyond `max_output_bytes` is an error.
  api::StatusOr<ProcessResult> Git(const std::string& key, std::vector<std::string> args,
                                   std::vector<std::string> extra_env,
                                   std::chrono::milliseconds timeout, const GitAuth& auth,
                                   std::stop_token stop, std::string input = "",
                                   size_t max_output_bytes = size_t{64} << 20);
  api::StatusOr<std::string> RepoDir(const std::string& key) const;

  ProcessRunner& runner_;
  const GitClientOptions options_;
};

}  // namespace sbx::controller::gitops
