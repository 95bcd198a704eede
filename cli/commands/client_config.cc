#include "cli/commands/client_config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sbx::cli {
namespace fs = std::filesystem;

namespace {
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

std::string Field(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  return value && value.IsScalar() ? value.as<std::string>() : std::string();
}
}  // namespace

const ClientContext* ClientConfig::Find(const std::string& name) const {
  for (const ClientContext& c : contexts) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

ClientContext* ClientConfig::Find(const std::string& name) {
  for (ClientContext& c : contexts) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

std::string DefaultClientConfigPath() {
  if (const char* env = std::getenv("SBX_CONFIG"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "sbx" / "config.yaml").string();
  }
  const char* home = std::getenv("HOME");
  const std::string base = (home != nullptr && *home != '\0') ? home : ".";
  return (fs::path(base) / ".config" / "sbx" / "config.yaml").string();
}

api::StatusOr<ClientConfig> LoadClientConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ClientConfig{};
  }
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    return api::InvalidArgumentError(path + ": larger than 1 MiB");
  }
  ClientConfig config;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) {
      return config;
    }
    if (!root.IsMap()) {
      return api::InvalidArgumentError(path + ": not a mapping");
    }
    config.current_context = Field(root, "current-context");
    if (const YAML::Node contexts = root["contexts"]; contexts) {
      if (!contexts.IsSequence()) {
        return api::InvalidArgumentError(path + ": contexts: a list is needed");
      }
      for (const YAML::Node& c : contexts) {
        if (!c.IsMap()) {
          return api::InvalidArgumentError(path + ": contexts: each entry is a mapping");
        }
        config.contexts.push_back(ClientContext{Field(c, "name"), Field(c, "server"),
                                                Field(c, "token"),
                                                Field(c, "certificate-authority")});
      }
    }
  } catch (const YAML::Exception& e) {
    return api::InvalidArgumentError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                     std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return config;
}

api::Status SaveClientConfig(const std::string& path, const ClientConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "current-context" << YAML::Value << config.current_context;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq;
  for (const ClientContext& c : config.contexts) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << c.name;
    out << YAML::Key << "server" << YAML::Value << c.server;
    if (!c.token.empty()) {
      out << YAML::Key << "token" << YAML::Value << c.token;
    }
    if (!c.certificate_authority.empty()) {
      out << YAML::Key << "certificate-authority" << YAML::Value << c.certificate_authority;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;

  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return api::UnavailableError(path + ": cannot create its directory: " + ec.message());
    }
    ::chmod(target.parent_path().c_str(), 0700);
  }
  const fs::path temp = target.string() + ".tmp";
  {
    const mode_t old = ::umask(077);
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    ::umask(old);
    if (!file) {
      return api::UnavailableError(path + ": cannot write");
    }
    file << out.c_str() << "\n";
    if (!file) {
      return api::UnavailableError(path + ": cannot write");
    }
  }
  ::chmod(temp.c_str(), 0600);
  fs::rename(temp, target, ec);
  if (ec) {
    return api::UnavailableError(path + ": cannot replace: " + ec.message());
  }
  return api::OkStatus();
}

}  // namespace sbx::cli
