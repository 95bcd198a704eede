// Helpers shared by the cpprestsdk adapters (the single-shot HttpTransport here and the OpenAI
// streaming transport). Module-private: include only from adapter .cc files that already
// include cpprest (define _TURN_OFF_PLATFORM_STRING before it). Stateless; thread-safe.
#pragma once

#include <cpprest/http_client.h>

#include <string>
#include <utility>

namespace sbx::controller::databricks::internal {

// Splits "scheme://authority/path?query" into ("scheme://authority", "/path?query").
std::pair<std::string, std::string> SplitUrl(const std::string& url);

// cpprest's asio client reports these before it has written anything: safe to retry even a
// non-idempotent request.
bool IsConnectPhase(const web::http::http_exception& e);

}  // namespace sbx::controller::databricks::internal
