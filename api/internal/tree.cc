#include "api/internal/tree.h"

namespace sbx::api::internal {

Node Node::Map() {
  Node n;
  n.type = Type::kMap;
  return n;
}

Node Node::Seq() {
  Node n;
  n.type = Type::kSeq;
  return n;
}

Node Node::String(std::string s) {
  Node n;
  n.type = Type::kScalar;
  n.scalar = Scalar::kString;
  n.text = std::move(s);
  return n;
}

Node Node::Int(int64_t v) {
  Node n;
  n.type = Type::kScalar;
  n.scalar = Scalar::kInt;
  n.int_value = v;
  n.text = std::to_string(v);
  return n;
}

Node Node::Float(double v) {
  Node n;
  n.type = Type::kScalar;
  n.scalar = Scalar::kFloat;
  n.float_value = v;
  return n;  // text is produced by the emitters (shortest round-trip form).
}

Node Node::Bool(bool v) {
  Node n;
  n.type = Type::kScalar;
  n.scalar = Scalar::kBool;
  n.bool_value = v;
  n.text = v ? "true" : "false";
  return n;
}

void Node::Add(std::string key, Node value) {
  entries.push_back(Entry{std::move(key), 0, 0, std::move(value)});
}

}  // namespace sbx::api::internal
