#include "controller/cloud/secret_resolver.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "api/text.h"
#include "api/validation.h"

namespace sbx::controller {
namespace {

namespace fs = std::filesystem;
using api::Trim;

// Reads `name` from `dir`, refusing any path that resolves outside `dir`.
api::StatusOr<std::string> ReadSecretFile(const std::string& dir, const std::string& name,
                                          const std::string& where) {
  if (dir.empty()) {
    return api::FailedPreconditionError(where + ": secret file \"" + name +
                                        "\" cannot be read: the controller has no secrets "
                                        "directory (sbxd --secrets-dir)");
  }
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) {
    return api::FailedPreconditionError(where + ": secrets directory " + dir +
                                        " cannot be read: " + ec.message());
  }
  const fs::path resolved = fs::canonical(root / name, ec);
  if (ec) {
    return api::FailedPreconditionError(where + ": secret file \"" + name + "\" not found in " +
                                        root.string());
  }
  const std::string root_prefix = root.string() + "/";
  if (!resolved.string().starts_with(root_prefix)) {
    return api::InvalidArgumentError(where + ": secret file \"" + name +
                                     "\" is a link that leaves the secrets directory " +
                                     root.string())
        .WithReason("SecretNotAllowed");
  }
  const int fd = ::open(resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return api::FailedPreconditionError(where + ": cannot read secret file \"" + name +
                                        "\": " + std::strerror(errno));
  }
  struct stat st {};
  std::string content;
  api::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = api::FailedPreconditionError(where + ": secret file \"" + name +
                                          "\" is not a regular file");
  } else if (static_cast<size_t>(st.st_size) > kMaxSecretFileBytes) {
    status = api::FailedPreconditionError(where + ": secret file \"" + name + "\" is " +
                                          std::to_string(st.st_size) + " bytes, more than " +
                                          std::to_string(kMaxSecretFileBytes));
  } else {
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0 && content.size() <= kMaxSecretFileBytes) {
      content.append(buffer, static_cast<size_t>(n));
    }
    if (n < 0) {
      status = api::FailedPreconditionError(where + ": cannot read secret file \"" + name +
                                            "\": " + std::strerror(errno));
    }
  }
  ::close(fd);
  RETURN_IF_ERROR(status);
  std::string value(Trim(content));
  if (value.empty()) {
    return api::FailedPreconditionError(where + ": secret file \"" + name + "\" is empty");
  }
  return value;
}

// Appends the value of every secret file directly in `dir` (subdirectories are skipped).
void AddSecretFilesOf(const std::string& dir, std::vector<std::string>& values) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      continue;
    }
    const std::string name = it->path().filename().string();
    api::StatusOr<std::string> value = ReadSecretFile(dir, name, name);
    if (value.ok()) {
      values.push_back(*std::move(value));
    }
  }
}

}  // namespace

std::string DefaultSecretsDir(const EnvLookup& env) {
  if (std::optional<std::string> xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
    return *xdg + "/sbx/secrets";
  }
  return "/etc/sbx/secrets";
}

std::optional<SecretScope> ParseSecretScope(std::string_view text) {
  if (text == "namespace") {
    return SecretScope::kNamespace;
  }
  if (text == "global") {
    return SecretScope::kGlobal;
  }
  return std::nullopt;
}

std::string NamespaceEnvPrefix(std::string_view env_prefix, std::string_view namespace_) {
  std::string out(env_prefix);
  for (const char c : namespace_) {
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  out.push_back('_');
  return out;
}

api::StatusOr<SecretGrants> ParseSecretGrants(std::string_view path, std::string_view text,
                                              std::string_view env_prefix) {
  SecretGrants grants;
  int line_number = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const auto fail = [&](const std::string& problem) {
      return api::InvalidArgumentError(std::string(path) + ":" + std::to_string(line_number) +
                                       ": " + problem);
    };
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      return fail("want \"NAMESPACE SOURCE\" (SOURCE: env:NAME or file:NAME)");
    }
    const std::string ns(line.substr(0, space));
    std::string source(Trim(line.substr(space + 1)));
    if (std::string problem = api::ValidateDnsLabel(ns); !problem.empty()) {
      std::string message = "namespace \"" + ns;
      message += "\": " + problem;
      return fail(message);
    }
    api::SecretRef ref;
    if (source.starts_with("file:")) {
      ref.file = source.substr(5);
    } else {
      ref.env = source.starts_with("env:") ? source.substr(4) : source;
    }
    if (api::Status allowed = api::ValidateSecretRef("source", ref, env_prefix); !allowed.ok()) {
      return fail(std::string(allowed.message()));
    }
    grants[ns].insert(ref.env.empty() ? "file:" + ref.file : "env:" + ref.env);
  }
  return grants;
}

SecretPolicy SecretPolicyFromEnvironment(const EnvLookup& env) {
  SecretPolicy policy;
  policy.scope = SecretScope::kGlobal;
  if (std::optional<std::string> prefix = env("SBX_SECRET_ENV_PREFIX");
      prefix && !prefix->empty()) {
    policy.env_prefix = *prefix;
  }
  std::optional<std::string> dir = env("SBX_SECRETS_DIR");
  policy.secrets_dir = dir && !dir->empty() ? *dir : DefaultSecretsDir(env);
  return policy;
}

api::StatusOr<std::string> ResolveSecret(const api::SecretRef& ref, const EnvLookup& env,
                                         std::string_view field, const SecretPolicy& policy,
                                         std::string_view namespace_) {
  const std::string where(field);
  if (ref.empty()) {
    return api::InvalidArgumentError(where +
                                     ": no secret reference (want {env: NAME} or "
                                     "{file: NAME})");
  }
  // The same rule sbxctl applied when the reference was stored, against sbxd's own flags.
  if (api::Status allowed = api::ValidateSecretRef(field, ref, policy.env_prefix); !allowed.ok()) {
    return allowed.WithReason("SecretNotAllowed");
  }
  std::string dir = policy.secrets_dir;
  if (policy.scope == SecretScope::kNamespace) {
    // The namespace comes from the store: checked here, it names a directory.
    if (std::string problem = api::ValidateDnsLabel(namespace_); !problem.empty()) {
      return api::InvalidArgumentError(where + ": namespace \"" +
                                       std::string(namespace_.substr(0, 80)) + "\": " + problem)
          .WithReason("SecretNotAllowed");
    }
    const auto granted = policy.grants.find(std::string(namespace_));
    const auto is_granted = [&](const std::string& source) {
      return granted != policy.grants.end() && granted->second.contains(source);
    };
    if (!ref.env.empty()) {
      const std::string own = NamespaceEnvPrefix(policy.env_prefix, namespace_);
      if (!is_granted("env:" + ref.env) &&
          (!ref.env.starts_with(own) || ref.env.size() == own.size())) {
        return api::InvalidArgumentError(
                   where + ": {env: " + ref.env + "} is not a secret of namespace " +
                   std::string(namespace_) + ": its variables are named " + own +
                   "…, or granted to it by the operator (sbxd --secret-grants)")
            .WithReason("SecretNotAllowed");
      }
    } else if (!is_granted("file:" + ref.file)) {
      // Its own subdirectory; a name granted to it is read from the top of the directory.
      dir = dir.empty() ? dir : dir + "/" + std::string(namespace_);
    }
  }
  if (!ref.env.empty()) {
    std::optional<std::string> value = env(ref.env);
    if (!value || Trim(*value).empty()) {
      return api::FailedPreconditionError(where + ": environment variable " + ref.env +
                                          " is not set in the controller's environment");
    }
    return std::string(Trim(*value));
  }
  return ReadSecretFile(dir, ref.file, where);
}

api::StatusOr<std::string> ResolveControllerEnv(std::string_view name, const EnvLookup& env,
                                                std::string_view field) {
  std::optional<std::string> value = env(name);
  if (!value || Trim(*value).empty()) {
    return api::FailedPreconditionError(std::string(field) + ": environment variable " +
                                        std::string(name) +
                                        " is not set in the controller's environment");
  }
  return std::string(Trim(*value));
}

std::vector<std::string> KnownSecretValues(const SecretPolicy& policy,
                                           const std::vector<std::string>& environment) {
  static constexpr std::string_view kControllerSecrets[] = {
      "DATABRICKS_TOKEN", "DATABRICKS_CLIENT_SECRET", "OPENAI_API_KEY", "OPENAI_EXECUTOR_API_KEY",
      "OPENAI_WEBHOOK_SECRET"};
  std::vector<std::string> values;
  for (const std::string& entry : environment) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string_view name = std::string_view(entry).substr(0, eq);
    const bool secret = (!policy.env_prefix.empty() && name.starts_with(policy.env_prefix)) ||
                        std::find(std::begin(kControllerSecrets), std::end(kControllerSecrets),
                                  name) != std::end(kControllerSecrets);
    if (secret) {
      if (std::string value(Trim(entry.substr(eq + 1))); !value.empty()) {
        values.push_back(std::move(value));
      }
    }
  }
  if (policy.secrets_dir.empty()) {
    return values;
  }
  AddSecretFilesOf(policy.secrets_dir, values);
  // The namespaces' directories, one level down (not ..data: the files of a Kubernetes secret
  // volume link into it, and are read above).
  std::error_code ec;
  for (fs::directory_iterator it(policy.secrets_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec) && !it->path().filename().string().starts_with("..")) {
      AddSecretFilesOf(it->path().string(), values);
    }
  }
  return values;
}

}  // namespace sbx::controller
