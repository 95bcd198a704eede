#include "httpserver/http_exchange.h"

#include "api/percent_encoding.h"
#include "api/text.h"

namespace sbx::httpserver {

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(api::Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

bool HttpRequest::IsUpgrade() const {
  if (Header("upgrade").empty()) {
    return false;
  }
  // "Connection" is a comma-separated list of tokens, e.g. "keep-alive, Upgrade".
  const std::string connection = api::Lower(Header("connection"));
  size_t start = 0;
  while (start <= connection.size()) {
    size_t comma = connection.find(',', start);
    if (comma == std::string::npos) {
      comma = connection.size();
    }
    if (api::Trim(std::string_view(connection).substr(start, comma - start)) == "upgrade") {
      return true;
    }
    start = comma + 1;
  }
  return false;
}

std::map<std::string, std::string> ParseFormEncoded(std::string_view s) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t amp = s.find('&', start);
    if (amp == std::string_view::npos) {
      amp = s.size();
    }
    const std::string_view pair = s.substr(start, amp - start);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string key = api::PercentDecode(pair.substr(0, eq), true);
      std::string value = eq == std::string_view::npos
                              ? std::string()
                              : api::PercentDecode(pair.substr(eq + 1), true);
      out.emplace(std::move(key), std::move(value));
    }
    start = amp + 1;
  }
  return out;
}

}  // namespace sbx::httpserver
