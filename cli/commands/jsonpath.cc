#include "cli/commands/jsonpath.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

namespace sbx::cli {

using nlohmann::json;

namespace jsonpath_internal {

struct Document {
  json root;
};

struct Filter;

struct Path {
  bool from_root = false;  // "$"; else relative to the current value ("@", ".", "[")
  struct Step {
    enum class Type { kField, kRecursive, kIndex, kFilter };
    Type type = Type::kField;
    std::vector<std::string> names;  // kField, kRecursive: one or more (a union); "*" = all
    struct Index {
      bool all = false;    // [*]
      bool slice = false;  // [a:b:c]
      std::optional<int64_t> start, end, step;
    };
    std::vector<Index> indexes;  // kIndex: one or more (a union)
    std::shared_ptr<const Filter> filter;
    std::string text;  // as written, for messages
  };
  std::vector<Step> steps;
};

struct Operand {
  std::optional<Path> path;
  json literal;
};

struct Filter {
  Operand lhs;
  std::string op;  // "" = existence of lhs
  Operand rhs;
};

struct Segment {
  enum class Type { kText, kPath, kRange };
  Type type = Type::kText;
  std::string text;
  Path path;
  std::vector<Segment> body;  // kRange
};

struct Template {
  std::vector<Segment> segments;
};

}  // namespace jsonpath_internal

namespace {

using jsonpath_internal::Filter;
using jsonpath_internal::Operand;
using jsonpath_internal::Path;
using jsonpath_internal::Segment;
using jsonpath_internal::Template;
using Values = std::vector<const json*>;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Characters that end a field name.
bool EndsName(char c) {
  return IsSpace(c) || std::string_view(".[]()=!<>,'\"").find(c) != std::string_view::npos;
}

// Recursive-descent parser of one action (the text between braces), or of a path inside one.
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  bool AtEnd() const { return pos_ >= s_.size(); }
  size_t pos() const { return pos_; }

  api::StatusOr<Path> ParsePath() {
    Path path;
    if (Peek() == '$' || Peek() == '@') {
      path.from_root = Peek() == '$';
      ++pos_;
    } else if (Peek() != '.' && Peek() != '[') {
      return Error(AtEnd() ? "expected a path" : "unrecognized character " + Quoted(Peek()));
    }
    while (!AtEnd()) {
      const char c = Peek();
      const size_t start = pos_;
      if (c == '.') {
        Path::Step step;
        ++pos_;
        if (Peek() == '.') {
          ++pos_;
          step.type = Path::Step::Type::kRecursive;
        }
        std::string name = ReadName();
        if (name.empty()) {
          if (step.type == Path::Step::Type::kField && path.steps.empty() &&
              (AtEnd() || IsSpace(Peek()))) {
            continue;  // "{.}": the current value itself
          }
          return Error("expected a field name after \".\"");
        }
        step.names.push_back(std::move(name));
        step.text = std::string(s_.substr(start, pos_ - start));
        path.steps.push_back(std::move(step));
      } else if (c == '[') {
        ASSIGN_OR_RETURN(Path::Step step, ParseBracket());
        step.text = std::string(s_.substr(start, pos_ - start));
        path.steps.push_back(std::move(step));
      } else if (EndsName(c)) {
        break;
      } else {
        return Error("unrecognized character " + Quoted(c));
      }
    }
    return path;
  }

  // A string literal in double or single quotes, with \n \t \r \" \' \\ escapes.
  api::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    ++pos_;
    std::string out;
    while (!AtEnd() && Peek() != quote) {
      char c = s_[pos_++];
      if (c == '\\') {
        if (AtEnd()) {
          break;
        }
        c = s_[pos_++];
        switch (c) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case '"':
          case '\'':
          case '\\':
            break;
          default:
            return Error(std::string("unknown escape \\") + c);
        }
      }
      out += c;
    }
    if (AtEnd()) {
      return Error("unterminated string");
    }
    ++pos_;
    return out;
  }

  // Consumes `word` when it stands alone (followed by a space or the end), and the spaces after.
  bool ConsumeKeyword(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word ||
        (pos_ + word.size() < s_.size() && !IsSpace(s_[pos_ + word.size()]))) {
      return false;
    }
    pos_ += word.size();
    SkipSpaces();
    return true;
  }

  void SkipSpaces() {
    while (!AtEnd() && IsSpace(Peek())) {
      ++pos_;
    }
  }

  char Peek() const { return AtEnd() ? '\0' : s_[pos_]; }

  api::Status Error(const std::string& what) const {
    return api::InvalidArgumentError(what + " at position " + std::to_string(pos_ + 1));
  }

 private:
  static std::string Quoted(char c) { return std::string("'") + c + "'"; }

  std::string ReadName() {
    const size_t start = pos_;
    while (!AtEnd() && !EndsName(Peek())) {
      ++pos_;
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  std::optional<int64_t> ReadInt() {
    const size_t start = pos_;
    if (Peek() == '-') {
      ++pos_;
    }
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      ++pos_;
    }
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, value);
    if (ec != std::errc() || end != s_.data() + pos_ || pos_ == start) {
      pos_ = start;
      return std::nullopt;
    }
    return value;
  }

  api::StatusOr<Path::Step> ParseBracket() {
    ++pos_;  // '['
    SkipSpaces();
    Path::Step step;
    if (Peek() == '?') {
      ++pos_;
      if (Peek() != '(') {
        return Error("expected \"(\" after \"?\"");
      }
      ++pos_;
      ASSIGN_OR_RETURN(Filter filter, ParseFilter());
      if (Peek() != ')') {
        return Error("unterminated filter");
      }
      ++pos_;
      step.type = Path::Step::Type::kFilter;
      step.filter = std::make_shared<const Filter>(std::move(filter));
    } else if (Peek() == '\'' || Peek() == '"') {
      step.type = Path::Step::Type::kField;
      for (;;) {
        SkipSpaces();
        if (Peek() != '\'' && Peek() != '"') {
          return Error("expected a quoted field name");
        }
        ASSIGN_OR_RETURN(std::string name, ParseString());
        step.names.push_back(std::move(name));
        SkipSpaces();
        if (Peek() != ',') {
          break;
        }
        ++pos_;
      }
    } else {
      step.type = Path::Step::Type::kIndex;
      for (;;) {
        SkipSpaces();
        Path::Step::Index index;
        if (Peek() == '*') {
          ++pos_;
          index.all = true;
        } else {
          index.start = ReadInt();
          if (Peek() == ':') {
            index.slice = true;
            ++pos_;
            index.end = ReadInt();
            if (Peek() == ':') {
              ++pos_;
              index.step = ReadInt();
              if (index.step && *index.step <= 0) {
                return Error("slice step must be positive");
              }
            }
          } else if (!index.start) {
            return Error(AtEnd() ? "unterminated [" : "invalid array index");
          }
        }
        step.indexes.push_back(index);
        SkipSpaces();
        if (Peek() != ',') {
          break;
        }
        ++pos_;
      }
    }
    SkipSpaces();
    if (Peek() != ']') {
      return Error(AtEnd() ? "unterminated [" : "expected \"]\"");
    }
    ++pos_;
    return step;
  }

  api::StatusOr<Operand> ParseOperand() {
    SkipSpaces();
    Operand operand;
    const char c = Peek();
    if (c == '@' || c == '$') {
      ASSIGN_OR_RETURN(operand.path, ParsePath());
    } else if (c == '"' || c == '\'') {
      ASSIGN_OR_RETURN(std::string text, ParseString());
      operand.literal = text;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = pos_;
      while (!AtEnd() && std::string_view("-+.eE0123456789").find(Peek()) != std::string::npos) {
        ++pos_;
      }
      operand.literal = json::parse(s_.substr(start, pos_ - start), nullptr, false);
      if (operand.literal.is_discarded()) {
        pos_ = start;
        return Error("invalid number");
      }
    } else {
      for (const std::string_view word : {"true", "false", "null"}) {
        if (s_.substr(pos_, word.size()) == word) {
          pos_ += word.size();
          operand.literal = json::parse(word);
          return operand;
        }
      }
      return Error("expected @, a string, a number, true, false or null in filter");
    }
    return operand;
  }

  api::StatusOr<Filter> ParseFilter() {
    Filter filter;
    ASSIGN_OR_RETURN(filter.lhs, ParseOperand());
    SkipSpaces();
    if (Peek() == ')') {
      if (!filter.lhs.path) {
        return Error("filter without a comparison needs a path");
      }
      return filter;
    }
    for (const std::string_view op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (s_.substr(pos_, op.size()) == op) {
        filter.op = std::string(op);
        pos_ += op.size();
        break;
      }
    }
    if (filter.op.empty()) {
      return Error("expected ==, !=, <, <=, > or >= in filter");
    }
    ASSIGN_OR_RETURN(filter.rhs, ParseOperand());
    SkipSpaces();
    return filter;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// The '}' that closes the action opened at `open`, skipping quoted text; npos if none.
size_t FindClose(std::string_view text, size_t open) {
  char quote = 0;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '}') {
      return i;
    }
  }
  return std::string_view::npos;
}

api::StatusOr<Template> Parse(std::string_view text) {
  Template parsed;
  std::vector<std::vector<Segment>*> stack = {&parsed.segments};
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find('{', pos);
    if (open != pos) {
      Segment literal;
      literal.text = std::string(text.substr(pos, open - pos));
      stack.back()->push_back(std::move(literal));
      if (open == std::string_view::npos) {
        break;
      }
    }
    const size_t close = FindClose(text, open);
    if (close == std::string_view::npos) {
      return api::InvalidArgumentError("unclosed action (no \"}\" for the \"{\" at position " +
                                       std::to_string(open + 1) + ")");
    }
    pos = close + 1;
    const std::string_view action = text.substr(open + 1, close - open - 1);
    const auto located = [&](const api::Status& s) {
      return api::InvalidArgumentError(s.message() + " in {" + std::string(action) + "}");
    };
    Parser parser(action);
    parser.SkipSpaces();
    if (parser.AtEnd()) {
      return api::InvalidArgumentError("empty action {} at position " + std::to_string(open + 1));
    }
    if (parser.ConsumeKeyword("end")) {
      if (!parser.AtEnd()) {
        return located(parser.Error("unexpected \"" + std::string(1, parser.Peek()) + "\""));
      }
      if (stack.size() == 1) {
        return api::InvalidArgumentError("{end} without {range}");
      }
      stack.pop_back();
      continue;
    }
    Segment segment;
    segment.type = parser.ConsumeKeyword("range") ? Segment::Type::kRange : Segment::Type::kPath;
    if (segment.type == Segment::Type::kPath && (parser.Peek() == '"' || parser.Peek() == '\'')) {
      auto literal = parser.ParseString();
      if (!literal.ok()) {
        return located(literal.status());
      }
      segment.type = Segment::Type::kText;
      segment.text = *literal;
    } else {
      auto path = parser.ParsePath();
      if (!path.ok()) {
        return located(path.status());
      }
      segment.path = std::move(path).value();
    }
    parser.SkipSpaces();
    if (!parser.AtEnd()) {
      return located(parser.Error("unexpected \"" + std::string(1, parser.Peek()) + "\""));
    }
    const bool is_range = segment.type == Segment::Type::kRange;
    stack.back()->push_back(std::move(segment));
    if (is_range) {
      stack.push_back(&stack.back()->back().body);
    }
  }
  if (stack.size() > 1) {
    return api::InvalidArgumentError("{range} without {end}");
  }
  return parsed;
}

// ---- evaluation -------------------------------------------------------------------------------

std::string TypeOf(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

std::string ToText(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

class Evaluator {
 public:
  Evaluator(const json& root, bool allow_missing) : root_(root), allow_missing_(allow_missing) {}

  api::StatusOr<Values> Eval(const Path& path, const json& current) const {
    Values values = {path.from_root ? &root_ : &current};
    for (const Path::Step& step : path.steps) {
      Values next;
      switch (step.type) {
        case Path::Step::Type::kField:
          for (const json* v : values) {
            for (const std::string& name : step.names) {
              if (name == "*" && (v->is_object() || v->is_array())) {
                for (const json& child : *v) {
                  next.push_back(&child);
                }
              } else if (v->is_object()) {
                if (auto it = v->find(name); it != v->end()) {
                  next.push_back(&*it);
                }
              }
            }
          }
          if (next.empty() && !values.empty() && !allow_missing_) {
            return api::InvalidArgumentError(step.text + " is not found");
          }
          break;
        case Path::Step::Type::kRecursive:
          for (const json* v : values) {
            Collect(*v, step.names[0], next);
          }
          break;
        case Path::Step::Type::kIndex:
          for (const json* v : values) {
            if (v->is_null()) {
              continue;
            }
            if (!v->is_array()) {
              return api::InvalidArgumentError("array index " + step.text + " on " + TypeOf(*v));
            }
            for (const Path::Step::Index& index : step.indexes) {
              RETURN_IF_ERROR(Select(*v, index, next));
            }
          }
          break;
        case Path::Step::Type::kFilter:
          for (const json* v : values) {
            if (!v->is_array()) {
              continue;
            }
            for (const json& element : *v) {
              ASSIGN_OR_RETURN(bool match, Matches(*step.filter, element));
              if (match) {
                next.push_back(&element);
              }
            }
          }
          break;
      }
      values = std::move(next);
    }
    return values;
  }

  api::Status Render(const std::vector<Segment>& segments, const json& current,
                     std::string& out) const {
    for (const Segment& segment : segments) {
      switch (segment.type) {
        case Segment::Type::kText:
          out += segment.text;
          break;
        case Segment::Type::kPath: {
          ASSIGN_OR_RETURN(Values values, Eval(segment.path, current));
          for (size_t i = 0; i < values.size(); ++i) {
            if (i > 0) {
              out += ' ';
            }
            out += ToText(*values[i]);
          }
          break;
        }
        case Segment::Type::kRange: {
          ASSIGN_OR_RETURN(Values values, Eval(segment.path, current));
          for (const json* v : values) {
            RETURN_IF_ERROR(Render(segment.body, *v, out));
          }
          break;
        }
      }
    }
    return api::OkStatus();
  }

 private:
  static void Collect(const json& v, const std::string& name, Values& out) {
    if (v.is_object()) {
      for (const auto& [key, child] : v.items()) {
        if (name == "*" || key == name) {
          out.push_back(&child);
        }
      }
    } else if (v.is_array() && name == "*") {
      for (const json& child : v) {
        out.push_back(&child);
      }
    }
    if (v.is_object() || v.is_array()) {
      for (const json& child : v) {
        Collect(child, name, out);
      }
    }
  }

  api::Status Select(const json& array, const Path::Step::Index& index, Values& out) const {
    const auto size = static_cast<int64_t>(array.size());
    if (index.all) {
      for (const json& element : array) {
        out.push_back(&element);
      }
      return api::OkStatus();
    }
    const auto clamp = [size](int64_t i) {
      return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
    };
    if (index.slice) {
      const int64_t start = clamp(index.start.value_or(0));
      const int64_t end = clamp(index.end.value_or(size));
      for (int64_t i = start; i < end; i += index.step.value_or(1)) {
        out.push_back(&array[static_cast<size_t>(i)]);
      }
      return api::OkStatus();
    }
    const int64_t i = *index.start < 0 ? *index.start + size : *index.start;
    if (i < 0 || i >= size) {
      if (allow_missing_) {
        return api::OkStatus();
      }
      return api::InvalidArgumentError("array index out of bounds: index " +
                                       std::to_string(*index.start) + ", length " +
                                       std::to_string(size));
    }
    out.push_back(&array[static_cast<size_t>(i)]);
    return api::OkStatus();
  }

  api::StatusOr<std::optional<json>> Operand(const jsonpath_internal::Operand& operand,
                                             const json& current) const {
    if (!operand.path) {
      return std::optional<json>(operand.literal);
    }
    // Inside a filter a missing key is simply no match.
    const Evaluator lenient(root_, true);
    ASSIGN_OR_RETURN(Values values, lenient.Eval(*operand.path, current));
    if (values.empty()) {
      return std::optional<json>();
    }
    return std::optional<json>(*values.front());
  }

  api::StatusOr<bool> Matches(const Filter& filter, const json& element) const {
    ASSIGN_OR_RETURN(std::optional<json> lhs, Operand(filter.lhs, element));
    if (filter.op.empty()) {
      return lhs.has_value() && !lhs->is_null();
    }
    ASSIGN_OR_RETURN(std::optional<json> rhs, Operand(filter.rhs, element));
    if (!lhs || !rhs) {
      return false;
    }
    int order = 0;
    if (lhs->is_number() && rhs->is_number()) {
      const double a = lhs->get<double>();
      const double b = rhs->get<double>();
      order = a < b ? -1 : (a > b ? 1 : 0);
    } else if (lhs->is_string() && rhs->is_string()) {
      order = lhs->get_ref<const std::string&>().compare(rhs->get_ref<const std::string&>());
    } else {
      const bool equal = *lhs == *rhs;
      return filter.op == "==" ? equal : (filter.op == "!=" ? !equal : false);
    }
    if (filter.op == "==") {
      return order == 0;
    }
    if (filter.op == "!=") {
      return order != 0;
    }
    if (filter.op == "<") {
      return order < 0;
    }
    if (filter.op == "<=") {
      return order <= 0;
    }
    if (filter.op == ">") {
      return order > 0;
    }
    return order >= 0;
  }

  const json& root_;
  bool allow_missing_;
};

JsonPathValue ToValue(const json& v) {
  JsonPathValue out;
  out.text = ToText(v);
  switch (v.type()) {
    case json::value_t::null:
      out.type = JsonPathValue::Type::kNull;
      break;
    case json::value_t::boolean:
      out.type = JsonPathValue::Type::kBool;
      out.number = v.get<bool>() ? 1 : 0;
      break;
    case json::value_t::string:
      out.type = JsonPathValue::Type::kString;
      break;
    case json::value_t::array:
      out.type = JsonPathValue::Type::kArray;
      break;
    case json::value_t::object:
      out.type = JsonPathValue::Type::kObject;
      break;
    default:
      out.type = JsonPathValue::Type::kNumber;
      out.number = v.get<double>();
      break;
  }
  return out;
}

void CollectValues(const Evaluator& evaluator, const std::vector<Segment>& segments,
                   const json& current, std::vector<JsonPathValue>& out, api::Status& status) {
  for (const Segment& segment : segments) {
    if (segment.type == Segment::Type::kText || !status.ok()) {
      continue;
    }
    auto values = evaluator.Eval(segment.path, current);
    if (!values.ok()) {
      status = values.status();
      return;
    }
    for (const json* v : *values) {
      if (segment.type == Segment::Type::kRange) {
        CollectValues(evaluator, segment.body, *v, out, status);
      } else {
        out.push_back(ToValue(*v));
      }
    }
  }
}

}  // namespace

api::StatusOr<JsonDocument> JsonDocument::Parse(std::string_view text) {
  auto document = std::make_shared<jsonpath_internal::Document>();
  document->root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document->root.is_discarded()) {
    return api::InvalidArgumentError("not valid JSON");
  }
  return JsonDocument(std::move(document));
}

int CompareJsonPathValues(const JsonPathValue& a, const JsonPathValue& b) {
  if (a.type != b.type) {
    return a.type < b.type ? -1 : 1;
  }
  if (a.type == JsonPathValue::Type::kNumber || a.type == JsonPathValue::Type::kBool) {
    return a.number < b.number ? -1 : (a.number > b.number ? 1 : 0);
  }
  const int c = a.text.compare(b.text);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

api::StatusOr<JsonPath> JsonPath::ParseTemplate(std::string_view text) {
  auto parsed = Parse(text);
  if (!parsed.ok()) {
    return api::InvalidArgumentError("error parsing jsonpath " + std::string(text) + ": " +
                                     parsed.status().message());
  }
  return JsonPath(std::string(text), std::make_shared<const Template>(std::move(parsed).value()));
}

api::StatusOr<JsonPath> JsonPath::ParseRelaxed(std::string_view text) {
  std::string_view inner = text;
  if (inner.size() >= 2 && inner.front() == '{' && inner.back() == '}') {
    inner = inner.substr(1, inner.size() - 2);
  }
  std::string braced = "{";
  if (!inner.empty() && inner.front() != '.' && inner.front() != '[' && inner.front() != '$' &&
      inner.front() != '@') {
    braced += '.';
  }
  braced += std::string(inner) + "}";
  ASSIGN_OR_RETURN(JsonPath path, ParseTemplate(braced));
  const auto& segments = path.template_->segments;
  if (inner.empty() || segments.size() != 1 || segments[0].type != Segment::Type::kPath) {
    return api::InvalidArgumentError("error parsing jsonpath " + std::string(text) +
                                     ": expected one path such as .metadata.name");
  }
  return path;
}

api::StatusOr<std::string> JsonPath::Execute(const JsonDocument& document,
                                             bool allow_missing_keys) const {
  std::string out;
  const Evaluator evaluator(document.document_->root, allow_missing_keys);
  const api::Status rendered = evaluator.Render(template_->segments, document.document_->root, out);
  if (!rendered.ok()) {
    return api::InvalidArgumentError("error executing jsonpath " + text_ + ": " +
                                     rendered.message());
  }
  return out;
}

api::StatusOr<std::vector<JsonPathValue>> JsonPath::Values(const JsonDocument& document) const {
  std::vector<JsonPathValue> out;
  api::Status status;
  const Evaluator evaluator(document.document_->root, /*allow_missing=*/true);
  CollectValues(evaluator, template_->segments, document.document_->root, out, status);
  if (!status.ok()) {
    return api::InvalidArgumentError("error executing jsonpath " + text_ + ": " + status.message());
  }
  return out;
}

}  // namespace sbx::cli
