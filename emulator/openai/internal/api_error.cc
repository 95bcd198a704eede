#include "emulator/openai/internal/api_error.h"

#include <strings.h>

namespace sbx::emulator::internal::openai {

using json = nlohmann::json;

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse ErrorResponse(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  HttpResponse r = JsonResponse(e.status, json{{"error", err}});
  if (e.retry_after) {
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after->count()));
  }
  return r;
}

ApiError NotFound(const std::string& what, const std::string& id) {
  return {404, "not_found_error", "not_found_error", what + " '" + id + "' not found", {}, {}};
}
ApiError BadRequest(const std::string& message, const std::string& param) {
  return {400, "invalid_request_error", "invalid_request_error", message, param, {}};
}

// Registry errors are {"error":{"code","message"}} (codex-exec-server.md §3.4).
HttpResponse RegistryError(int status, const std::string& code, const std::string& message) {
  return JsonResponse(status, json{{"error", {{"code", code}, {"message", message}}}});
}

std::string BearerToken(const HttpRequest& req) {
  std::string h = req.Header("authorization");
  if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0) {
    return {};
  }
  return Trim(h.substr(7));
}

}  // namespace sbx::emulator::internal::openai
