#include "emulator/openai/internal/direct_transport.h"

#include <string_view>

#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/openai_emulator.h"

namespace sbx::emulator::internal::openai {
namespace {

using json = nlohmann::json;

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256 ";

// "Credential=AKID/20261201/us-east-1/execute-api/aws4_request": five non-empty parts.
bool WellFormedCredential(std::string_view auth) {
  const std::string_view key = "Credential=";
  const size_t at = auth.find(key);
  if (at == std::string_view::npos) {
    return false;
  }
  std::string_view scope = auth.substr(at + key.size());
  scope = scope.substr(0, scope.find_first_of(", "));
  int parts = 0;
  while (!scope.empty()) {
    const size_t slash = scope.find('/');
    if (slash == 0) {
      return false;
    }
    ++parts;
    scope = slash == std::string_view::npos ? std::string_view() : scope.substr(slash + 1);
  }
  return parts == 5 && auth.find("/aws4_request") != std::string_view::npos;
}

}  // namespace

std::optional<HttpResponse> CheckSigV4Authorization(const HttpRequest& req) {
  const std::string auth = req.Header("authorization");
  const bool ok = auth.rfind(kAlgorithm, 0) == 0 && WellFormedCredential(auth) &&
                  auth.find("SignedHeaders=") != std::string::npos &&
                  auth.find("Signature=") != std::string::npos && !req.Header("x-amz-date").empty();
  if (ok) {
    return std::nullopt;
  }
  return RegistryError(401, "invalid_signature",
                       "Direct registration requires an AWS SigV4 (AWS4-HMAC-SHA256) "
                       "authorization and an x-amz-date header");
}

std::optional<HttpResponse> CheckDirectRegisterBody(const std::string& body) {
  const json parsed = json::parse(body.empty() ? "{}" : body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return RegistryError(400, "invalid_request", "Registration body must be a JSON object");
  }
  const json transport = parsed.value("transport", json(nullptr));
  if (!transport.is_string() || transport.get<std::string>() != kDirectTransport) {
    return RegistryError(400, "unsupported_transport",
                         "Unsupported transport " + transport.dump() + "; expected \"" +
                             std::string(kDirectTransport) + "\"");
  }
  return std::nullopt;
}

json DirectRegistrationAnswer(const std::string& environment_id, const std::string& registration_id,
                              const std::string& url) {
  return {{"environment_id", environment_id},
          {"transport", kDirectTransport},
          {"registration_id", registration_id},
          {"url", url}};
}

}  // namespace sbx::emulator::internal::openai
