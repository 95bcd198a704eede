// A small document tree shared by the YAML and JSON halves of the codec (module-private).
//
// Both yaml-cpp and nlohmann::json are parsed into / emitted from this one tree, so the field
// mapping in api/codec.cc is written once and no third-party header leaks out of the adapter
// files (tree_yaml.cc, tree_json.cc). Every node remembers where it came from (1-based
// line/column, 0 when the source has no positions). Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/status.h"

namespace sbx::api::internal {

struct Node;

struct Entry;

struct Node {
  enum class Type { kNull, kScalar, kMap, kSeq };
  // How a scalar was written. YAML plain scalars are untyped until a field asks for a type.
  enum class Scalar { kString, kPlain, kInt, kFloat, kBool };

  Type type = Type::kNull;
  Scalar scalar = Scalar::kString;
  std::string text;  // scalar text as written (kInt/kFloat/kBool: canonical text)
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::vector<Entry> entries;  // kMap, in source order
  std::vector<Node> items;     // kSeq
  int line = 0;                // 1-based; 0 = unknown
  int column = 0;

  static Node Map();
  static Node Seq();
  static Node String(std::string s);
  static Node Int(int64_t v);
  static Node Float(double v);
  static Node Bool(bool v);
  bool is_null() const { return type == Type::kNull; }
  // Appends a map entry (no duplicate check; encoders never add duplicates).
  void Add(std::string key, Node value);
};

struct Entry {
  std::string key;
  int line = 0;  // of the key
  int column = 0;
  Node value;
};

// One document of a YAML stream, with the position of its root.
struct Document {
  Node root;
  int line = 0;
};

// Parses a (multi-document) YAML stream (JSON is YAML). Empty documents are kept as null
// roots. Errors are kInvalidArgument, one line, the first one found:
// "<file>:<line>:<column>: invalid YAML: <reason>" for syntax errors, and
// "<file>:<line>:<column>: <field.path or yaml>: <problem>" for duplicate keys, aliases,
// nesting deeper than kMaxManifestDepth, more than kMaxManifestNodes nodes, huge flow
// collections and text that is not UTF-8 (api/codec.h).
StatusOr<std::vector<Document>> ParseYaml(std::string_view content, std::string_view file);

// Parses one JSON text; nodes carry no positions. kInvalidArgument on malformed JSON.
StatusOr<Node> ParseJson(std::string_view json);

// Emits a tree with map keys sorted (canonical). `pretty`: 2-space indentation.
std::string EmitJson(const Node& node, bool pretty);
// Emits block-style YAML with map keys sorted; strings that would read back as another type
// are quoted, multi-line strings use literal blocks where that round-trips exactly.
std::string EmitYaml(const Node& node);

}  // namespace sbx::api::internal
