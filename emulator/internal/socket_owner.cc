#include "emulator/internal/socket_owner.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sbx::emulator::internal {
namespace {

// "0100007F:1F90" → (raw s_addr as the kernel prints it, port).
bool ParseEndpoint(const std::string& text, std::uint32_t& addr, int& port) {
  const size_t colon = text.find(':');
  if (colon != 8 || text.size() < 10) {
    return false;  // not an IPv4 row
  }
  addr = static_cast<std::uint32_t>(std::strtoul(text.substr(0, colon).c_str(), nullptr, 16));
  port = static_cast<int>(std::strtol(text.substr(colon + 1).c_str(), nullptr, 16));
  return true;
}

// The inode of the socket local=peer:peer_port, remote=*:local_port, or "" if none.
std::string ClientSocketInode(const std::string& peer_address, int peer_port, int local_port) {
  in_addr want{};
  if (::inet_pton(AF_INET, peer_address.c_str(), &want) != 1) {
    return "";
  }
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmit, uid, timeout, inode;
    if (!(row >> slot >> local >> remote >> state >> queues >> timer >> retransmit >> uid >>
          timeout >> inode)) {
      continue;
    }
    std::uint32_t local_addr = 0, remote_addr = 0;
    int lport = 0, rport = 0;
    if (ParseEndpoint(local, local_addr, lport) && ParseEndpoint(remote, remote_addr, rport) &&
        local_addr == want.s_addr && lport == peer_port && rport == local_port && inode != "0") {
      return inode;
    }
  }
  return "";
}

}  // namespace

std::vector<pid_t> TcpClientProcesses(const std::string& peer_address, int peer_port,
                                      int local_port) {
  std::vector<pid_t> out;
  const std::string inode = ClientSocketInode(peer_address, peer_port, local_port);
  if (inode.empty()) {
    return out;
  }
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) {
    return out;
  }
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') {
      continue;
    }
    const std::string fd_dir = "/proc/" + std::string(e->d_name) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) {
      continue;
    }
    while (dirent* f = ::readdir(fds)) {
      char link[64];
      const std::string path = fd_dir + "/" + f->d_name;
      const ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
      if (n > 0 && std::string_view(link, size_t(n)) == target) {
        out.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return out;
}

std::optional<std::string> ProcessEnvValue(pid_t pid, std::string_view name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  const std::string prefix = std::string(name) + "=";
  while (std::getline(in, entry, '\0')) {
    if (entry.starts_with(prefix)) {
      return entry.substr(prefix.size());
    }
  }
  return std::nullopt;
}

}  // namespace sbx::emulator::internal
