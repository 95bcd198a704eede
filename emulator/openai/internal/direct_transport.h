// Direct transport: what the OpenAI emulator's executor registry needs to serve codex's
// `exec-server --remote-transport direct --aws-sigv4` (reference/codex-exec-server.md §5). The
// executor POSTs {remote_url}/cloud/environment/{id}/direct/register with the body
// {"transport":"direct_jsonrpc_v1"} and AWS SigV4 headers, is answered
// {environment_id, transport, registration_id, url}, then dials the WebSocket at `url`, where the
// emulator is the JSON-RPC client — the same socket handling as the stand-in executor's plain
// profile (ExecutorRegistry), so the emulated harness drives a real codex exactly like the
// stand-in.
//
// SigV4: the request must carry an `AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/
// <service>/aws4_request, SignedHeaders=…, Signature=…` authorization and an x-amz-date header;
// the signature itself is not verified (the reference allows a server to ignore it, and the
// emulator knows no AWS secret). Module-private to emulator/openai.
//
// Thread-safety: stateless free functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::openai {

// The refusal of a direct registration without a well-formed SigV4 authorization (401, registry
// error shape), or nullopt when it has one.
std::optional<HttpResponse> CheckSigV4Authorization(const HttpRequest& req);

// The refusal of a body that is not {"transport":"direct_jsonrpc_v1"} (400), or nullopt.
std::optional<HttpResponse> CheckDirectRegisterBody(const std::string& body);

// The 200 answer: {environment_id, transport:"direct_jsonrpc_v1", registration_id, url}.
nlohmann::json DirectRegistrationAnswer(const std::string& environment_id,
                                        const std::string& registration_id, const std::string& url);

}  // namespace sbx::emulator::internal::openai
