// ProbeBind / PickFreePort: check that a TCP address can be bound, by binding a socket to it
// and closing it again. Used by HealthServer, whose cpprest listener can neither bind port 0 and
// report the port nor be opened safely on a port this process already listens on (a failed
// second open unregisters the first listener). The answer is a snapshot: the port may be taken
// by someone else before the caller binds it, so callers retry on collision. Thread-safe.
#pragma once

#include <string>

#include "api/status.h"

namespace sbx::controller::server_internal {

// Binds `host`:`port` (port 0: any free port) and returns the port bound. `host` is a numeric
// IPv4/IPv6 address or a name resolvable to one ("localhost"); "" means all IPv4 interfaces.
// kInvalidArgument if it does not resolve, kUnavailable if it cannot be bound (e.g. in use).
api::StatusOr<int> ProbeBind(const std::string& host, int port);
// ProbeBind(host, 0): a port that is free right now.
inline api::StatusOr<int> PickFreePort(const std::string& host) { return ProbeBind(host, 0); }

}  // namespace sbx::controller::server_internal
