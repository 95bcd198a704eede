// PickFreePort: asks the kernel for a currently free TCP port on `host` by binding a socket to
// port 0 and closing it again. The port may be taken by someone else before the caller binds it,
// so callers retry on collision. Used by HealthServer, whose cpprest listener cannot bind port 0
// and report the port. Thread-safe (no shared state).
#pragma once

#include <string>

#include "api/status.h"

namespace sbx::controller::internal {

// `host` is a numeric IPv4/IPv6 address or a name resolvable to one ("localhost"); "" means all
// IPv4 interfaces. kInvalidArgument if it does not resolve, kUnavailable if nothing can be bound.
api::StatusOr<int> PickFreePort(const std::string& host);

}  // namespace sbx::controller::internal
