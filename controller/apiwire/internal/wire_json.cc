#include "controller/apiwire/internal/wire_json.h"

#include <exception>

#include "api/kinds.h"

namespace sbx::controller::apiwire_internal {

using json = nlohmann::json;

api::StatusOr<json> ParseJson(std::string_view body, std::string_view what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return api::InternalError("the server's answer is not a " + std::string(what) +
                              " (not a JSON object)");
  }
  return j;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) {
    return 0;
  }
  if (it->is_number_integer()) {
    return it->get<int64_t>();
  }
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

bool Bool(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

json KeyJson(const api::ObjectKey& key) {
  return json{{"kind", std::string(api::KindName(key.kind))},
              {"namespace", key.namespace_},
              {"name", key.name}};
}

api::StatusOr<api::ObjectKey> KeyFromJson(const json& j) {
  ASSIGN_OR_RETURN(api::Kind kind, api::ParseKind(Str(j, "kind")));
  return api::ObjectKey{kind, Str(j, "namespace"), Str(j, "name")};
}

}  // namespace sbx::controller::apiwire_internal
