// GitClient and PosixProcessRunner: credentials reach git only through its environment (never
// argv, never a message), an SSH key file exists 0600 only for the fetch, the runner passes
// exactly the environment it is given and kills what outlives its timeout, and the files of a
// commit are read from its tree (symlinks skipped, a too-large file refused by its size).
#include "controller/gitops/git_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "api/base64.h"
#include "controller/gitops/process_runner.h"

namespace sbx::controller::gitops {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "ghp_SECRETTOKEN1234567890";

// Aggregates spelled out in full (designated initializers would leave members to
// -Wmissing-field-initializers).
ProcessSpec Spec(std::vector<std::string> argv, std::vector<std::string> env,
                 std::chrono::milliseconds timeout = std::chrono::minutes(1)) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  spec.timeout = timeout;
  return spec;
}
GitClientOptions Options(const fs::path& cache_dir, bool allow_file_urls = false) {
  GitClientOptions options;
  options.cache_dir = cache_dir.string();
  options.allow_file_urls = allow_file_urls;
  options.environment = {"PATH=/usr/bin:/bin"};
  return options;
}
GitAuth Token(std::string token) {
  GitAuth auth;
  auth.token = std::move(token);
  return auth;
}
GitAuth Key(std::string key) {
  GitAuth auth;
  auth.ssh_key = std::move(key);
  return auth;
}

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("sbx-gitclient-" + std::to_string(std::random_device{}()))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Records every spec; answers git's commands like a server that knows one commit, and says
// whatever `fetch_err` holds when the fetch fails.
class FakeRunner final : public ProcessRunner {
 public:
  api::StatusOr<ProcessResult> Run(const ProcessSpec& spec, std::stop_token) override {
    specs.push_back(spec);
    ProcessResult r;
    const bool fetch = std::find(spec.argv.begin(), spec.argv.end(), "fetch") != spec.argv.end();
    if (fetch) {
      for (const std::string& e : spec.env) {
        if (e.starts_with("GIT_SSH_COMMAND=")) {
          const size_t i = e.find("-i '");
          if (i != std::string::npos) {
            key_path = e.substr(i + 4, e.find('\'', i + 4) - i - 4);
            struct stat st {};
            key_mode = ::stat(key_path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
          }
        }
      }
      r.exit_code = fetch_err.empty() ? 0 : 128;
      r.err = fetch_err;
    } else if (std::find(spec.argv.begin(), spec.argv.end(), "rev-parse") != spec.argv.end()) {
      r.out = std::string(40, 'f') + "\n";
    } else if (std::find(spec.argv.begin(), spec.argv.end(), "ls-tree") != spec.argv.end()) {
      r.out = "100644 blob " + std::string(40, 'a') + "      5\tdeploy/a.yaml";
      r.out.push_back('\0');
      r.truncated = truncate_listing;
    } else if (std::find(spec.argv.begin(), spec.argv.end(), "-t") != spec.argv.end()) {
      r.out = "tree\n";
    } else if (std::find(spec.argv.begin(), spec.argv.end(), "--batch") != spec.argv.end()) {
      r.out = std::string(40, 'a') + " blob 5\na: 1\n\n";
    }
    return r;
  }
  std::vector<ProcessSpec> specs;
  bool truncate_listing = false;
  std::string fetch_err;
  std::string key_path;
  unsigned key_mode = 0;
};

const ProcessSpec& FetchSpec(const FakeRunner& runner) {
  for (const ProcessSpec& s : runner.specs) {
    if (std::find(s.argv.begin(), s.argv.end(), "fetch") != s.argv.end()) {
      return s;
    }
  }
  ADD_FAILURE() << "no fetch";
  return runner.specs.front();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    out += s + "\n";
  }
  return out;
}

// A listing git cut at the output bound would drop files, which a prune would then delete: it
// is an error, not a shorter list.
TEST(GitClientTest, ACutListingIsAnErrorNotFewerFiles) {
  TempDir dir;
  FakeRunner runner;
  GitClient git(runner, Options(dir.path()));
  api::StatusOr<std::vector<GitFile>> whole =
      git.ReadFiles("ns_a", std::string(40, 'f'), "deploy", 1024, {});
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 1u);
  runner.truncate_listing = true;
  api::StatusOr<std::vector<GitFile>> cut =
      git.ReadFiles("ns_a", std::string(40, 'f'), "deploy", 1024, {});
  EXPECT_EQ(cut.status().code(), api::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("git ls-tree wrote more than"));
}

TEST(GitClientTest, TheTokenGoesInAnEnvironmentHeaderNeverArgvOrMessages) {
  TempDir dir;
  FakeRunner runner;
  GitClient git(runner, Options(dir.path()));
  api::GitRef ref;
  ref.branch = "main";
  api::StatusOr<std::string> commit =
      git.Fetch("ns_a", "https://git.example.com/r.git", ref, Token(kToken), {});
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(*commit, std::string(40, 'f'));
  const ProcessSpec& fetch = FetchSpec(runner);
  for (const ProcessSpec& s : runner.specs) {
    EXPECT_THAT(Joined(s.argv), Not(HasSubstr(kToken)));
  }
  EXPECT_THAT(Joined(fetch.argv), HasSubstr("--config-env=http.extraHeader=SBX_GIT_HTTP_HEADER"));
  EXPECT_THAT(Joined(fetch.argv), HasSubstr("+refs/heads/main:refs/sbx/target"));
  EXPECT_THAT(Joined(fetch.env),
              HasSubstr("SBX_GIT_HTTP_HEADER=Authorization: Basic " +
                        api::Base64Encode(std::string("x-access-token:") + kToken)));
  // No host git configuration, no prompt, and no variable of sbxd's but those passed in.
  EXPECT_THAT(Joined(fetch.env), HasSubstr("GIT_CONFIG_GLOBAL=/dev/null"));
  EXPECT_THAT(Joined(fetch.env), HasSubstr("GIT_TERMINAL_PROMPT=0"));
  EXPECT_THAT(Joined(fetch.argv), HasSubstr("protocol.file.allow=never"));

  // git echoing the token (or the header) back: the message has neither.
  runner.fetch_err = std::string("fatal: auth failed for ") + kToken + " with " +
                     api::Base64Encode(std::string("x-access-token:") + kToken) + "\n";
  api::StatusOr<std::string> failed =
      git.Fetch("ns_a", "https://git.example.com/r.git", ref, Token(kToken), {});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), api::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(failed.status().message()), Not(HasSubstr(kToken)));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("[REDACTED]"));
}

TEST(GitClientTest, AnSshKeyIsA0600FileOnlyForTheFetch) {
  TempDir dir;
  FakeRunner runner;
  GitClient git(runner, Options(dir.path()));
  api::GitRef ref;
  ref.tag = "v1";
  const std::string key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----";
  ASSERT_TRUE(git.Fetch("ns_a", "git@h:r.git", ref, Key(key), {}).ok());
  ASSERT_FALSE(runner.key_path.empty()) << Joined(FetchSpec(runner).env);
  EXPECT_EQ(runner.key_mode, 0600u);
  EXPECT_FALSE(fs::exists(runner.key_path)) << "the key outlived the fetch";
  EXPECT_THAT(Joined(FetchSpec(runner).env), HasSubstr("IdentitiesOnly=yes"));
  EXPECT_THAT(Joined(FetchSpec(runner).env), HasSubstr("StrictHostKeyChecking=accept-new"));
  for (const ProcessSpec& s : runner.specs) {
    EXPECT_THAT(Joined(s.argv) + Joined(s.env), Not(HasSubstr("abc\n-----END")));
  }
}

// #24: without sshKeyFrom, ssh must not fall back on the sbxd user's keys, agent or config.
// The real ssh evaluates the command git would run (`ssh -G` prints the effective settings).
TEST(GitClientTest, SshWithoutAKeyUsesNoneOfTheUsersKeysAgentOrConfig) {
  TempDir dir;
  FakeRunner runner;
  GitClient git(runner, Options(dir.path()));
  api::GitRef ref;
  ref.branch = "main";
  ASSERT_TRUE(git.Fetch("ns_a", "git@h.example:r.git", ref, {}, {}).ok());
  std::string ssh;
  for (const std::string& e : FetchSpec(runner).env) {
    if (e.starts_with("GIT_SSH_COMMAND=")) {
      ssh = e.substr(std::string("GIT_SSH_COMMAND=").size());
    }
  }
  ASSERT_FALSE(ssh.empty());
  PosixProcessRunner real;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", ssh + " -G h.example"};
  spec.env = {"PATH=/usr/bin:/bin", "SSH_AUTH_SOCK=/tmp/an-agent"};
  spec.timeout = std::chrono::seconds(10);
  api::StatusOr<ProcessResult> r = real.Run(spec, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  EXPECT_THAT(r->out, HasSubstr("\nidentityfile none\n"));
  EXPECT_THAT(r->out, Not(HasSubstr("identityfile ~/.ssh")));
  EXPECT_THAT(r->out, HasSubstr("\nidentityagent none\n"));
  EXPECT_THAT(r->out, HasSubstr("\nidentitiesonly yes\n"));
  EXPECT_THAT(r->out, Not(HasSubstr("proxycommand")));
  EXPECT_THAT(Joined(FetchSpec(runner).argv), HasSubstr("http.followRedirects=false\n"));
}

TEST(GitClientTest, FileUrlsNeedTheOperatorsConsent) {
  TempDir dir;
  FakeRunner runner;
  GitClient git(runner, Options(dir.path()));
  api::GitRef ref;
  ref.branch = "main";
  api::StatusOr<std::string> r = git.Fetch("ns_a", "file:///srv/r.git", ref, {}, {});
  EXPECT_EQ(r.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_TRUE(runner.specs.empty());
}

// #24: the key comes from store values. One that is not a single file name of [a-z0-9_-] in
// the cache directory is refused by every method before git runs or the disk is touched: a ".."
// namespace once made a finalizer delete a real repository's .git.
TEST(GitClientTest, AKeyThatIsNotOneFileNameInTheCacheTouchesNothing) {
  TempDir dir;
  fs::create_directories(dir.path() / "cache");
  fs::create_directories(dir.path() / "victim.git");
  std::ofstream(dir.path() / "victim.git" / "HEAD") << "ref: refs/heads/main\n";
  FakeRunner runner;
  GitClient git(runner, Options(dir.path() / "cache"));
  api::GitRef ref;
  ref.branch = "main";
  for (const std::string& key :
       std::vector<std::string>{"../victim", "..", "./x", "a/b", "", "_x", "-x", "Upper", "a.b",
                                std::string("a\0b", 3), std::string(201, 'a')}) {
    EXPECT_EQ(git.Fetch(key, "https://example.com/r.git", ref, {}, {}).status().code(),
              api::StatusCode::kInvalidArgument)
        << key;
    EXPECT_EQ(git.ReadFiles(key, std::string(40, 'f'), "", 1024, {}).status().code(),
              api::StatusCode::kInvalidArgument)
        << key;
    EXPECT_EQ(git.Remove(key).code(), api::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_TRUE(runner.specs.empty());
  EXPECT_TRUE(fs::exists(dir.path() / "victim.git" / "HEAD"));
  EXPECT_TRUE(fs::is_empty(dir.path() / "cache"));
  // The key the reconciler makes is accepted.
  EXPECT_TRUE(git.Fetch("team-a_deploy", "https://example.com/r.git", ref, {}, {}).ok());
  EXPECT_TRUE(git.Remove("team-a_deploy").ok());
}

// stdin is fed while the child writes (1 MiB through `cat`, both ways at once: no deadlock),
// and a child that exits without reading it is no SIGPIPE for sbxd.
TEST(PosixProcessRunnerTest, FeedsInputToStdinAndSurvivesAChildThatIgnoresIt) {
  PosixProcessRunner runner;
  ProcessSpec spec = Spec({"cat"}, {"PATH=/usr/bin:/bin"});
  spec.input = std::string(size_t{1} << 20, 'x') + "end";
  spec.max_output_bytes = size_t{2} << 20;
  api::StatusOr<ProcessResult> r = runner.Run(spec, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, spec.input);
  ProcessSpec ignores = Spec({"true"}, {"PATH=/usr/bin:/bin"});
  ignores.input = std::string(size_t{4} << 20, 'y');
  r = runner.Run(ignores, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
}

TEST(PosixProcessRunnerTest, PassesExactlyTheGivenEnvironment) {
  PosixProcessRunner runner;
  api::StatusOr<ProcessResult> r =
      runner.Run(Spec({"env"}, {"PATH=/usr/bin:/bin", "ONLY=this"}), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "PATH=/usr/bin:/bin\nONLY=this\n");
}

TEST(PosixProcessRunnerTest, KillsWhatOutlivesItsTimeout) {
  PosixProcessRunner runner;
  const auto start = std::chrono::steady_clock::now();
  api::StatusOr<ProcessResult> r =
      runner.Run(Spec({"sleep", "30"}, {"PATH=/usr/bin:/bin"}, std::chrono::milliseconds(300)), {});
  EXPECT_EQ(r.status().code(), api::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(PosixProcessRunnerTest, AChildThatClosedItsOutputStillHasADeadline) {
  PosixProcessRunner runner;
  const auto start = std::chrono::steady_clock::now();
  api::StatusOr<ProcessResult> r =
      runner.Run(Spec({"sh", "-c", "exec >&- 2>&-; sleep 30"}, {"PATH=/usr/bin:/bin"},
                      std::chrono::milliseconds(300)),
                 {});
  EXPECT_EQ(r.status().code(), api::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(PosixProcessRunnerTest, ReportsTheExitCode) {
  PosixProcessRunner runner;
  api::StatusOr<ProcessResult> r =
      runner.Run(Spec({"sh", "-c", "echo out; echo err >&2; exit 3"}, {"PATH=/usr/bin:/bin"}), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(PosixProcessRunnerTest, AMissingProgramIsNotFound) {
  PosixProcessRunner runner;
  EXPECT_EQ(runner.Run(Spec({"no-such-program-sbx"}, {"PATH=/usr/bin:/bin"}), {}).status().code(),
            api::StatusCode::kNotFound);
}

// The real git on a local repository: what ReadFiles returns of a commit.
class RealGitTest : public ::testing::Test {
 protected:
  void Git(std::vector<std::string> args) {
    args.insert(args.begin(), {"git", "-C", (dir_.path() / "work").string()});
    api::StatusOr<ProcessResult> r = runner_.Run(
        Spec(args, {"PATH=/usr/bin:/bin", "HOME=" + dir_.path().string(), "GIT_CONFIG_NOSYSTEM=1",
                    "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
                    "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}),
        {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  void Write(const std::string& path, const std::string& content) {
    const fs::path p = dir_.path() / "work" / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }

  TempDir dir_;
  PosixProcessRunner runner_;
};

// #24: the files of a commit are read in one `git cat-file --batch`, not one process a file (a
// 100k-file commit cost minutes a sync): 2,000 manifests take three git processes.
TEST_F(RealGitTest, ReadsTheFilesOfACommitInOneBatch) {
  fs::create_directories(dir_.path() / "work");
  Git({"init", "--quiet", "--initial-branch=main"});
  for (int i = 0; i < 2000; ++i) {
    Write("deploy/f" + std::to_string(i) + ".yaml", "n: " + std::to_string(i) + "\n");
  }
  Git({"add", "--all"});
  Git({"commit", "--quiet", "-m", "many"});
  class Counting final : public ProcessRunner {
   public:
    explicit Counting(ProcessRunner& inner) : inner_(inner) {}
    api::StatusOr<ProcessResult> Run(const ProcessSpec& spec, std::stop_token stop) override {
      ++runs;
      return inner_.Run(spec, stop);
    }
    int runs = 0;

   private:
    ProcessRunner& inner_;
  } counting(runner_);
  GitClient git(counting, Options(dir_.path() / "cache", /*allow_file_urls=*/true));
  api::GitRef ref;
  ref.branch = "main";
  api::StatusOr<std::string> commit =
      git.Fetch("ns_a", "file://" + (dir_.path() / "work").string(), ref, {}, {});
  ASSERT_TRUE(commit.ok()) << commit.status();
  counting.runs = 0;
  api::StatusOr<std::vector<GitFile>> files = git.ReadFiles("ns_a", *commit, "deploy", 1024, {});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2000u);
  EXPECT_LE(counting.runs, 3);
  for (const GitFile& f : *files) {
    const std::string n = f.path.substr(8, f.path.size() - 8 - 5);  // deploy/fN.yaml
    EXPECT_EQ(f.content, "n: " + n + "\n") << f.path;
  }
}

TEST_F(RealGitTest, ReadsManifestsOfTheCommitTreeSkippingSymlinksAndRefusingLargeFiles) {
  fs::create_directories(dir_.path() / "work");
  Git({"init", "--quiet", "--initial-branch=main"});
  Write("deploy/a.yaml", "a: 1\n");
  Write("deploy/sub/b.yml", "b: 2\n");
  Write("deploy/notes.txt", "not read\n");
  Write("other/c.yaml", "c: 3\n");
  fs::create_symlink("/etc/passwd", dir_.path() / "work" / "deploy" / "passwd.yaml");
  Git({"add", "--all"});
  Git({"commit", "--quiet", "-m", "one"});

  GitClient git(runner_, Options(dir_.path() / "cache", /*allow_file_urls=*/true));
  api::GitRef ref;
  ref.branch = "main";
  api::StatusOr<std::string> commit =
      git.Fetch("ns_a", "file://" + (dir_.path() / "work").string(), ref, {}, {});
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(commit->size(), 40u);

  api::StatusOr<std::vector<GitFile>> files = git.ReadFiles("ns_a", *commit, "./deploy/", 1024, {});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path, "deploy/a.yaml");
  EXPECT_EQ((*files)[0].content, "a: 1\n");
  EXPECT_EQ((*files)[1].path, "deploy/sub/b.yml");

  api::StatusOr<std::vector<GitFile>> root = git.ReadFiles("ns_a", *commit, ".", 1024, {});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->size(), 3u);

  EXPECT_EQ(git.ReadFiles("ns_a", *commit, "missing", 1024, {}).status().code(),
            api::StatusCode::kNotFound);
  api::StatusOr<std::vector<GitFile>> small = git.ReadFiles("ns_a", *commit, "deploy", 3, {});
  EXPECT_EQ(small.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(small.status().message()),
              HasSubstr("deploy/a.yaml: manifest is 5 bytes, more than the limit of 3 bytes"));

  // Each file within its limit, together over the commit's: refused before anything is read.
  GitClientOptions tight = Options(dir_.path() / "cache", /*allow_file_urls=*/true);
  tight.max_total_bytes = 9;  // a.yaml and b.yml are 5 bytes each
  GitClient bounded(runner_, tight);
  api::StatusOr<std::vector<GitFile>> both = bounded.ReadFiles("ns_a", *commit, "deploy", 1024, {});
  EXPECT_EQ(both.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(both.status().message()),
              HasSubstr("under \"deploy\" are 10 bytes together, more than the limit of 9"));
  EXPECT_TRUE(bounded.ReadFiles("ns_a", *commit, "deploy/a.yaml", 1024, {}).ok());
}

}  // namespace
}  // namespace sbx::controller::gitops
