#include "controller/gitops/git_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "api/base64.h"

namespace sbx::controller::gitops {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTargetRef = "refs/sbx/target";
constexpr std::string_view kHeaderVariable = "SBX_GIT_HTTP_HEADER";

std::string BasicHeader(const std::string& token) {
  return "Authorization: Basic " + api::Base64Encode("x-access-token:" + token);
}

void ReplaceAll(std::string& text, const std::string& secret) {
  if (secret.empty()) {
    return;
  }
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[REDACTED]");
  }
}

// git's stderr for a message: scrubbed, its last lines only, on one line.
std::string Tail(std::string text, const GitAuth& auth) {
  ReplaceAll(text, auth.token);
  if (!auth.token.empty()) {
    ReplaceAll(text, BasicHeader(auth.token));
  }
  ReplaceAll(text, auth.ssh_key);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  constexpr size_t kMax = 600;
  if (text.size() > kMax) {
    text = "…" + text.substr(text.size() - kMax);
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

// For GIT_SSH_COMMAND, which git hands to a shell: one single-quoted word.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// "a/./b/" → "a/b"; "." and "./" → "" (the root).
std::string NormalizePath(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!part.empty() && part != ".") {
      if (!out.empty()) {
        out += '/';
      }
      out += part;
    }
    if (slash == std::string_view::npos) {
      break;
    }
    start = slash + 1;
  }
  return out;
}

bool IsManifestFile(std::string_view path) {
  return path.ends_with(".yaml") || path.ends_with(".yml") || path.ends_with(".json");
}

// The key file of one fetch: written 0600, removed when it goes out of scope.
class KeyFile {
 public:
  KeyFile() = default;
  KeyFile(const KeyFile&) = delete;
  KeyFile& operator=(const KeyFile&) = delete;
  ~KeyFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }
  api::Status Write(const std::string& path, std::string key) {
    std::error_code ec;
    fs::remove(path, ec);  // a file left by a crash
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      return api::InternalError("cannot write the ssh key file in the git cache");
    }
    path_ = path;
    if (!key.ends_with('\n')) {
      key += '\n';  // ssh refuses a key without its final newline
    }
    size_t done = 0;
    while (done < key.size()) {
      const ssize_t n = ::write(fd, key.data() + done, key.size() - done);
      if (n <= 0) {
        ::close(fd);
        return api::InternalError("cannot write the ssh key file in the git cache");
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    return api::OkStatus();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

GitClient::GitClient(ProcessRunner& runner, GitClientOptions options)
    : runner_(runner), options_(std::move(options)) {}

api::StatusOr<std::string> GitClient::RepoDir(const std::string& key) const {
  // The key comes from store values: whoever can write the store must not make sbxd `git init`
  // or `remove_all` a path outside the cache (#24). A key is one file name of [a-z0-9_-].
  const bool valid =
      !key.empty() && key.size() <= 200 && key.front() != '-' && key.front() != '_' &&
      std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      });
  const fs::path cache = fs::path(options_.cache_dir).lexically_normal();
  const fs::path dir = (cache / (key + ".git")).lexically_normal();
  if (!valid || dir.parent_path() != cache) {
    return api::InvalidArgumentError("git cache key \"" + key.substr(0, 80) +
                                     "\" is not a file name of [a-z0-9_-]");
  }
  return dir.string();
}

api::StatusOr<ProcessResult> GitClient::Git(const std::string& key, std::vector<std::string> args,
                                            std::vector<std::string> extra_env,
                                            std::chrono::milliseconds timeout, const GitAuth& auth,
                                            std::stop_token stop, std::string input,
                                            size_t max_output_bytes) {
  const std::string command = args.empty() ? "" : args.front();  // for messages; args move
  ASSIGN_OR_RETURN(const std::string dir, RepoDir(key));
  ProcessSpec spec;
  spec.argv = {
      "git", "-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c",
      "protocol.http.allow=always",  // the url check allows http only for loopback
      "-c", "protocol.ssh.allow=always", "-c",
      std::string("protocol.file.allow=") + (options_.allow_file_urls ? "always" : "never"), "-c",
      "core.hooksPath=/dev/null",
      // A redirect must not carry a tokenFrom header to another host (#24).
      "-c", "http.followRedirects=false", "--literal-pathspecs", "--git-dir=" + dir};
  spec.argv.insert(spec.argv.end(), std::make_move_iterator(args.begin()),
                   std::make_move_iterator(args.end()));
  spec.env = options_.environment;
  spec.env.insert(spec.env.end(),
                  {"HOME=" + options_.cache_dir, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1",
                   "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"});
  spec.env.insert(spec.env.end(), std::make_move_iterator(extra_env.begin()),
                  std::make_move_iterator(extra_env.end()));
  spec.timeout = timeout;
  spec.max_output_bytes = max_output_bytes;
  spec.input = std::move(input);
  api::StatusOr<ProcessResult> result = runner_.Run(spec, stop);
  if (!result.ok()) {
    return api::Status(result.status().code(), Tail(result.status().message(), auth));
  }
  if (result->truncated) {
    // A cut listing would drop files, and a prune would then delete their objects.
    return api::ResourceExhaustedError("git " + command + " wrote more than " +
                                       std::to_string(spec.max_output_bytes) + " bytes");
  }
  return result;
}

api::StatusOr<std::string> GitClient::Fetch(const std::string& key, const std::string& url,
                                            const api::GitRef& ref, const GitAuth& auth,
                                            std::stop_token stop) {
  if (url.starts_with("file://") && !options_.allow_file_urls) {
    return api::InvalidArgumentError(
        "file:// repositories are not allowed by this sbxd (--git-allow-file-urls)");
  }
  ASSIGN_OR_RETURN(const std::string dir, RepoDir(key));
  std::error_code ec;
  if (fs::create_directories(options_.cache_dir, ec)) {
    // Created here: 0700. A mode the operator set on an existing directory is left alone.
    fs::permissions(options_.cache_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  const GitAuth none;
  if (!fs::exists(fs::path(dir) / "HEAD")) {
    fs::remove_all(dir, ec);
    ASSIGN_OR_RETURN(ProcessResult r, Git(key, {"init", "--bare", "--quiet"}, {},
                                          options_.command_timeout, none, stop));
    if (r.exit_code != 0) {
      return api::UnavailableError("git init of the cache failed: " + Tail(r.err, none));
    }
  }
  if (!ref.commit.empty()) {
    // A commit never changes: fetch it only once.
    ASSIGN_OR_RETURN(ProcessResult have, Git(key, {"cat-file", "-e", ref.commit + "^{commit}"}, {},
                                             options_.command_timeout, none, stop));
    if (have.exit_code == 0) {
      ASSIGN_OR_RETURN(ProcessResult r,
                       Git(key, {"update-ref", std::string(kTargetRef), ref.commit}, {},
                           options_.command_timeout, none, stop));
      if (r.exit_code == 0) {
        return ref.commit;
      }
    }
  }

  std::vector<std::string> env;
  std::vector<std::string> args = {"fetch", "--quiet", "--no-tags", "--force", "--depth=1"};
  KeyFile key_file;
  // ssh isolated from the sbxd user's own (#24): no ~/.ssh/config (ssh finds ~ in the passwd
  // entry, not $HOME, so -F /dev/null), none of its keys or its agent, no proxy, no shared
  // connection. The only identity is the GitSource's sshKeyFrom, if it has one.
  std::string ssh =
      "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=accept-new "
      "-o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o IdentityAgent=none "
      "-o ProxyCommand=none -o ProxyJump=none -o ControlMaster=no -o ControlPath=none "
      "-o PKCS11Provider=none -o UserKnownHostsFile=" +
      ShellQuote((fs::path(options_.cache_dir) / "known_hosts").string());
  if (!auth.ssh_key.empty()) {
    RETURN_IF_ERROR(key_file.Write(dir + ".key", auth.ssh_key));
    ssh += " -i " + ShellQuote(key_file.path());
  } else {
    ssh += " -o IdentityFile=none";
  }
  env.push_back("GIT_SSH_COMMAND=" + ssh);
  if (!auth.token.empty()) {
    env.push_back(std::string(kHeaderVariable) + "=" + BasicHeader(auth.token));
    args.insert(args.begin(), "--config-env=http.extraHeader=" + std::string(kHeaderVariable));
  }
  args.push_back("--");
  args.push_back(url);
  if (!ref.branch.empty()) {
    args.push_back("+refs/heads/" + ref.branch + ":" + std::string(kTargetRef));
  } else if (!ref.tag.empty()) {
    args.push_back("+refs/tags/" + ref.tag + ":" + std::string(kTargetRef));
  } else {
    args.push_back(ref.commit);
  }
  ASSIGN_OR_RETURN(ProcessResult fetched,
                   Git(key, std::move(args), std::move(env), options_.fetch_timeout, auth, stop));
  if (fetched.exit_code != 0) {
    return api::UnavailableError("git fetch failed: " + Tail(fetched.err, auth));
  }
  if (!ref.commit.empty()) {
    ASSIGN_OR_RETURN(ProcessResult r, Git(key, {"update-ref", std::string(kTargetRef), ref.commit},
                                          {}, options_.command_timeout, none, stop));
    if (r.exit_code != 0) {
      return api::NotFoundError("commit " + ref.commit + " is not in the repository");
    }
  }
  ASSIGN_OR_RETURN(
      ProcessResult resolved,
      Git(key, {"rev-parse", "--verify", "--quiet", std::string(kTargetRef) + "^{commit}"}, {},
          options_.command_timeout, none, stop));
  std::string commit = resolved.out;
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) {
    commit.pop_back();
  }
  if (resolved.exit_code != 0 || commit.empty()) {
    return api::NotFoundError("the fetched ref does not name a commit");
  }
  return commit;
}

api::StatusOr<std::vector<GitFile>> GitClient::ReadFiles(const std::string& key,
                                                         const std::string& commit,
                                                         const std::string& path,
                                                         size_t max_file_bytes,
                                                         std::stop_token stop) {
  const GitAuth none;
  const std::string prefix = NormalizePath(path);
  bool single_file = false;
  if (!prefix.empty()) {
    ASSIGN_OR_RETURN(ProcessResult type, Git(key, {"cat-file", "-t", commit + ":" + prefix}, {},
                                             options_.command_timeout, none, stop));
    if (type.exit_code != 0) {
      return api::NotFoundError("path \"" + prefix + "\" does not exist in commit " + commit);
    }
    single_file = type.out.starts_with("blob");
  }
  std::vector<std::string> args = {"ls-tree", "-r", "-z", "-l", "--full-tree", commit};
  if (!prefix.empty()) {
    args.push_back("--");
    args.push_back(prefix);
  }
  ASSIGN_OR_RETURN(ProcessResult listed,
                   Git(key, std::move(args), {}, options_.command_timeout, none, stop));
  if (listed.exit_code != 0) {
    return api::UnavailableError("git ls-tree failed: " + Tail(listed.err, none));
  }
  struct Entry {
    std::string path;
    std::string oid;
    size_t size = 0;
  };
  std::vector<Entry> entries;
  size_t start = 0;
  while (start < listed.out.size()) {
    size_t end = listed.out.find('\0', start);
    if (end == std::string::npos) {
      end = listed.out.size();
    }
    const std::string_view line(listed.out.data() + start, end - start);
    start = end + 1;
    // "<mode> <type> <oid> <size>\t<path>"
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) {
      continue;
    }
    const std::string_view meta = line.substr(0, tab);
    std::vector<std::string_view> fields;
    for (size_t at = 0; at < meta.size();) {
      const size_t space = meta.find(' ', at);
      const std::string_view f =
          meta.substr(at, space == std::string_view::npos ? std::string_view::npos : space - at);
      if (!f.empty()) {
        fields.push_back(f);
      }
      if (space == std::string_view::npos) {
        break;
      }
      at = space + 1;
    }
    if (fields.size() != 4 || fields[1] != "blob" || fields[0] == "120000") {
      continue;  // submodules, symlinks
    }
    Entry e;
    e.path = std::string(line.substr(tab + 1));
    if (!single_file && !IsManifestFile(e.path)) {
      continue;
    }
    e.oid = std::string(fields[2]);
    e.size = static_cast<size_t>(std::stoull(std::string(fields[3])));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  size_t total = 0;
  for (const Entry& e : entries) {
    total += e.size;
  }
  if (total > options_.max_total_bytes) {
    return api::InvalidArgumentError(
        "the manifests under \"" + (prefix.empty() ? std::string(".") : prefix) + "\" are " +
        std::to_string(total) + " bytes together, more than the limit of " +
        std::to_string(options_.max_total_bytes) + " bytes");
  }
  std::string oids;
  for (const Entry& e : entries) {
    if (e.size > max_file_bytes) {
      return api::InvalidArgumentError(e.path + ": manifest is " + std::to_string(e.size) +
                                       " bytes, more than the limit of " +
                                       std::to_string(max_file_bytes) + " bytes");
    }
    oids += e.oid + "\n";
  }
  std::vector<GitFile> files;
  if (entries.empty()) {
    return files;
  }
  // Every blob in one git process (#24: one `cat-file` per file made a 100k-file commit cost
  // minutes): "<oid> <type> <size>\n<content>\n" for each line of input, in order.
  ASSIGN_OR_RETURN(ProcessResult batch,
                   Git(key, {"cat-file", "--batch"}, {}, options_.command_timeout, none, stop, oids,
                       total + entries.size() * 64 + 4096));
  if (batch.exit_code != 0) {
    return api::UnavailableError("git cat-file --batch failed: " + Tail(batch.err, none));
  }
  const std::string_view out = batch.out;
  size_t at = 0;
  for (const Entry& e : entries) {
    const size_t nl = out.find('\n', at);
    const std::string_view header =
        nl == std::string_view::npos ? std::string_view() : out.substr(at, nl - at);
    const std::string expected = e.oid + " blob " + std::to_string(e.size);
    const bool whole = nl != std::string_view::npos && nl + 1 + e.size < out.size() &&
                       out[nl + 1 + e.size] == '\n';
    if (header != expected || !whole) {
      return api::UnavailableError("git cat-file --batch answered \"" +
                                   std::string(header.substr(0, 120)) + "\" for " + e.path +
                                   ", not its blob of " + std::to_string(e.size) + " bytes");
    }
    files.push_back({e.path, std::string(out.substr(nl + 1, e.size))});
    at = nl + 1 + e.size + 1;
  }
  return files;
}

api::Status GitClient::Remove(const std::string& key) {
  ASSIGN_OR_RETURN(const std::string dir, RepoDir(key));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(dir + ".key", ec);
  return api::OkStatus();
}

}  // namespace sbx::controller::gitops
