// yaml-cpp adapter for the codec tree: positions from node Marks, quoted vs plain scalars from
// the node tag ("!" = quoted, "?" = plain), and an emitter that quotes strings which would read
// back as another type.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "api/internal/tree.h"

namespace sbx::api::internal {
namespace {

int Line(const YAML::Mark& m) { return m.line >= 0 ? m.line + 1 : 0; }
int Column(const YAML::Mark& m) { return m.column >= 0 ? m.column + 1 : 0; }

std::string Where(std::string_view file, int line, int column) {
  return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

bool IsNullWord(std::string_view s) {
  return s == "~" || s == "null" || s == "Null" || s == "NULL";
}

struct Converter {
  std::string_view file;

  StatusOr<Node> Convert(const YAML::Node& y, const std::string& path) {
    Node n;
    const YAML::Mark mark = y.Mark();
    switch (y.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        break;
      case YAML::NodeType::Scalar: {
        const std::string& tag = y.Tag();
        if (tag == "?" && IsNullWord(y.Scalar())) {
          break;
        }
        n.type = Node::Type::kScalar;
        n.scalar = (tag == "?") ? Node::Scalar::kPlain : Node::Scalar::kString;
        n.text = y.Scalar();
        break;
      }
      case YAML::NodeType::Sequence: {
        n.type = Node::Type::kSeq;
        n.items.reserve(y.size());
        size_t i = 0;
        for (const YAML::Node& item : y) {
          ASSIGN_OR_RETURN(Node child, Convert(item, path + "[" + std::to_string(i) + "]"));
          n.items.push_back(std::move(child));
          ++i;
        }
        break;
      }
      case YAML::NodeType::Map: {
        n.type = Node::Type::kMap;
        n.entries.reserve(y.size());
        std::unordered_set<std::string> seen;
        for (auto it = y.begin(); it != y.end(); ++it) {
          const YAML::Node& key = it->first;
          const YAML::Mark km = key.Mark();
          if (!key.IsScalar()) {
            return InvalidArgumentError(Where(file, Line(km), Column(km)) +
                                        (path.empty() ? std::string("") : path + ": ") +
                                        "keys must be plain strings");
          }
          const std::string& k = key.Scalar();
          const std::string child_path = path.empty() ? k : path + "." + k;
          if (!seen.insert(k).second) {
            return InvalidArgumentError(Where(file, Line(km), Column(km)) + child_path +
                                        ": duplicate field");
          }
          ASSIGN_OR_RETURN(Node value, Convert(it->second, child_path));
          n.entries.push_back(Entry{k, Line(km), Column(km), std::move(value)});
        }
        break;
      }
    }
    n.line = Line(mark);
    n.column = Column(mark);
    return n;
  }
};

bool LooksNumeric(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  const char c = s.front();
  return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

bool NeedsQuotes(std::string_view s) {
  static constexpr std::string_view kWords[] = {
      "true", "True", "TRUE", "false", "False", "FALSE", "yes",  "Yes",  "YES", "no",
      "No",   "NO",   "on",   "On",    "ON",    "off",   "Off",  "OFF",  "y",   "Y",
      "n",    "N",    "~",    "null",  "Null",  "NULL",  ".inf", ".nan", "<<"};
  if (s.empty() || LooksNumeric(s)) {
    return true;
  }
  return std::find(std::begin(kWords), std::end(kWords), s) != std::end(kWords);
}

// A literal block ("|") reads back exactly only for text ending in one newline, with no
// leading space on the first line, no trailing spaces and only printable characters.
bool FitsLiteralBlock(std::string_view s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n' || s.front() == ' ' ||
      s.front() == '\n') {
    return false;
  }
  char prev = '\0';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' && (prev == ' ' || prev == '\t')) {
      return false;
    }
    if (c != '\n' && c != '\t' && u < 0x20) {
      return false;
    }
    prev = c;
  }
  return true;
}

void EmitScalarString(YAML::Emitter& out, const std::string& s) {
  if (s.find('\n') != std::string::npos) {
    if (FitsLiteralBlock(s)) {
      out << YAML::Literal << s;
    } else {
      out << YAML::DoubleQuoted << s;
    }
    return;
  }
  if (NeedsQuotes(s)) {
    out << YAML::DoubleQuoted << s;
  } else {
    out << s;
  }
}

void Emit(YAML::Emitter& out, const Node& n) {
  switch (n.type) {
    case Node::Type::kNull:
      out << YAML::Null;
      return;
    case Node::Type::kMap: {
      if (n.entries.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      std::vector<const Entry*> sorted;
      sorted.reserve(n.entries.size());
      for (const Entry& e : n.entries) {
        sorted.push_back(&e);
      }
      std::sort(sorted.begin(), sorted.end(),
                [](const Entry* a, const Entry* b) { return a->key < b->key; });
      out << YAML::BeginMap;
      for (const Entry* e : sorted) {
        out << YAML::Key;
        EmitScalarString(out, e->key);
        out << YAML::Value;
        Emit(out, e->value);
      }
      out << YAML::EndMap;
      return;
    }
    case Node::Type::kSeq:
      if (n.items.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const Node& item : n.items) {
        Emit(out, item);
      }
      out << YAML::EndSeq;
      return;
    case Node::Type::kScalar:
      switch (n.scalar) {
        case Node::Scalar::kInt:
          out << n.int_value;
          return;
        case Node::Scalar::kFloat: {
          // Shortest text that reads back as the same double (no 0.10000000000000001).
          char buf[64];
          auto res = std::to_chars(buf, buf + sizeof(buf), n.float_value);
          out << std::string(buf, res.ptr);
          return;
        }
        case Node::Scalar::kBool:
          out << (n.bool_value ? "true" : "false");
          return;
        case Node::Scalar::kString:
        case Node::Scalar::kPlain:
          EmitScalarString(out, n.text);
          return;
      }
  }
}

}  // namespace

StatusOr<std::vector<Document>> ParseYaml(std::string_view content, std::string_view file) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(content));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(Where(file, Line(e.mark), Column(e.mark)) +
                                "invalid YAML: " + e.msg);
  }
  std::vector<Document> out;
  out.reserve(docs.size());
  Converter converter{file};
  for (const YAML::Node& doc : docs) {
    try {
      ASSIGN_OR_RETURN(Node root, converter.Convert(doc, ""));
      const int line = root.line;
      out.push_back(Document{std::move(root), line});
    } catch (const YAML::Exception& e) {
      return InvalidArgumentError(Where(file, Line(e.mark), Column(e.mark)) +
                                  "invalid YAML: " + e.msg);
    }
  }
  return out;
}

std::string EmitYaml(const Node& node) {
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, node);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') {
    text += '\n';
  }
  return text;
}

}  // namespace sbx::api::internal
