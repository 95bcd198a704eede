#include "cli/commands/explain_command.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/commands/embedded_schemas.h"

namespace sbx::cli {

using nlohmann::json;

namespace {

constexpr int kMaxDepth = 12;

// `node` with its $ref and allOf parts merged in (its own keys win: the description of a field
// that points to a shared definition is the field's).
json Flatten(const json& root, const json& node, int depth = 0) {
  if (!node.is_object() || depth > kMaxDepth) {
    return node;
  }
  json out = json::object();
  const auto merge = [&out](const json& part) {
    for (const auto& [key, value] : part.items()) {
      if (key == "properties" && out.contains("properties")) {
        out["properties"].update(value);
      } else if (key == "required" && out.contains("required")) {
        for (const json& r : value) {
          out["required"].push_back(r);
        }
      } else {
        out[key] = value;
      }
    }
  };
  if (node.contains("$ref")) {
    const std::string ref = node["$ref"].get<std::string>();
    const std::string prefix = "#/definitions/";
    if (ref.rfind(prefix, 0) == 0) {
      const json::json_pointer pointer("/definitions/" + ref.substr(prefix.size()));
      if (root.contains(pointer)) {
        merge(Flatten(root, root[pointer], depth + 1));
      }
    }
  }
  if (node.contains("allOf")) {
    for (const json& part : node["allOf"]) {
      merge(Flatten(root, part, depth + 1));
    }
  }
  json own = node;
  own.erase("$ref");
  own.erase("allOf");
  merge(own);
  return out;
}

// The elements of a list, the node itself otherwise.
json Element(const json& root, const json& node) {
  json flat = Flatten(root, node);
  if (flat.value("type", "") == "array" && flat.contains("items")) {
    return Element(root, flat["items"]);
  }
  return flat;
}

std::string TypeName(const json& root, const json& node) {
  const json flat = Flatten(root, node);
  std::string type = flat.value("type", "");
  if (type == "array") {
    return "[]" + (flat.contains("items") ? TypeName(root, flat["items"]) : "Object");
  }
  if (type == "object" || (type.empty() && flat.contains("properties"))) {
    if (!flat.contains("properties") && flat.contains("additionalProperties") &&
        flat["additionalProperties"].is_object()) {
      return "map[string]" + TypeName(root, flat["additionalProperties"]);
    }
    return "Object";
  }
  if (!type.empty()) {
    return type;
  }
  if (flat.contains("const") && flat["const"].is_string()) {
    return "string";
  }
  return "Object";
}

std::string Plain(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string EnumText(const json& flat) {
  std::string out;
  for (const json& v : flat.value("enum", json::array())) {
    out += (out.empty() ? "" : ", ") + Plain(v);
  }
  return out;
}

void PrintIndented(std::ostream& out, const std::string& text, const std::string& indent) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    out << indent << line << "\n";
  }
}

void PrintFieldsRecursive(std::ostream& out, const json& root, const json& node,
                          const std::string& indent, int depth) {
  const json element = Element(root, node);
  if (depth > kMaxDepth || !element.contains("properties")) {
    return;
  }
  for (const auto& [name, child] : element["properties"].items()) {
    out << indent << name << "\t<" << TypeName(root, child) << ">\n";
    PrintFieldsRecursive(out, root, child, indent + "  ", depth + 1);
  }
}

struct Resolved {
  api::Kind kind;
  json root;
  json node;          // the field (the whole schema for KIND alone)
  std::string field;  // its name; empty for KIND alone
};

api::StatusOr<Resolved> Resolve(std::string_view path) {
  const size_t dot = path.find('.');
  ASSIGN_OR_RETURN(api::Kind kind, api::ParseKind(path.substr(0, dot)));
  Resolved out{kind, json::parse(EmbeddedSchema(kind)), json(), ""};
  out.node = out.root;
  std::string_view rest = dot == std::string_view::npos ? "" : path.substr(dot + 1);
  if (dot != std::string_view::npos && rest.empty()) {
    return api::InvalidArgumentError("a field name is missing after \".\" in \"" +
                                     std::string(path) + "\"");
  }
  while (!rest.empty()) {
    const size_t next = rest.find('.');
    const std::string field(rest.substr(0, next));
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
    const json element = Element(out.root, out.node);
    if (field.empty() || !element.contains("properties") ||
        !element["properties"].contains(field)) {
      return api::InvalidArgumentError("field \"" + field + "\" does not exist");
    }
    out.node = element["properties"][field];
    out.field = field;
  }
  return out;
}

}  // namespace

std::vector<std::string> ExplainFieldNames(std::string_view path) {
  std::vector<std::string> names;
  auto resolved = Resolve(path);
  if (!resolved.ok()) {
    return names;
  }
  const json element = Element(resolved->root, resolved->node);
  // Keep the properties alive for the loop: items() of a temporary would dangle.
  const json properties = element.value("properties", json::object());
  for (const auto& [name, child] : properties.items()) {
    names.push_back(name);
  }
  return names;
}

int RunExplain(CommandContext& ctx, const ExplainCommandOptions& options) {
  if (options.path.empty()) {
    return ctx.Fail(api::InvalidArgumentError(
        "you must specify the type of resource to explain (sandbox|sb, agentworker|aw, "
        "workspace|ws), e.g. sbxctl explain sandbox.spec.setup"));
  }
  auto resolved = Resolve(options.path);
  if (!resolved.ok()) {
    return ctx.Fail(resolved.status());
  }
  const json& root = resolved->root;
  std::ostream& out = ctx.out();
  out << "KIND:       " << api::KindName(resolved->kind) << "\n";
  out << "VERSION:    " << api::kApiVersion << "\n\n";
  const json flat = Flatten(root, resolved->node);
  if (!resolved->field.empty()) {
    out << "FIELD: " << resolved->field << " <" << TypeName(root, resolved->node) << ">\n";
    if (flat.contains("default")) {
      out << "DEFAULT: " << Plain(flat["default"]) << "\n";
    }
    if (flat.contains("enum")) {
      out << "ENUM:\n";
      for (const json& v : flat["enum"]) {
        out << "    " << Plain(v) << "\n";
      }
    }
    out << "\n";
  }
  const std::string description =
      resolved->field.empty() ? flat.value("title", "") : flat.value("description", "");
  out << "DESCRIPTION:\n";
  PrintIndented(out, description.empty() ? "<empty>" : description, "    ");

  const json element = Element(root, resolved->node);
  if (!element.contains("properties")) {
    return kExitOk;
  }
  out << "\nFIELDS:\n";
  if (options.recursive) {
    PrintFieldsRecursive(out, root, resolved->node, "  ", 0);
    return kExitOk;
  }
  std::set<std::string> required;
  for (const json& r : element.value("required", json::array())) {
    required.insert(r.get<std::string>());
  }
  bool first = true;
  for (const auto& [name, child] : element["properties"].items()) {
    if (!first) {
      out << "\n";
    }
    first = false;
    const json field = Flatten(root, child);
    out << "  " << name << "\t<" << TypeName(root, child) << ">"
        << (required.count(name) > 0 ? " -required-" : "") << "\n";
    if (field.contains("enum")) {
      out << "  enum: " << EnumText(field) << "\n";
    }
    if (field.contains("default")) {
      out << "  default: " << Plain(field["default"]) << "\n";
    }
    const std::string text = field.value("description", "");
    PrintIndented(out, text.empty() ? "<no description>" : text, "    ");
  }
  return kExitOk;
}

void AddExplainCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ExplainCommandOptions>();
  CLI::App* sub = app.add_subcommand("explain", "Describe the fields of a kind's manifest");
  sub->add_option("path", options->path, "KIND[.field…], e.g. sandbox.spec.setup");
  sub->add_flag("--recursive", options->recursive, "print every field below, names and types");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunExplain(ctx, *options); }; });
}

}  // namespace sbx::cli
