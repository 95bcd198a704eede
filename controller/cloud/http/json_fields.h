// Typed access to the fields of a JSON body, shared by the wire formats of the cloud clients.
//
// Every accessor treats an absent key and a JSON null alike ("not set") and throws FieldError,
// naming the field path (`path` + `key`, e.g. "$.status.state"), when the value has the wrong
// JSON type; each wire format's Decode* catches it and returns kInternal ("the server sent
// something we cannot read"). Include only from wire-format .cc files: this header exposes
// nlohmann::json (STYLE rule 4), and FieldError must not escape them. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sbx::controller::http {

// Thrown by the accessors below; carries "<field path>: expected …".
struct FieldError {
  std::string message;
};

// The value of `key` in `obj`, or nullptr when `obj` is not an object, or the key is absent or
// null.
const nlohmann::json* Find(const nlohmann::json& obj, const char* key);

std::optional<std::string> GetOptString(const nlohmann::json& obj, const char* key,
                                        const std::string& path);
// "" when not set.
std::string GetString(const nlohmann::json& obj, const char* key, const std::string& path);
// false when not set.
bool GetBool(const nlohmann::json& obj, const char* key, const std::string& path);
// A JSON number (a fraction is truncated); 0 when not set.
int64_t GetInt64(const nlohmann::json& obj, const char* key, const std::string& path);
// int64 as proto3 JSON writes it: an integral number or a decimal string; nullopt when not set.
std::optional<int64_t> GetOptProtoInt64(const nlohmann::json& obj, const char* key,
                                        const std::string& path);
// nullptr when not set.
const nlohmann::json* GetObject(const nlohmann::json& obj, const char* key,
                                const std::string& path);
const nlohmann::json* GetArray(const nlohmann::json& obj, const char* key, const std::string& path);
// Empty when not set; every element must be a string.
std::vector<std::string> GetStringArray(const nlohmann::json& obj, const char* key,
                                        const std::string& path);
// Empty when not set; every value must be a string.
std::map<std::string, std::string> GetStringMap(const nlohmann::json& obj, const char* key,
                                                const std::string& path);

}  // namespace sbx::controller::http
