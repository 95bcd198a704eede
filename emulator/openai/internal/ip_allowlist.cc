#include "emulator/openai/internal/ip_allowlist.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <mutex>

#include "emulator/openai/internal/state.h"

namespace sbx::emulator::internal::openai {
namespace {

constexpr size_t kMaxEntries = 1000;

std::optional<std::uint32_t> ParseIpv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) {
    return std::nullopt;
  }
  return ntohl(a.s_addr);
}

}  // namespace

api::StatusOr<IpAllowlist> IpAllowlist::Parse(bool enabled,
                                              const std::vector<std::string>& entries) {
  if (entries.size() > kMaxEntries) {
    return api::InvalidArgumentError("an IP allowlist holds at most " +
                                     std::to_string(kMaxEntries) + " entries");
  }
  IpAllowlist out;
  out.enabled_ = enabled;
  for (const std::string& raw : entries) {
    const std::string entry = Trim(raw);
    const size_t slash = entry.find('/');
    std::optional<std::uint32_t> address = ParseIpv4(entry.substr(0, slash));
    int bits = 32;
    if (slash != std::string::npos) {
      const std::string len = entry.substr(slash + 1);
      char* end = nullptr;
      bits = static_cast<int>(std::strtol(len.c_str(), &end, 10));
      if (len.empty() || *end != '\0' || bits < 0 || bits > 32) {
        address.reset();
      }
    }
    if (!address) {
      return api::InvalidArgumentError("IP allowlist entry \"" + entry +
                                       "\" is not an IPv4 address or CIDR block like "
                                       "198.18.0.0/15");
    }
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    out.blocks_.push_back(Block{*address & mask, mask});
    out.entries_.push_back(entry);
  }
  return out;
}

bool IpAllowlist::Allows(const std::string& address) const {
  if (!enabled_) {
    return true;
  }
  std::optional<std::uint32_t> a = ParseIpv4(address);
  if (!a) {
    return false;
  }
  for (const Block& b : blocks_) {
    if ((*a & b.mask) == b.network) {
      return true;
    }
  }
  return false;
}

std::optional<HttpResponse> CheckCallerAddress(State& state, const std::string& environment_id,
                                               const HttpRequest& req) {
  {
    std::lock_guard lock(state.mu);
    if (!state.ip_allowlist.enabled()) {
      return std::nullopt;
    }
  }
  // Who is calling is found outside the lock: it reads /proc.
  const std::string address =
      state.options.caller_address
          ? state.options.caller_address(req.peer_address, req.peer_port, req.local_port)
          : req.peer_address;
  std::lock_guard lock(state.mu);
  auto env = state.environments.find(environment_id);
  if (env != state.environments.end() || state.registration_addresses.size() < 10'000) {
    state.registration_addresses[environment_id] = address;  // bounded for made-up ids
  }
  if (state.ip_allowlist.Allows(address)) {
    return std::nullopt;
  }
  ++(env != state.environments.end() ? env->second.registrations
                                     : state.unknown_registrations[environment_id])
        .attempts;
  HttpResponse r;
  r.status = 401;
  r.content_type = "text/plain";
  r.body = "IP is not authorized";
  return r;
}

}  // namespace sbx::emulator::internal::openai
