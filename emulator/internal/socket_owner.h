// Who is calling: the processes on this machine that hold the client end of a loopback TCP
// connection, and what their environment says. The emulators use it to tell which emulated
// sandbox a request comes from (its processes carry SBX_EMULATOR_SANDBOX=<instance>/<id>), so
// that a sandbox's egress address can be applied to a registration made by any program — the
// stand-in executor or the real codex — without that program's help. Linux only: reads
// /proc/net/tcp and /proc/*/fd; IPv4 peers only (the emulators listen on IPv4 loopback).
//
// Thread-safety: stateless functions. Cost: one pass over /proc/net/tcp and over every
// process's fds, so call it per registration, not per request.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sbx::emulator::internal {

// Pids of the processes holding the socket whose local end is peer_address:peer_port and whose
// remote end is port `local_port` (the server's). Empty if none is found (a process of another
// user, or the connection is already gone).
std::vector<pid_t> TcpClientProcesses(const std::string& peer_address, int peer_port,
                                      int local_port);

// The value of `name` in /proc/<pid>/environ (the environment the process started with).
std::optional<std::string> ProcessEnvValue(pid_t pid, std::string_view name);

}  // namespace sbx::emulator::internal
