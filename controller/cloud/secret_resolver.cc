#include "controller/cloud/secret_resolver.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

}  // namespace

std::string DefaultSecretsDir(const EnvLookup& env) {
  if (std::optional<std::string> xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
    return *xdg + "/sbx/secrets";
  }
  return "/etc/sbx/secrets";
}

SecretPolicy SecretPolicyFromEnvironment(const EnvLookup& env) {
  SecretPolicy policy;
  if (std::optional<std::string> prefix = env("SBX_SECRET_ENV_PREFIX");
      prefix && !prefix->empty()) {
    policy.env_prefix = *prefix;
  }
  std::optional<std::string> dir = env("SBX_SECRETS_DIR");
  policy.secrets_dir = dir && !dir->empty() ? *dir : DefaultSecretsDir(env);
  return policy;
}

api::StatusOr<std::string> ResolveSecret(const api::SecretRef& ref, const EnvLookup& env,
                                         std::string_view field, const SecretPolicy& policy) {
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
  if (!ref.env.empty()) {
    std::optional<std::string> value = env(ref.env);
    if (!value || Trim(*value).empty()) {
      return api::FailedPreconditionError(where + ": environment variable " + ref.env +
                                          " is not set in the controller's environment");
    }
    return std::string(Trim(*value));
  }
  return ReadSecretFile(policy.secrets_dir, ref.file, where);
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
  std::error_code ec;
  for (fs::directory_iterator it(policy.secrets_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    api::StatusOr<std::string> value = ReadSecretFile(policy.secrets_dir, name, name);
    if (value.ok()) {
      values.push_back(*std::move(value));
    }
  }
  return values;
}

}  // namespace sbx::controller
