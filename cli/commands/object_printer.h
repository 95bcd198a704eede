// ObjectPrinter: how sbxctl shows objects — the per-kind table columns of `get` (plain and
// wide), `-o yaml|json|name`, and the READY/AGE cells. kubectl conventions:
//   - a named `get` prints the object itself; a list prints `---`-separated YAML documents, or
//     for JSON one `{"apiVersion": "v1", "items": [...], "kind": "List"}` (as kubectl does);
//   - `-o name` prints `sandbox/foo`, one per line.
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::cli {

enum class OutputFormat { kTable, kWide, kYaml, kJson, kName };

// "" → kTable, "wide", "yaml", "json", "name"; anything else is kInvalidArgument.
api::StatusOr<OutputFormat> ParseOutputFormat(std::string_view text);

// Table header and one row for `kind`. `with_namespace` (get -A) puts NAMESPACE first.
std::vector<std::string> TableHeaders(api::Kind kind, bool wide, bool with_namespace);
std::vector<std::string> TableRow(const api::Object& object, bool wide, bool with_namespace,
                                  std::chrono::system_clock::time_point now);

// "True" / "False" / "Unknown" of the condition `type` ("Unknown" when absent).
std::string ConditionCell(const api::Object& object, std::string_view type);

// Prints `objects` in `format`. `single` means a named get: the object, not a list.
// Tables group objects by kind (a blank line between kinds, names as `sandbox/foo` when there
// are several kinds, like `kubectl get sb,aw`).
void PrintObjects(std::ostream& out, const std::vector<api::Object>& objects, OutputFormat format,
                  bool single, bool with_namespace, std::chrono::system_clock::time_point now);

// The JSON List of kubectl around already encoded objects.
std::string JsonList(const std::vector<std::string>& encoded_objects);

// The lines of a top-level block ("spec", "status") of canonical YAML as encoded by
// api::EncodeObjectYaml, with their indentation; "" if absent.
std::string YamlBlock(std::string_view yaml, std::string_view key);

}  // namespace sbx::cli
