// The JSON helpers of sbxd's REST API wire format that api_wire.cc and store_records_wire.cc
// share: reading a reply, writing compactly, lenient field reads (a missing or mistyped field
// reads as empty), object keys.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::controller::apiwire_internal {

// Parses a reply; kInternal naming what was expected when it is not JSON of that shape.
api::StatusOr<nlohmann::json> ParseJson(std::string_view body, std::string_view what);
// Compact, invalid UTF-8 replaced.
std::string Dump(const nlohmann::json& j);
// The field, or "" / 0 / false when it is missing or of another type (Int also reads a decimal
// string: int64 fields travel as strings).
std::string Str(const nlohmann::json& j, const char* key);
int64_t Int(const nlohmann::json& j, const char* key);
bool Bool(const nlohmann::json& j, const char* key);
nlohmann::json KeyJson(const api::ObjectKey& key);
api::StatusOr<api::ObjectKey> KeyFromJson(const nlohmann::json& j);

}  // namespace sbx::controller::apiwire_internal
