// ClientConfig: sbxctl's contexts (DESIGN §7.3), kubeconfig-like, in
// $XDG_CONFIG_HOME/sbx/config.yaml (default ~/.config/sbx/config.yaml; $SBX_CONFIG overrides):
//
//   current-context: team
//   contexts:
//     - name: team
//       server: https://sbx.example.com:8443
//       token: <bearer token>
//       certificate-authority: /etc/sbx/ca.pem   # optional: trust this CA for the server
//
// The file holds tokens, so it is written 0600 (its directory 0700), through a temp file and
// rename. A token is only ever sent to its own context's server (see CommandContext).
// Stateless functions; not thread-safe against concurrent writers of the same file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/status.h"

namespace sbx::cli {

struct ClientContext {
  std::string name;
  std::string server;
  std::string token;
  std::string certificate_authority;
};

struct ClientConfig {
  std::string current_context;
  std::vector<ClientContext> contexts;

  const ClientContext* Find(const std::string& name) const;
  ClientContext* Find(const std::string& name);
};

// $SBX_CONFIG, else $XDG_CONFIG_HOME/sbx/config.yaml, else $HOME/.config/sbx/config.yaml.
std::string DefaultClientConfigPath();

// A missing file is an empty config. kInvalidArgument "<path>: …" for a malformed one (at most
// 1 MiB is read).
api::StatusOr<ClientConfig> LoadClientConfig(const std::string& path);
api::Status SaveClientConfig(const std::string& path, const ClientConfig& config);

}  // namespace sbx::cli
