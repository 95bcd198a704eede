// JsonPath: kubectl's JSONPath template language, for `get -o jsonpath=…`, `-o custom-columns`
// and `--sort-by`. The subset kubectl documents:
//   - text outside braces is printed as is; {"\n"} prints a string literal (\n \t \r \" \\);
//   - {.a.b}, {$.a} (root), {@} (current), {.a['b.c']}, {..name} (recursive), {.a.*}, {.a[*]},
//     {.a[0]}, {.a[-1]}, {.a[1:3]}, {.a[0,2]}, {.a['x','y']};
//   - filters {.a[?(@.type=="Ready")]} with == != < <= > >= against a string, number, true,
//     false or null (or another path), and existence {.a[?(@.x)]};
//   - {range .items[*]}…{end}: the body once per value of the path, with @ (and paths starting
//     with "." or "[") relative to that value.
// Several values of one expression are joined by a space; strings print raw, everything else as
// compact JSON. A key that is missing prints nothing unless allow_missing_keys is false (as
// kubectl's --allow-missing-template-keys), then it is an error.
//
// Errors are kInvalidArgument, one line: `error parsing jsonpath {.a[}: unterminated [` and
// `error executing jsonpath {.a[0]}: array index [0] on a string`. Values; thread-safe once
// built. JsonDocument holds the parsed JSON that paths are evaluated against.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"

namespace sbx::cli {

namespace jsonpath_internal {
struct Template;
struct Document;
}  // namespace jsonpath_internal

// A JSON text parsed once, to evaluate several paths against.
class JsonDocument {
 public:
  // kInvalidArgument if `json` is not JSON.
  static api::StatusOr<JsonDocument> Parse(std::string_view json);

 private:
  friend class JsonPath;
  explicit JsonDocument(std::shared_ptr<const jsonpath_internal::Document> document)
      : document_(std::move(document)) {}
  std::shared_ptr<const jsonpath_internal::Document> document_;
};

// One value a path selected, for custom-columns cells and --sort-by.
struct JsonPathValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  double number = 0;  // kNumber; kBool: 0 or 1
  std::string text;   // as printed: strings raw, the rest compact JSON
};

// <0, 0, >0. Numbers compare numerically, strings byte-wise, values of different types by type
// (null < bool < number < string < array < object).
int CompareJsonPathValues(const JsonPathValue& a, const JsonPathValue& b);

class JsonPath {
 public:
  // A template as `-o jsonpath=` takes it.
  static api::StatusOr<JsonPath> ParseTemplate(std::string_view text);
  // One path as custom-columns and --sort-by take it, braces and leading dot optional:
  // "{.metadata.name}", ".metadata.name", "metadata.name". Anything but one path (text, a
  // literal, range) is kInvalidArgument.
  static api::StatusOr<JsonPath> ParseRelaxed(std::string_view text);

  // The template as given (ParseRelaxed: in braces, "{.metadata.name}").
  const std::string& text() const { return text_; }

  // Renders the template against `document`.
  api::StatusOr<std::string> Execute(const JsonDocument& document,
                                     bool allow_missing_keys = true) const;
  // The values the template's paths select, in order (for custom-columns and --sort-by).
  // Missing keys select nothing.
  api::StatusOr<std::vector<JsonPathValue>> Values(const JsonDocument& document) const;

 private:
  JsonPath(std::string text, std::shared_ptr<const jsonpath_internal::Template> parsed)
      : text_(std::move(text)), template_(std::move(parsed)) {}
  std::string text_;
  std::shared_ptr<const jsonpath_internal::Template> template_;
};

}  // namespace sbx::cli
