#include "controller/server/internal/free_port.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace sbx::controller::server_internal {

api::StatusOr<int> ProbeBind(const std::string& host, int port_wanted) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port_wanted);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &raw);
  if (rc != 0) {
    return api::InvalidArgumentError("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(raw, &freeaddrinfo);
  std::string last_error = "no address";
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    // Like the listener that will bind the port for real (asio sets it too): connections of a
    // previous process lingering in TIME_WAIT do not make the port unusable; a listener does.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    int port = -1;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = bound.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                 : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else {
      last_error = std::strerror(errno);
    }
    close(fd);
    if (port > 0) {
      return port;
    }
  }
  return api::UnavailableError("cannot bind " + host + ":" + service + ": " + last_error);
}

}  // namespace sbx::controller::server_internal
