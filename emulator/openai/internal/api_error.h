// ApiError: the OpenAI wire shape of an error answer ({"error":{"message","type","param",
// "code"}}) and the executor registry's ({"error":{"code","message"}}), plus the few response
// helpers every part of the OpenAI emulator uses to answer. Module-private to emulator/openai.
//
// Thread-safety: stateless free functions.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::openai {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string code;  // empty → null
  std::string message;
  std::string param;  // empty → null
  std::optional<std::chrono::seconds> retry_after{};
};

HttpResponse JsonResponse(int status, const nlohmann::json& body);
// The Agents API error body; a Retry-After header when `e.retry_after` is set.
HttpResponse ErrorResponse(const ApiError& e);
ApiError NotFound(const std::string& what, const std::string& id);
ApiError BadRequest(const std::string& message, const std::string& param = {});
// Registry errors are {"error":{"code","message"}} (codex-exec-server.md §3.4).
HttpResponse RegistryError(int status, const std::string& code, const std::string& message);
// The token of an `Authorization: Bearer …` header, trimmed; empty if there is none.
std::string BearerToken(const HttpRequest& req);

}  // namespace sbx::emulator::internal::openai
