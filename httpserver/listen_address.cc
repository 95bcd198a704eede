#include "httpserver/listen_address.h"

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

namespace sbx::httpserver {

api::StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  const size_t colon = text.rfind(':');
  const auto bad = [&](std::string_view why) {
    return api::InvalidArgumentError("listen address \"" + std::string(text) +
                                     "\": " + std::string(why));
  };
  if (colon == std::string_view::npos) {
    return bad("want host:port");
  }
  std::string host(text.substr(0, colon));
  const std::string port_text(text.substr(colon + 1));
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535) {
    return bad("bad port");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("write an IPv6 address in brackets, [::1]:8443");
  }
  ListenAddress out;
  out.port = std::stoi(port_text);
  if (host.empty()) {
    host = "0.0.0.0";
  } else if (host == "localhost") {
    host = "127.0.0.1";
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (ec) {
    return bad("the host must be an IP address or localhost");
  }
  out.loopback = address.is_loopback();
  out.host = host;
  return out;
}

}  // namespace sbx::httpserver
