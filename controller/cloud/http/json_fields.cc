#include "controller/cloud/http/json_fields.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace sbx::controller::http {

using json = nlohmann::json;

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) {
    return nullptr;
  }
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

std::optional<std::string> GetOptString(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (!v->is_string()) {
    throw FieldError{path + key + ": expected a string"};
  }
  return v->get<std::string>();
}

std::string GetString(const json& obj, const char* key, const std::string& path) {
  return GetOptString(obj, key, path).value_or("");
}

bool GetBool(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return false;
  }
  if (!v->is_boolean()) {
    throw FieldError{path + key + ": expected a boolean"};
  }
  return v->get<bool>();
}

int64_t GetInt64(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return 0;
  }
  if (v->is_number_integer()) {
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d)) {
      return static_cast<int64_t>(d);
    }
  }
  throw FieldError{path + key + ": expected a number"};
}

std::optional<int64_t> GetOptProtoInt64(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->is_number_integer()) {
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::trunc(d) == d) {
      return static_cast<int64_t>(d);
    }
  }
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) {
      return static_cast<int64_t>(n);
    }
  }
  throw FieldError{path + key + ": expected an integer"};
}

const json* GetObject(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v != nullptr && !v->is_object()) {
    throw FieldError{path + key + ": expected an object"};
  }
  return v;
}

const json* GetArray(const json& obj, const char* key, const std::string& path) {
  const json* v = Find(obj, key);
  if (v != nullptr && !v->is_array()) {
    throw FieldError{path + key + ": expected an array"};
  }
  return v;
}

std::vector<std::string> GetStringArray(const json& obj, const char* key, const std::string& path) {
  std::vector<std::string> out;
  if (const json* arr = GetArray(obj, key, path)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      if (!(*arr)[i].is_string()) {
        throw FieldError{path + key + "[" + std::to_string(i) + "]: expected a string"};
      }
      out.push_back((*arr)[i].get<std::string>());
    }
  }
  return out;
}

std::map<std::string, std::string> GetStringMap(const json& obj, const char* key,
                                                const std::string& path) {
  std::map<std::string, std::string> out;
  if (const json* m = GetObject(obj, key, path)) {
    for (const auto& [k, v] : m->items()) {
      if (!v.is_string()) {
        std::string message = path + key;
        message.append(".").append(k).append(": expected a string");
        throw FieldError{std::move(message)};
      }
      out[k] = v.get<std::string>();
    }
  }
  return out;
}

}  // namespace sbx::controller::http
