#define _TURN_OFF_PLATFORM_STRING
#include "controller/cloud/databricks/internal/cpprest_helpers.h"

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace sbx::controller::databricks::internal {

std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const size_t path_start =
      scheme_end == std::string::npos ? std::string::npos : url.find('/', scheme_end + 3);
  if (path_start == std::string::npos) {
    return {url, "/"};
  }
  return {url.substr(0, path_start), url.substr(path_start)};
}

bool IsConnectPhase(const web::http::http_exception& e) {
  const std::string what = e.what();
  const int code = e.error_code().value();
  return code == ECONNREFUSED || code == EHOSTUNREACH || code == ENETUNREACH ||
         what.find("Failed to connect") != std::string::npos ||
         what.find("Error resolving address") != std::string::npos;
}

}  // namespace sbx::controller::databricks::internal
