// nlohmann::json adapter for the codec tree. nlohmann's default object type is a std::map, so
// emitted keys are sorted: the canonical form the store compares.
#include <nlohmann/json.hpp>

#include "api/internal/tree.h"

namespace sbx::api::internal {
namespace {

Node FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      Node n = Node::Map();
      n.entries.reserve(j.size());
      for (const auto& [key, value] : j.items()) {
        n.Add(key, FromJson(value));
      }
      return n;
    }
    case nlohmann::json::value_t::array: {
      Node n = Node::Seq();
      n.items.reserve(j.size());
      for (const auto& value : j) {
        n.items.push_back(FromJson(value));
      }
      return n;
    }
    case nlohmann::json::value_t::string:
      return Node::String(j.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return Node::Bool(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Node::Int(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        Node n = Node::Float(static_cast<double>(u));
        n.text = j.dump();
        return n;
      }
      return Node::Int(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: {
      Node n = Node::Float(j.get<double>());
      n.text = j.dump();
      return n;
    }
    default:
      return Node();
  }
}

nlohmann::json ToJson(const Node& n) {
  switch (n.type) {
    case Node::Type::kNull:
      return nullptr;
    case Node::Type::kMap: {
      nlohmann::json j = nlohmann::json::object();
      for (const Entry& e : n.entries) {
        j[e.key] = ToJson(e.value);
      }
      return j;
    }
    case Node::Type::kSeq: {
      nlohmann::json j = nlohmann::json::array();
      for (const Node& item : n.items) {
        j.push_back(ToJson(item));
      }
      return j;
    }
    case Node::Type::kScalar:
      switch (n.scalar) {
        case Node::Scalar::kInt:
          return n.int_value;
        case Node::Scalar::kFloat:
          return n.float_value;
        case Node::Scalar::kBool:
          return n.bool_value;
        case Node::Scalar::kString:
        case Node::Scalar::kPlain:
          return n.text;
      }
  }
  return nullptr;
}

}  // namespace

StatusOr<Node> ParseJson(std::string_view json) {
  try {
    return FromJson(nlohmann::json::parse(json.begin(), json.end()));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("invalid JSON: ") + e.what());
  }
}

std::string EmitJson(const Node& node, bool pretty) {
  return ToJson(node).dump(pretty ? 2 : -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sbx::api::internal
