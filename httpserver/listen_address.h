// ListenAddress: the one parser of the listen addresses sbx's servers take on their command
// lines (sbxd --listen, --webhook-addr, --metrics-addr). Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/status.h"

namespace sbx::httpserver {

// A listen address: "host:port", "[v6addr]:port" or ":port" (every IPv4 interface, host
// "0.0.0.0"). Port 0 means any free port.
struct ListenAddress {
  std::string host;  // a numeric address ("localhost" becomes 127.0.0.1)
  int port = 0;
  bool loopback = false;  // 127.0.0.0/8, ::1 or localhost
};

// kInvalidArgument, naming the text, for anything else (no port, a port over 65535, an IPv6
// address without brackets, a host that is not an IP address or localhost).
api::StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace sbx::httpserver
