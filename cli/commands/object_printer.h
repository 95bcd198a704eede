// ObjectPrinter: how sbxctl shows objects — the per-kind table columns of `get` (plain and
// wide), `-o yaml|json|name`, and the READY/AGE cells. AgentTasks show PHASE, WORKER (the
// picked one, else workerRef), AGE, DURATION, COMMANDS, ATTEMPTS
// (made so far; "n/max" with retries), RESULT (the error code, else the first
// line of the result message, cut at 60 bytes); wide adds QUEUE (position), SESSION, TURN and
// TOKENS (input + output tokens over all attempts, status.usage).
// kubectl conventions:
//   - a named `get` prints the object itself; a list prints `---`-separated YAML documents, or
//     for JSON one `{"apiVersion": "v1", "items": [...], "kind": "List"}` (as kubectl does);
//   - `-o name` prints `sandbox/foo`, one per line;
//   - `-o jsonpath=TEMPLATE` renders the template (jsonpath.h) against the object of a named
//     get, or against the JSON List otherwise;
//   - `-o custom-columns=NAME:.path,…` prints one table whatever the kinds: a cell is the
//     values the path selects joined by ",", `<none>` when it selects nothing.
// Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "cli/commands/jsonpath.h"

namespace sbx::cli {

enum class OutputFormat { kTable, kWide, kYaml, kJson, kName, kJsonPath, kCustomColumns };

// "" → kTable, "wide", "yaml", "json", "name"; anything else is kInvalidArgument.
api::StatusOr<OutputFormat> ParseOutputFormat(std::string_view text);

struct CustomColumn {
  std::string header;
  JsonPath path;
};

// What -o asked for.
struct OutputSpec {
  OutputFormat format = OutputFormat::kTable;
  std::optional<JsonPath> jsonpath;   // kJsonPath
  std::vector<CustomColumn> columns;  // kCustomColumns
  bool allow_missing_keys = true;     // kJsonPath: --allow-missing-template-keys
  bool no_headers = false;            // tables: --no-headers
};

// ParseOutputFormat, and "jsonpath=TEMPLATE", "custom-columns=NAME:PATH[,NAME:PATH…]". A bad
// template or column spec is kInvalidArgument, one line.
api::StatusOr<OutputSpec> ParseOutputSpec(std::string_view text);

// Whether `spec` prints a table (kTable, kWide, kCustomColumns), and its header and rows for
// objects of `kind` (custom columns are the same for every kind).
bool IsTable(const OutputSpec& spec);
std::vector<std::string> TableHeaders(const OutputSpec& spec, api::Kind kind, bool with_namespace);
std::vector<std::string> TableRow(const OutputSpec& spec, const api::Object& object,
                                  bool with_namespace, std::chrono::system_clock::time_point now);

// Sorts `objects` (stably) by the first value `path` selects in each; an object where it selects
// nothing goes first. kInvalidArgument when it selects nothing in any of them (kubectl's
// "couldn't find any field with path").
api::Status SortObjects(std::vector<api::Object>& objects, const JsonPath& path);

// Whether `kind` has columns of its own in get's table (every kind must: a new kind's row).
bool HasTableColumns(api::Kind kind);
// Table header and one row for `kind`. `with_namespace` (get -A) puts NAMESPACE first.
std::vector<std::string> TableHeaders(api::Kind kind, bool wide, bool with_namespace);
std::vector<std::string> TableRow(const api::Object& object, bool wide, bool with_namespace,
                                  std::chrono::system_clock::time_point now);

// An AgentTask's DURATION: from submission (where its timeout starts) to completion, or to
// `now` while it runs; "<none>" before submission. FormatAge's units ("1m5s").
std::string TaskDuration(const api::AgentTaskStatus& status,
                         std::chrono::system_clock::time_point now);

// "True" / "False" / "Unknown" of the condition `type` ("Unknown" when absent).
std::string ConditionCell(const api::Object& object, std::string_view type);

// Prints `objects` as `spec` says. `single` means a named get: the object, not a list.
// Tables group objects by kind (a blank line between kinds, names as `sandbox/foo` when there
// are several kinds, like `kubectl get sb,aw`). Only a jsonpath template can fail (a missing
// key with allow_missing_keys false); nothing is printed then.
api::Status PrintObjects(std::ostream& out, const std::vector<api::Object>& objects,
                         const OutputSpec& spec, bool single, bool with_namespace,
                         std::chrono::system_clock::time_point now);

// The JSON List of kubectl around already encoded objects.
std::string JsonList(const std::vector<std::string>& encoded_objects);

// The lines of a top-level block ("spec", "status") of canonical YAML as encoded by
// api::EncodeObjectYaml, with their indentation; "" if absent.
std::string YamlBlock(std::string_view yaml, std::string_view key);

}  // namespace sbx::cli
