#include "controller/cloud/cloud_clients.h"

namespace sbx::controller {

std::string WorkspaceId(const std::string& namespace_, const std::string& workspace_ref) {
  return namespace_ + "/" + workspace_ref;
}

std::optional<std::pair<std::string, std::string>> ParseWorkspaceId(std::string_view id) {
  const size_t slash = id.find('/');
  if (slash == std::string_view::npos) {
    return std::nullopt;
  }
  return std::pair<std::string, std::string>(id.substr(0, slash), id.substr(slash + 1));
}

std::string CloudApiOf(std::string_view url) {
  // The path only: a host or query may hold anything.
  if (const size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    const size_t slash = url.find('/', scheme + 3);
    url = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  }
  url = url.substr(0, url.find_first_of("?#"));
  return url.find("/agents/") != std::string_view::npos ? "openai" : "databricks";
}

}  // namespace sbx::controller
