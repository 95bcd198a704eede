#include "controller/cloud/secret_resolver.h"

#include <fstream>
#include <sstream>

namespace sbx::controller {
namespace {

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  const size_t end = s.find_last_not_of(ws);
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

}  // namespace

api::StatusOr<std::string> ResolveSecret(const api::SecretRef& ref, const EnvLookup& env,
                                         std::string_view field) {
  const std::string where(field);
  if (!ref.env.empty()) {
    std::optional<std::string> value = env(ref.env);
    if (!value || Trim(*value).empty()) {
      return api::FailedPreconditionError(where + ": environment variable " + ref.env +
                                          " is not set in the controller's environment");
    }
    return Trim(*value);
  }
  if (!ref.file.empty()) {
    std::ifstream in(ref.file, std::ios::binary);
    if (!in) {
      return api::FailedPreconditionError(where + ": cannot read secret file " + ref.file);
    }
    std::ostringstream content;
    content << in.rdbuf();
    std::string value = Trim(content.str());
    if (value.empty()) {
      return api::FailedPreconditionError(where + ": secret file " + ref.file + " is empty");
    }
    return value;
  }
  return api::InvalidArgumentError(where +
                                   ": no secret reference (want {env: NAME} or "
                                   "{file: /path})");
}

}  // namespace sbx::controller
