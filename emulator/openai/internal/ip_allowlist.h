// IpAllowlist: the OpenAI organisation's IP allowlist as the executor registry applies it
// (reference/openai-agents-api.md §3.4 and §5: "401 – IP not authorized", request IP outside the
// project/org allowlist; the seed: "Managed Agents then rejects traffic from unregistered IPs").
// When enabled, a registration whose caller address is not listed is answered 401 with the raw
// body "IP is not authorized" (reference/codex-exec-server.md §3.4's example), which the executor
// prints as `…authentication failed (401 Unauthorized): IP is not authorized` and exits 1.
//
// The caller address is what OpenAiEmulator::Options::caller_address says for the TCP peer (in
// sbx-emulator: the egress address of the emulated sandbox the executor runs in, which may
// change on every start), else the peer address itself.
//
// Thread-safety: IpAllowlist is a value; CheckCallerAddress takes State::mu itself (the address
// lookup runs without it). Module-private to emulator/openai.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"
#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::openai {

class State;

class IpAllowlist {
 public:
  IpAllowlist() = default;
  // Entries are IPv4 addresses ("198.18.0.7") or CIDR blocks ("198.18.0.0/15"), at most 1000.
  // kInvalidArgument names the first bad entry.
  static api::StatusOr<IpAllowlist> Parse(bool enabled, const std::vector<std::string>& entries);

  bool enabled() const { return enabled_; }
  const std::vector<std::string>& entries() const { return entries_; }
  // True when disabled, or when `address` (IPv4) is in one of the entries.
  bool Allows(const std::string& address) const;

 private:
  struct Block {
    std::uint32_t network = 0;  // host byte order
    std::uint32_t mask = 0;
  };
  bool enabled_ = false;
  std::vector<std::string> entries_;
  std::vector<Block> blocks_;
};

// The registry's answer to a registration for `environment_id` from a caller the allowlist does
// not allow (counted as an attempt, and the address kept for the admin state), or nullopt.
std::optional<HttpResponse> CheckCallerAddress(State& state, const std::string& environment_id,
                                               const HttpRequest& req);

}  // namespace sbx::emulator::internal::openai
