// Field mapping between sbx objects and the codec tree (api/internal/tree.h). Each part of a
// resource (metadata, a spec, a status, and the structs inside them) has one field table below:
// a row names the field once and says how its value is read and written and whether it is
// written while empty. The table drives the three things a field needs: the allow-list of known
// keys (strict manifests, with "did you mean"), the reader and the encoder. Adding a field is
// one row. The mapping serves YAML manifests (strict, with positions) and the store's JSON
// (lenient about unknown fields, no positions).
//
// Canonical encoding rule: a field whose C++ default is empty/zero/false/unset is omitted when
// it has that value (rows with the default Presence::kOmitEmpty); a field with a non-empty
// default (namespace, workspaceRef, power, …) is always written (Presence::kAlways). Decoding an
// absent field gives the C++ default, so decode(encode(x)) == x and the same object always gives
// the same bytes.
#include "api/codec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>

#include "api/duration.h"
#include "api/internal/tree.h"
#include "api/kinds.h"
#include "api/usage.h"

namespace sbx::api {
namespace {

using internal::Entry;
using internal::Node;

// ---- Reading primitives ---------------------------------------------------------------------

struct Ctx {
  std::string_view file;
  bool manifest = false;  // strict unknown fields; server-set fields and status ignored
  std::map<std::string, Manifest::Position, std::less<>>* positions = nullptr;
};

// Where a value sits: the node, its field path and the position of its key.
struct Field {
  const Node* node;
  std::string path;
  int line;
  int column;
};

std::string JoinPath(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) {
    return std::string(key);
  }
  std::string p;
  p.reserve(prefix.size() + 1 + key.size());
  p.append(prefix).append(".").append(key);
  return p;
}

Status Error(const Ctx& ctx, int line, int column, std::string_view path,
             std::string_view problem) {
  std::string m;
  if (line > 0) {
    m.append(ctx.file).append(":").append(std::to_string(line)).append(":");
    m.append(std::to_string(column)).append(": ");
  }
  if (!path.empty()) {
    m.append(path).append(": ");
  }
  m.append(problem);
  // One line, whatever the input: keys and values may hold control characters.
  std::string one_line;
  one_line.reserve(m.size());
  for (char c : m) {
    if (c == '\n') {
      one_line += "\\n";
    } else if (c == '\r') {
      one_line += "\\r";
    } else {
      one_line += c;
    }
  }
  return InvalidArgumentError(std::move(one_line));
}

Status Error(const Ctx& ctx, const Field& f, std::string_view problem) {
  return Error(ctx, f.line, f.column, f.path, problem);
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string Describe(const Node& n) {
  switch (n.type) {
    case Node::Type::kNull:
      return "null";
    case Node::Type::kMap:
      return "a mapping";
    case Node::Type::kSeq:
      return "a list";
    case Node::Type::kScalar:
      break;
  }
  switch (n.scalar) {
    case Node::Scalar::kBool:
      return "a boolean";
    case Node::Scalar::kInt:
    case Node::Scalar::kFloat:
      return "a number";
    case Node::Scalar::kString:
    case Node::Scalar::kPlain:
      break;
  }
  std::string text = n.text.size() > 40 ? n.text.substr(0, 40) + "…" : n.text;
  return Quote(text);
}

bool IsBoolWord(std::string_view s, bool* value) {
  if (s == "true" || s == "True" || s == "TRUE") {
    *value = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    *value = false;
    return true;
  }
  return false;
}

// Levenshtein distance of two short strings (field names), O(|a|·|b|).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Normalize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == '-') {
      continue;
    }
    out += static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  }
  return out;
}

// The closest candidate, when close enough to be a plausible typo ("" otherwise). Ties go to
// the candidate listed first.
std::string Suggest(std::string_view word, const std::vector<std::string_view>& candidates) {
  const std::string w = Normalize(word);
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (std::string_view c : candidates) {
    const size_t d = EditDistance(w, Normalize(c));
    if (d < best_distance) {
      best_distance = d;
      best = std::string(c);
    }
  }
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, (w.size() + 2) / 4));
  return best_distance <= limit ? best : "";
}

// Reads the fields of one mapping. Construction checks the node is a mapping (or null = all
// fields absent) and, for manifests, that every key is known.
class MapReader {
 public:
  MapReader(const Ctx& ctx, const Field& field) : ctx_(ctx), field_(field) {}

  [[nodiscard]] Status Open(const std::vector<std::string_view>& known) {
    const Node& n = *field_.node;
    if (n.is_null()) {
      return OkStatus();
    }
    if (n.type != Node::Type::kMap) {
      return Error(ctx_, field_, "expected a mapping, got " + Describe(n));
    }
    if (!ctx_.manifest) {
      return OkStatus();
    }
    for (const Entry& e : n.entries) {
      if (std::find(known.begin(), known.end(), e.key) != known.end()) {
        continue;
      }
      std::string problem = "unknown field " + Quote(e.key);
      if (std::string hint = Suggest(e.key, known); !hint.empty()) {
        problem += " (did you mean " + Quote(hint) + "?)";
      }
      return Error(ctx_, e.line, e.column, JoinPath(field_.path, e.key), problem);
    }
    return OkStatus();
  }

  // The field, if present and not null. Records its position for LocateError.
  std::optional<Field> Get(std::string_view key) const {
    for (const Entry& e : field_.node->entries) {
      if (e.key == key) {
        if (e.value.is_null()) {
          return std::nullopt;
        }
        Field f{&e.value, JoinPath(field_.path, key), e.line, e.column};
        if (ctx_.positions != nullptr && e.line > 0) {
          ctx_.positions->emplace(f.path, Manifest::Position{e.line, e.column});
        }
        return f;
      }
    }
    return std::nullopt;
  }

  const Field& field() const { return field_; }

 private:
  const Ctx& ctx_;
  Field field_;
};

Status ReadString(const Ctx& ctx, const Field& f, std::string* out) {
  const Node& n = *f.node;
  if (n.type != Node::Type::kScalar || n.scalar == Node::Scalar::kBool) {
    return Error(ctx, f, "expected a string, got " + Describe(n));
  }
  bool ignored = false;
  if (n.scalar == Node::Scalar::kPlain && IsBoolWord(n.text, &ignored)) {
    return Error(ctx, f, "expected a string, got a boolean (quote it: \"" + n.text + "\")");
  }
  *out =
      n.scalar == Node::Scalar::kFloat && n.text.empty() ? std::to_string(n.float_value) : n.text;
  return OkStatus();
}

Status ReadInt(const Ctx& ctx, const Field& f, int64_t* out) {
  const Node& n = *f.node;
  if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kInt) {
    *out = n.int_value;
    return OkStatus();
  }
  if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kPlain) {
    int64_t v = 0;
    const char* end = n.text.data() + n.text.size();
    auto [ptr, ec] = std::from_chars(n.text.data(), end, v);
    if (ec == std::errc() && ptr == end) {
      *out = v;
      return OkStatus();
    }
    if (ec == std::errc::result_out_of_range) {
      return Error(ctx, f, "integer " + n.text + " is out of range");
    }
  }
  return Error(ctx, f, "expected an integer, got " + Describe(n));
}

Status ReadInt32(const Ctx& ctx, const Field& f, int* out) {
  int64_t v = 0;
  RETURN_IF_ERROR(ReadInt(ctx, f, &v));
  if (v < INT32_MIN || v > INT32_MAX) {
    return Error(ctx, f, "integer " + std::to_string(v) + " is out of range");
  }
  *out = static_cast<int>(v);
  return OkStatus();
}

Status ReadDouble(const Ctx& ctx, const Field& f, double* out) {
  const Node& n = *f.node;
  if (n.type == Node::Type::kScalar) {
    if (n.scalar == Node::Scalar::kInt) {
      *out = static_cast<double>(n.int_value);
      return OkStatus();
    }
    if (n.scalar == Node::Scalar::kFloat) {
      *out = n.float_value;
      return OkStatus();
    }
    if (n.scalar == Node::Scalar::kPlain) {
      double v = 0;
      const char* end = n.text.data() + n.text.size();
      auto [ptr, ec] = std::from_chars(n.text.data(), end, v);
      if (ec == std::errc() && ptr == end) {
        *out = v;
        return OkStatus();
      }
    }
  }
  return Error(ctx, f, "expected a number, got " + Describe(n));
}

Status ReadBool(const Ctx& ctx, const Field& f, bool* out) {
  const Node& n = *f.node;
  if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kBool) {
    *out = n.bool_value;
    return OkStatus();
  }
  if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kPlain &&
      IsBoolWord(n.text, out)) {
    return OkStatus();
  }
  return Error(ctx, f, "expected true or false, got " + Describe(n));
}

Status ReadDuration(const Ctx& ctx, const Field& f, std::chrono::seconds* out) {
  std::string text;
  RETURN_IF_ERROR(ReadString(ctx, f, &text));
  StatusOr<std::chrono::seconds> d = ParseDuration(text);
  if (!d.ok()) {
    return Error(ctx, f, d.status().message());
  }
  *out = *d;
  return OkStatus();
}

Status ReadStringMap(const Ctx& ctx, const Field& f, std::map<std::string, std::string>* out) {
  const Node& n = *f.node;
  if (n.type != Node::Type::kMap) {
    return Error(ctx, f, "expected a mapping of strings, got " + Describe(n));
  }
  out->clear();
  for (const Entry& e : n.entries) {
    Field child{&e.value, JoinPath(f.path, e.key), e.line, e.column};
    std::string value;
    if (!e.value.is_null()) {
      RETURN_IF_ERROR(ReadString(ctx, child, &value));
    }
    (*out)[e.key] = std::move(value);
  }
  return OkStatus();
}

Status ReadStringList(const Ctx& ctx, const Field& f, std::vector<std::string>* out) {
  const Node& n = *f.node;
  if (n.type != Node::Type::kSeq) {
    return Error(ctx, f, "expected a list of strings, got " + Describe(n));
  }
  out->clear();
  out->reserve(n.items.size());
  for (size_t i = 0; i < n.items.size(); ++i) {
    const Node& item = n.items[i];
    Field child{&item, f.path + "[" + std::to_string(i) + "]", item.line ? item.line : f.line,
                item.line ? item.column : f.column};
    if (ctx.positions != nullptr && child.line > 0) {
      // So that a validation error about one item (spec.events[2]) points at its line.
      ctx.positions->emplace(child.path, Manifest::Position{child.line, child.column});
    }
    std::string value;
    RETURN_IF_ERROR(ReadString(ctx, child, &value));
    out->push_back(std::move(value));
  }
  return OkStatus();
}

// Calls fn(field) for every item of a list field.
template <typename Fn>
Status ForEachItem(const Ctx& ctx, const Field& f, Fn fn) {
  const Node& n = *f.node;
  if (n.type != Node::Type::kSeq) {
    return Error(ctx, f, "expected a list, got " + Describe(n));
  }
  for (size_t i = 0; i < n.items.size(); ++i) {
    const Node& item = n.items[i];
    Field child{&item, f.path + "[" + std::to_string(i) + "]", item.line ? item.line : f.line,
                item.line ? item.column : f.column};
    if (ctx.positions != nullptr && child.line > 0) {
      ctx.positions->emplace(child.path, Manifest::Position{child.line, child.column});
    }
    RETURN_IF_ERROR(fn(child));
  }
  return OkStatus();
}

Status ReadKindName(const Ctx& ctx, const Field& f, Kind* out) {
  std::string text;
  RETURN_IF_ERROR(ReadString(ctx, f, &text));
  std::vector<std::string_view> names;
  for (const KindInfo& info : Kinds()) {
    if (info.name == text) {
      *out = info.kind;
      return OkStatus();
    }
    names.push_back(info.name);
  }
  std::string problem = "unknown kind " + Quote(text) + " (expected one of: " + KindNameList();
  if (std::string hint = Suggest(text, names); !hint.empty()) {
    problem += "; did you mean " + Quote(hint) + "?";
  }
  problem += ")";
  return Error(ctx, f, problem);
}

// ---- Field tables -----------------------------------------------------------------------------
//
// A value codec V says how one C++ type maps to a tree node:
//   using Value = …;
//   static Status Read(const Ctx&, const Field&, Value*);  // the field is present and not null
//   static Node Write(const Value&);                         // a null Node: nothing to write
// A row of a table, made by Row<&Struct::member, V>("key", …), binds a key to a member and its
// codec. ReadFields / WriteFields walk a table; Struct<S> makes a table a value codec in turn,
// for nested mappings.

// Whether a field is written while its value encodes as empty ("", 0, false, {} or []).
enum class Presence { kOmitEmpty, kAlways };
// Who sets a field: the user (read from manifests) or the controller (accepted in manifests
// and ignored, read only from the store).
enum class Origin { kUser, kServer };

template <typename S>
struct FieldRow {
  std::string_view key;
  Status (*read)(const Ctx&, const Field&, S*);
  Node (*write)(const S&);
  Presence presence;
  Origin origin;
};

template <typename M>
struct MemberOf;
template <typename S, typename V>
struct MemberOf<V S::*> {
  using Struct = S;
  using Value = V;
};

template <auto kMember, typename Codec>
constexpr auto Row(std::string_view key, Presence presence = Presence::kOmitEmpty,
                   Origin origin = Origin::kUser) {
  using S = typename MemberOf<decltype(kMember)>::Struct;
  static_assert(std::is_same_v<typename MemberOf<decltype(kMember)>::Value, typename Codec::Value>,
                "the codec of a row must read and write the member's type");
  return FieldRow<S>{
      key,
      [](const Ctx& ctx, const Field& f, S* out) { return Codec::Read(ctx, f, &(out->*kMember)); },
      [](const S& s) { return Codec::Write(s.*kMember); },
      presence,
      origin,
  };
}

bool EncodesEmpty(const Node& n) {
  switch (n.type) {
    case Node::Type::kNull:
      return true;
    case Node::Type::kMap:
      return n.entries.empty();
    case Node::Type::kSeq:
      return n.items.empty();
    case Node::Type::kScalar:
      break;
  }
  switch (n.scalar) {
    case Node::Scalar::kInt:
      return n.int_value == 0;
    case Node::Scalar::kFloat:
      return n.float_value == 0;
    case Node::Scalar::kBool:
      return !n.bool_value;
    case Node::Scalar::kString:
    case Node::Scalar::kPlain:
      break;
  }
  return n.text.empty();
}

// `table` as one mapping node.
template <typename S, size_t N>
Node WriteFields(const FieldRow<S> (&table)[N], const S& s) {
  Node n = Node::Map();
  for (const FieldRow<S>& row : table) {
    Node value = row.write(s);
    if (value.is_null() || (row.presence == Presence::kOmitEmpty && EncodesEmpty(value))) {
      continue;
    }
    n.Add(std::string(row.key), std::move(value));
  }
  return n;
}

// Reads the mapping at `f` into `out`, field by field in table order; an absent or null field
// leaves its member unchanged. Manifests: a key outside the table is an error, and fields of
// Origin::kServer are not read. `shape` (when not empty) describes the mapping for the error on
// a value that is not one, e.g. "a mapping {name, run, timeout}".
template <typename S, size_t N>
Status ReadFields(const Ctx& ctx, const Field& f, std::string_view shape,
                  const FieldRow<S> (&table)[N], S* out) {
  if (!shape.empty() && f.node->type != Node::Type::kMap) {
    return Error(ctx, f, "expected " + std::string(shape) + ", got " + Describe(*f.node));
  }
  std::vector<std::string_view> known;
  known.reserve(N);
  for (const FieldRow<S>& row : table) {
    known.push_back(row.key);
  }
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open(known));
  for (const FieldRow<S>& row : table) {
    if (ctx.manifest && row.origin == Origin::kServer) {
      continue;  // Server-set fields in a manifest are accepted and ignored.
    }
    if (std::optional<Field> value = r.Get(row.key)) {
      RETURN_IF_ERROR(row.read(ctx, *value, out));
    }
  }
  return OkStatus();
}

// ---- Value codecs -----------------------------------------------------------------------------

struct Str {
  using Value = std::string;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) { return ReadString(ctx, f, out); }
  static Node Write(const Value& v) { return Node::String(v); }
};

// AgentTask spec.input: the user message is stored, logged and POSTed whole; a larger one is
// refused at decode (manifests/schema/agenttask.schema.json says the same, maxLength).
constexpr int64_t kMaxTaskInputBytes = int64_t{256} << 10;  // 256Ki

// A string of at most kMax bytes (a bound on what a manifest author can make the controller
// store and send).
template <int64_t kMax>
struct BoundedStr {
  using Value = std::string;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    RETURN_IF_ERROR(ReadString(ctx, f, out));
    if (static_cast<int64_t>(out->size()) > kMax) {
      return Error(ctx, f,
                   "is " + std::to_string(out->size()) + " bytes, more than the limit of " +
                       std::to_string(kMax / 1024) + " KiB");
    }
    return OkStatus();
  }
  static Node Write(const Value& v) { return Node::String(v); }
};

struct Int {
  using Value = int64_t;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) { return ReadInt(ctx, f, out); }
  static Node Write(Value v) { return Node::Int(v); }
};

struct Int32 {
  using Value = int;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) { return ReadInt32(ctx, f, out); }
  static Node Write(Value v) { return Node::Int(v); }
};

struct Float {
  using Value = double;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) { return ReadDouble(ctx, f, out); }
  static Node Write(Value v) { return Node::Float(v); }
};

// A price, cost or budget (api/usage.h): a non-negative decimal with at most 6 places, as a
// string ("1.25") or a number (2, 1.25); kept in micro-units, written as the shortest string.
struct Decimal {
  using Value = Micros;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    const Node& n = *f.node;
    std::string text;
    if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kInt) {
      text = std::to_string(n.int_value);
    } else {
      RETURN_IF_ERROR(ReadString(ctx, f, &text));
    }
    StatusOr<Micros> parsed = ParseDecimal(text);
    if (!parsed.ok()) {
      return Error(ctx, f, parsed.status().message());
    }
    *out = *parsed;
    return OkStatus();
  }
  static Node Write(Value v) { return Node::String(FormatDecimal(v)); }
};

// A duration in seconds with millisecond precision (computeSeconds, runningSeconds): kept in
// milliseconds, written as a number of seconds (0.3), read from a number or a decimal string.
struct Seconds3 {
  using Value = int64_t;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    double seconds = 0;
    RETURN_IF_ERROR(ReadDouble(ctx, f, &seconds));
    if (!(seconds >= 0) || seconds > 1e12) {
      return Error(ctx, f, "must be a number of seconds, at least 0");
    }
    *out = std::llround(seconds * 1000);
    return OkStatus();
  }
  static Node Write(Value v) { return Node::Float(static_cast<double>(v) / 1000); }
};

struct Bool {
  using Value = bool;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) { return ReadBool(ctx, f, out); }
  static Node Write(Value v) { return Node::Bool(v); }
};

struct Duration {
  using Value = std::chrono::seconds;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    return ReadDuration(ctx, f, out);
  }
  static Node Write(Value v) { return Node::String(FormatDuration(v)); }
};

// A byte count: an integer, or a string with a binary suffix ("512Ki", "1Mi", "16Mi", "1Gi").
// Written as the integer.
struct Bytes {
  using Value = int64_t;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    const Node& n = *f.node;
    if (n.type == Node::Type::kScalar && n.scalar == Node::Scalar::kInt) {
      *out = n.int_value;
      return OkStatus();
    }
    std::string text;
    RETURN_IF_ERROR(ReadString(ctx, f, &text));
    static constexpr std::pair<std::string_view, int64_t> kSuffixes[] = {
        {"Ki", int64_t{1} << 10}, {"Mi", int64_t{1} << 20}, {"Gi", int64_t{1} << 30}, {"", 1}};
    for (const auto& [suffix, unit] : kSuffixes) {
      if (text.size() <= suffix.size() ||
          text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      const std::string_view digits(text.data(), text.size() - suffix.size());
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec == std::errc() && ptr == digits.data() + digits.size() && v >= 0 &&
          v <= INT64_MAX / unit) {
        *out = v * unit;
        return OkStatus();
      }
      break;
    }
    return Error(ctx, f,
                 "expected a byte count like 1048576, \"512Ki\" or \"1Mi\", got " + Describe(n));
  }
  static Node Write(Value v) { return Node::Int(v); }
};

struct StrMap {
  using Value = std::map<std::string, std::string>;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    return ReadStringMap(ctx, f, out);
  }
  static Node Write(const Value& m) {
    Node n = Node::Map();
    for (const auto& [k, v] : m) {
      n.Add(k, Node::String(v));
    }
    return n;
  }
};

struct StrList {
  using Value = std::vector<std::string>;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    return ReadStringList(ctx, f, out);
  }
  static Node Write(const Value& v) {
    Node n = Node::Seq();
    for (const auto& s : v) {
      n.items.push_back(Node::String(s));
    }
    return n;
  }
};

struct KindCodec {
  using Value = Kind;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    return ReadKindName(ctx, f, out);
  }
  static Node Write(Value v) { return Node::String(std::string(KindName(v))); }
};

// An enum written by name. EnumNames<E>::kNames lists every value; its order is the order of
// the "(expected A|B)" hint.
template <typename E>
struct EnumNames;
template <>
struct EnumNames<Power> {
  static constexpr std::pair<std::string_view, Power> kNames[] = {
      {"Running", Power::kRunning}, {"Stopped", Power::kStopped}, {"OnDemand", Power::kOnDemand}};
};
template <>
struct EnumNames<DeletionPolicy> {
  static constexpr std::pair<std::string_view, DeletionPolicy> kNames[] = {
      {"Delete", DeletionPolicy::kDelete}, {"Orphan", DeletionPolicy::kOrphan}};
};
template <>
struct EnumNames<RestartPolicy> {
  static constexpr std::pair<std::string_view, RestartPolicy> kNames[] = {
      {"Always", RestartPolicy::kAlways}, {"Never", RestartPolicy::kNever}};
};
template <>
struct EnumNames<SessionMode> {
  static constexpr std::pair<std::string_view, SessionMode> kNames[] = {
      {"Shared", SessionMode::kShared}, {"PerTask", SessionMode::kPerTask}};
};
template <>
struct EnumNames<RetryOn> {
  static constexpr std::pair<std::string_view, RetryOn> kNames[] = {
      {"InfrastructureFailure", RetryOn::kInfrastructureFailure},
      {"Failed", RetryOn::kFailed},
      {"TimedOut", RetryOn::kTimedOut}};
};
template <>
struct EnumNames<TaskPhase> {
  static constexpr std::pair<std::string_view, TaskPhase> kNames[] = {
      {"Pending", TaskPhase::kPending},     {"Queued", TaskPhase::kQueued},
      {"Submitted", TaskPhase::kSubmitted}, {"Running", TaskPhase::kRunning},
      {"Succeeded", TaskPhase::kSucceeded}, {"Failed", TaskPhase::kFailed},
      {"Cancelled", TaskPhase::kCancelled}, {"TimedOut", TaskPhase::kTimedOut}};
};
template <>
struct EnumNames<BudgetPeriod> {
  static constexpr std::pair<std::string_view, BudgetPeriod> kNames[] = {
      {"Day", BudgetPeriod::kDay}, {"Month", BudgetPeriod::kMonth}};
};
template <>
struct EnumNames<NotifierType> {
  static constexpr std::pair<std::string_view, NotifierType> kNames[] = {
      {"webhook", NotifierType::kWebhook}, {"slack", NotifierType::kSlack}};
};
template <>
struct EnumNames<ConditionStatus> {
  static constexpr std::pair<std::string_view, ConditionStatus> kNames[] = {
      {"True", ConditionStatus::kTrue},
      {"False", ConditionStatus::kFalse},
      {"Unknown", ConditionStatus::kUnknown}};
};

template <typename E>
struct Enum {
  using Value = E;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    std::string text;
    RETURN_IF_ERROR(ReadString(ctx, f, &text));
    std::string expected;
    for (const auto& [name, value] : EnumNames<E>::kNames) {
      if (name == text) {
        *out = value;
        return OkStatus();
      }
      if (!expected.empty()) {
        expected += "|";
      }
      expected += name;
    }
    return Error(ctx, f, "unsupported value " + Quote(text) + " (expected " + expected + ")");
  }
  static Node Write(Value v) {
    for (const auto& [name, value] : EnumNames<E>::kNames) {
      if (value == v) {
        return Node::String(std::string(name));
      }
    }
    return Node::String("");
  }
};

// A nested mapping, described by FieldsOf<S>: its table (kRows) and its shape (kShape, "" for
// the plain "expected a mapping" error, which PlainMapping gives).
template <typename S>
struct FieldsOf;
struct PlainMapping {
  static constexpr std::string_view kShape = "";
};

template <typename S>
struct Struct {
  using Value = S;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    return ReadFields(ctx, f, FieldsOf<S>::kShape, FieldsOf<S>::kRows, out);
  }
  static Node Write(const Value& v) { return WriteFields(FieldsOf<S>::kRows, v); }
};

// A list of mappings; reading replaces the whole list.
template <typename S>
struct ListOf {
  using Value = std::vector<S>;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    out->clear();
    return ForEachItem(ctx, f, [&](const Field& item) -> Status {
      S value;
      RETURN_IF_ERROR(Struct<S>::Read(ctx, item, &value));
      out->push_back(std::move(value));
      return OkStatus();
    });
  }
  static Node Write(const Value& v) {
    Node n = Node::Seq();
    for (const S& item : v) {
      n.items.push_back(Struct<S>::Write(item));
    }
    return n;
  }
};

// A list of enum names; reading replaces the whole list.
template <typename E>
struct EnumList {
  using Value = std::vector<E>;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    out->clear();
    return ForEachItem(ctx, f, [&](const Field& item) -> Status {
      E value{};
      RETURN_IF_ERROR(Enum<E>::Read(ctx, item, &value));
      out->push_back(value);
      return OkStatus();
    });
  }
  static Node Write(const Value& v) {
    Node n = Node::Seq();
    for (E item : v) {
      n.items.push_back(Enum<E>::Write(item));
    }
    return n;
  }
};

// An optional value: absent while unset, written whole (even if empty) when set.
template <typename Codec>
struct Optional {
  using Value = std::optional<typename Codec::Value>;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    typename Codec::Value value{};
    RETURN_IF_ERROR(Codec::Read(ctx, f, &value));
    *out = std::move(value);
    return OkStatus();
  }
  static Node Write(const Value& v) { return v.has_value() ? Codec::Write(*v) : Node(); }
};

// ---- The tables -------------------------------------------------------------------------------
// Row order is the order fields are read and checked in, and the order "did you mean" prefers
// on a tie. Encoding order does not matter: keys are emitted sorted.

constexpr Presence kAlways = Presence::kAlways;
constexpr Presence kOmitEmpty = Presence::kOmitEmpty;
constexpr Origin kServer = Origin::kServer;

template <>
struct FieldsOf<SecretRef> {
  static constexpr std::string_view kShape = "a mapping like {env: NAME} or {file: /path}";
  static constexpr FieldRow<SecretRef> kRows[] = {
      Row<&SecretRef::env, Str>("env"),
      Row<&SecretRef::file, Str>("file"),
  };
};

template <>
struct FieldsOf<OwnerReference> : PlainMapping {
  static constexpr FieldRow<OwnerReference> kRows[] = {
      Row<&OwnerReference::kind, KindCodec>("kind", kAlways),
      Row<&OwnerReference::name, Str>("name", kAlways),
      Row<&OwnerReference::uid, Str>("uid"),
      Row<&OwnerReference::controller, Bool>("controller", kAlways),
  };
};

template <>
struct FieldsOf<ObjectMeta> : PlainMapping {
  static constexpr FieldRow<ObjectMeta> kRows[] = {
      Row<&ObjectMeta::name, Str>("name", kAlways),
      Row<&ObjectMeta::namespace_, Str>("namespace", kAlways),
      Row<&ObjectMeta::labels, StrMap>("labels"),
      Row<&ObjectMeta::annotations, StrMap>("annotations"),
      Row<&ObjectMeta::uid, Str>("uid", kOmitEmpty, kServer),
      Row<&ObjectMeta::generation, Int>("generation", kOmitEmpty, kServer),
      Row<&ObjectMeta::resource_version, Int>("resourceVersion", kOmitEmpty, kServer),
      Row<&ObjectMeta::creation_timestamp, Str>("creationTimestamp", kOmitEmpty, kServer),
      Row<&ObjectMeta::deletion_timestamp, Str>("deletionTimestamp", kOmitEmpty, kServer),
      Row<&ObjectMeta::finalizers, StrList>("finalizers", kOmitEmpty, kServer),
      Row<&ObjectMeta::owner_references, ListOf<OwnerReference>>("ownerReferences", kOmitEmpty,
                                                                 kServer),
  };
};

// -- Workspace

template <>
struct FieldsOf<DatabricksConnection> : PlainMapping {
  static constexpr FieldRow<DatabricksConnection> kRows[] = {
      Row<&DatabricksConnection::host, Str>("host"),
      Row<&DatabricksConnection::profile, Str>("profile"),
      Row<&DatabricksConnection::workspace_id, Str>("workspaceId"),
      Row<&DatabricksConnection::token_from, Struct<SecretRef>>("tokenFrom"),
      Row<&DatabricksConnection::client_id_from, Struct<SecretRef>>("clientIdFrom"),
      Row<&DatabricksConnection::client_secret_from, Struct<SecretRef>>("clientSecretFrom"),
  };
};

template <>
struct FieldsOf<OpenAiConnection> : PlainMapping {
  static constexpr FieldRow<OpenAiConnection> kRows[] = {
      Row<&OpenAiConnection::base_url, Str>("baseUrl"),
      Row<&OpenAiConnection::api_key_from, Struct<SecretRef>>("apiKeyFrom"),
  };
};

template <>
struct FieldsOf<WorkspaceLimits> : PlainMapping {
  static constexpr FieldRow<WorkspaceLimits> kRows[] = {
      Row<&WorkspaceLimits::requests_per_second, Float>("requestsPerSecond"),
      Row<&WorkspaceLimits::max_sandboxes, Int32>("maxSandboxes"),
      Row<&WorkspaceLimits::max_concurrent_tasks, Int32>("maxConcurrentTasks"),
  };
};

template <>
struct FieldsOf<WorkspacePricing> : PlainMapping {
  static constexpr FieldRow<WorkspacePricing> kRows[] = {
      Row<&WorkspacePricing::compute_per_hour, Optional<Decimal>>("computePerHour"),
      Row<&WorkspacePricing::input_tokens_per_million, Optional<Decimal>>("inputTokensPerMillion"),
      Row<&WorkspacePricing::cached_input_tokens_per_million, Optional<Decimal>>(
          "cachedInputTokensPerMillion"),
      Row<&WorkspacePricing::output_tokens_per_million, Optional<Decimal>>(
          "outputTokensPerMillion"),
  };
};

template <>
struct FieldsOf<WorkspaceBudget> : PlainMapping {
  static constexpr FieldRow<WorkspaceBudget> kRows[] = {
      Row<&WorkspaceBudget::period, Enum<BudgetPeriod>>("period", kAlways),
      Row<&WorkspaceBudget::tokens, Optional<Int>>("tokens"),
      Row<&WorkspaceBudget::compute_hours, Optional<Decimal>>("computeHours"),
      Row<&WorkspaceBudget::cost, Optional<Decimal>>("cost"),
  };
};

template <>
struct FieldsOf<WorkspaceSpec> : PlainMapping {
  static constexpr FieldRow<WorkspaceSpec> kRows[] = {
      Row<&WorkspaceSpec::databricks, Struct<DatabricksConnection>>("databricks"),
      Row<&WorkspaceSpec::openai, Struct<OpenAiConnection>>("openai"),
      Row<&WorkspaceSpec::limits, Struct<WorkspaceLimits>>("limits"),
      Row<&WorkspaceSpec::pricing, Optional<Struct<WorkspacePricing>>>("pricing"),
      Row<&WorkspaceSpec::budget, Optional<Struct<WorkspaceBudget>>>("budget"),
  };
};

template <>
struct FieldsOf<Condition> : PlainMapping {
  static constexpr FieldRow<Condition> kRows[] = {
      Row<&Condition::type, Str>("type", kAlways),
      Row<&Condition::status, Enum<ConditionStatus>>("status", kAlways),
      Row<&Condition::reason, Str>("reason"),
      Row<&Condition::message, Str>("message"),
      Row<&Condition::last_transition_time, Str>("lastTransitionTime"),
      Row<&Condition::observed_generation, Int>("observedGeneration"),
  };
};

template <>
struct FieldsOf<WorkspaceUsage> : PlainMapping {
  static constexpr FieldRow<WorkspaceUsage> kRows[] = {
      Row<&WorkspaceUsage::period, Str>("period"),
      Row<&WorkspaceUsage::input_tokens, Int>("inputTokens"),
      Row<&WorkspaceUsage::cached_input_tokens, Int>("cachedInputTokens"),
      Row<&WorkspaceUsage::output_tokens, Int>("outputTokens"),
      Row<&WorkspaceUsage::reasoning_tokens, Int>("reasoningTokens"),
      Row<&WorkspaceUsage::compute_millis, Seconds3>("computeSeconds"),
      Row<&WorkspaceUsage::tasks, Int>("tasks"),
      Row<&WorkspaceUsage::cost, Str>("cost"),
  };
};

template <>
struct FieldsOf<WorkspaceStatus> : PlainMapping {
  static constexpr FieldRow<WorkspaceStatus> kRows[] = {
      Row<&WorkspaceStatus::observed_generation, Int>("observedGeneration"),
      Row<&WorkspaceStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&WorkspaceStatus::usage, Struct<WorkspaceUsage>>("usage"),
  };
};

// -- Sandbox

template <>
struct FieldsOf<SetupStep> {
  static constexpr std::string_view kShape = "a mapping {name, run, timeout}";
  static constexpr FieldRow<SetupStep> kRows[] = {
      Row<&SetupStep::name, Str>("name", kAlways),
      Row<&SetupStep::run, Str>("run", kAlways),
      Row<&SetupStep::timeout, Duration>("timeout", kAlways),
  };
};

template <>
struct FieldsOf<SandboxSpec> : PlainMapping {
  static constexpr FieldRow<SandboxSpec> kRows[] = {
      Row<&SandboxSpec::workspace_ref, Str>("workspaceRef", kAlways),
      Row<&SandboxSpec::sandbox_id, Str>("sandboxId"),
      Row<&SandboxSpec::display_name, Str>("displayName"),
      Row<&SandboxSpec::inactivity_timeout, Optional<Duration>>("inactivityTimeout", kAlways),
      Row<&SandboxSpec::image, Str>("image"),
      Row<&SandboxSpec::power, Enum<Power>>("power", kAlways),
      Row<&SandboxSpec::idle_stop, Optional<Duration>>("idleStop"),
      Row<&SandboxSpec::setup, ListOf<SetupStep>>("setup"),
      Row<&SandboxSpec::deletion_policy, Enum<DeletionPolicy>>("deletionPolicy", kAlways),
  };
};

template <>
struct FieldsOf<SetupResult> : PlainMapping {
  static constexpr FieldRow<SetupResult> kRows[] = {
      Row<&SetupResult::name, Str>("name", kAlways),
      Row<&SetupResult::boot_id, Str>("bootId"),
      Row<&SetupResult::exit_code, Int32>("exitCode", kAlways),
      Row<&SetupResult::succeeded, Bool>("succeeded", kAlways),
      Row<&SetupResult::message, Str>("message"),
      Row<&SetupResult::finished_at, Str>("finishedAt"),
  };
};

template <>
struct FieldsOf<SandboxUsage> : PlainMapping {
  static constexpr FieldRow<SandboxUsage> kRows[] = {
      Row<&SandboxUsage::running_millis, Seconds3>("runningSeconds"),
      Row<&SandboxUsage::running_since, Str>("runningSince"),
  };
};

template <>
struct FieldsOf<SandboxStatus> : PlainMapping {
  static constexpr FieldRow<SandboxStatus> kRows[] = {
      Row<&SandboxStatus::observed_generation, Int>("observedGeneration"),
      Row<&SandboxStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&SandboxStatus::sandbox_name, Str>("sandboxName"),
      Row<&SandboxStatus::workspace_ref, Str>("workspaceRef"),
      Row<&SandboxStatus::state, Str>("state"),
      Row<&SandboxStatus::create_time, Str>("createTime"),
      Row<&SandboxStatus::boot_id, Str>("bootId"),
      Row<&SandboxStatus::setup, ListOf<SetupResult>>("setup"),
      Row<&SandboxStatus::provisioning_failures, Int32>("provisioningFailures"),
      Row<&SandboxStatus::next_start_after, Str>("nextStartAfter"),
      Row<&SandboxStatus::idle_since, Str>("idleSince"),
      Row<&SandboxStatus::usage, Struct<SandboxUsage>>("usage"),
  };
};

// -- AgentWorker

template <>
struct FieldsOf<AgentSpec> : PlainMapping {
  static constexpr FieldRow<AgentSpec> kRows[] = {
      Row<&AgentSpec::model, Str>("model"),
      Row<&AgentSpec::instructions, Str>("instructions"),
  };
};

template <>
struct FieldsOf<EnvVar> {
  static constexpr std::string_view kShape = "a mapping {name, value} or {name, valueFrom}";
  static constexpr FieldRow<EnvVar> kRows[] = {
      Row<&EnvVar::name, Str>("name", kAlways),
      Row<&EnvVar::value, Str>("value"),
      Row<&EnvVar::value_from, Struct<SecretRef>>("valueFrom"),
  };
};

template <>
struct FieldsOf<ExecutorSpec> : PlainMapping {
  static constexpr FieldRow<ExecutorSpec> kRows[] = {
      Row<&ExecutorSpec::command, Str>("command", kAlways),
      Row<&ExecutorSpec::args, StrList>("args"),
      Row<&ExecutorSpec::env, ListOf<EnvVar>>("env"),
      Row<&ExecutorSpec::api_key_from, Struct<SecretRef>>("apiKeyFrom"),
  };
};

template <>
struct FieldsOf<AgentWorkerSpec> : PlainMapping {
  static constexpr FieldRow<AgentWorkerSpec> kRows[] = {
      Row<&AgentWorkerSpec::sandbox_ref, Str>("sandboxRef"),
      Row<&AgentWorkerSpec::sandbox, Optional<Struct<SandboxSpec>>>("sandbox", kAlways),
      Row<&AgentWorkerSpec::agent, Struct<AgentSpec>>("agent"),
      Row<&AgentWorkerSpec::workspace_directory, Str>("workspaceDirectory", kAlways),
      Row<&AgentWorkerSpec::executor, Struct<ExecutorSpec>>("executor", kAlways),
      Row<&AgentWorkerSpec::restart_policy, Enum<RestartPolicy>>("restartPolicy", kAlways),
      Row<&AgentWorkerSpec::session, Enum<SessionMode>>("session", kAlways),
  };
};

template <>
struct FieldsOf<ExecutorStatus> : PlainMapping {
  static constexpr FieldRow<ExecutorStatus> kRows[] = {
      Row<&ExecutorStatus::pid, Int>("pid"),
      Row<&ExecutorStatus::launched_at, Str>("launchedAt"),
      Row<&ExecutorStatus::restarts, Int32>("restarts"),
      Row<&ExecutorStatus::last_exit_reason, Str>("lastExitReason"),
      Row<&ExecutorStatus::spec_hash, Str>("specHash"),
      Row<&ExecutorStatus::last_probe_at, Str>("lastProbeAt"),
      Row<&ExecutorStatus::probed_boot_id, Str>("probedBootId"),
      Row<&ExecutorStatus::next_launch_after, Str>("nextLaunchAfter"),
  };
};

template <>
struct FieldsOf<AgentWorkerStatus> : PlainMapping {
  static constexpr FieldRow<AgentWorkerStatus> kRows[] = {
      Row<&AgentWorkerStatus::observed_generation, Int>("observedGeneration"),
      Row<&AgentWorkerStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&AgentWorkerStatus::session_id, Str>("sessionId"),
      Row<&AgentWorkerStatus::environment_id, Str>("environmentId"),
      Row<&AgentWorkerStatus::remote_url, Str>("remoteUrl"),
      Row<&AgentWorkerStatus::agent_hash, Str>("agentHash"),
      Row<&AgentWorkerStatus::workspace_directory, Str>("workspaceDirectory"),
      Row<&AgentWorkerStatus::executor, Struct<ExecutorStatus>>("executor"),
      Row<&AgentWorkerStatus::environment_status, Str>("environmentStatus"),
      Row<&AgentWorkerStatus::connected_environment_id, Str>("connectedEnvironmentId"),
      Row<&AgentWorkerStatus::wake_requested_at, Str>("wakeRequestedAt"),
  };
};

// -- AgentTask

template <>
struct FieldsOf<WorkerSelector> {
  static constexpr std::string_view kShape = "a mapping {matchLabels: {key: value}}";
  static constexpr FieldRow<WorkerSelector> kRows[] = {
      Row<&WorkerSelector::match_labels, StrMap>("matchLabels"),
  };
};

template <>
struct FieldsOf<CollectSpec> {
  static constexpr std::string_view kShape = "a mapping {path, maxBytes}";
  static constexpr FieldRow<CollectSpec> kRows[] = {
      Row<&CollectSpec::path, Str>("path", kAlways),
      Row<&CollectSpec::max_bytes, Bytes>("maxBytes", kAlways),
  };
};

template <>
struct FieldsOf<AgentTaskSpec> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<AgentTaskSpec> kRows[] = {
      Row<&AgentTaskSpec::worker_ref, Str>("workerRef"),
      Row<&AgentTaskSpec::worker_selector, Optional<Struct<WorkerSelector>>>("workerSelector",
                                                                             kAlways),
      Row<&AgentTaskSpec::pool_ref, Str>("poolRef"),
      Row<&AgentTaskSpec::input, BoundedStr<kMaxTaskInputBytes>>("input"),
      Row<&AgentTaskSpec::timeout, Duration>("timeout", kAlways),
      Row<&AgentTaskSpec::collect, ListOf<CollectSpec>>("collect"),
      Row<&AgentTaskSpec::ttl_after_finished, Optional<Duration>>("ttlAfterFinished", kAlways),
      Row<&AgentTaskSpec::backoff_limit, Int32>("backoffLimit"),
      Row<&AgentTaskSpec::retry_on, Optional<EnumList<RetryOn>>>("retryOn", kAlways),
      Row<&AgentTaskSpec::keep_workspace, Bool>("keepWorkspace"),
  };
};

template <>
struct FieldsOf<TaskError> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<TaskError> kRows[] = {
      Row<&TaskError::code, Str>("code"),
      Row<&TaskError::message, Str>("message"),
  };
};

template <>
struct FieldsOf<TaskUsage> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<TaskUsage> kRows[] = {
      Row<&TaskUsage::input_tokens, Int>("inputTokens"),
      Row<&TaskUsage::output_tokens, Int>("outputTokens"),
      Row<&TaskUsage::total_tokens, Int>("totalTokens"),
  };
};

template <>
struct FieldsOf<TaskUsageTotals> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<TaskUsageTotals> kRows[] = {
      Row<&TaskUsageTotals::input_tokens, Int>("inputTokens"),
      Row<&TaskUsageTotals::cached_input_tokens, Int>("cachedInputTokens"),
      Row<&TaskUsageTotals::output_tokens, Int>("outputTokens"),
      Row<&TaskUsageTotals::reasoning_tokens, Int>("reasoningTokens"),
      Row<&TaskUsageTotals::compute_millis, Seconds3>("computeSeconds"),
      Row<&TaskUsageTotals::attempt_start_running_millis, Optional<Seconds3>>(
          "attemptStartRunningSeconds", kAlways),
      Row<&TaskUsageTotals::cost, Str>("cost"),
  };
};

template <>
struct FieldsOf<TaskResult> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<TaskResult> kRows[] = {
      Row<&TaskResult::message, Str>("message"),
      Row<&TaskResult::error, Struct<TaskError>>("error"),
      Row<&TaskResult::usage, Struct<TaskUsage>>("usage"),
  };
};

template <>
struct FieldsOf<TaskAttempt> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<TaskAttempt> kRows[] = {
      Row<&TaskAttempt::attempt, Int32>("attempt", kAlways),
      Row<&TaskAttempt::worker, Str>("worker"),
      Row<&TaskAttempt::turn_id, Str>("turnId"),
      Row<&TaskAttempt::phase, Enum<TaskPhase>>("phase", kAlways),
      Row<&TaskAttempt::error, Struct<TaskError>>("error"),
      Row<&TaskAttempt::started_at, Str>("startedAt"),
      Row<&TaskAttempt::completed_at, Str>("completedAt"),
  };
};

template <>
struct FieldsOf<ArtifactStatus> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<ArtifactStatus> kRows[] = {
      Row<&ArtifactStatus::path, Str>("path", kAlways),
      Row<&ArtifactStatus::bytes, Int>("bytes"),
      Row<&ArtifactStatus::sha256, Str>("sha256"),
      Row<&ArtifactStatus::error, Str>("error"),
  };
};

template <>
struct FieldsOf<AgentTaskStatus> {
  static constexpr std::string_view kShape = "";
  static constexpr FieldRow<AgentTaskStatus> kRows[] = {
      Row<&AgentTaskStatus::observed_generation, Int>("observedGeneration"),
      Row<&AgentTaskStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&AgentTaskStatus::phase, Enum<TaskPhase>>("phase", kAlways),
      Row<&AgentTaskStatus::worker, Str>("worker"),
      Row<&AgentTaskStatus::session_id, Str>("sessionId"),
      Row<&AgentTaskStatus::turn_id, Str>("turnId"),
      Row<&AgentTaskStatus::queue_position, Int32>("queuePosition"),
      Row<&AgentTaskStatus::idempotency_key, Str>("idempotencyKey"),
      Row<&AgentTaskStatus::previous_turn_id, Str>("previousTurnId"),
      Row<&AgentTaskStatus::submitted_at, Str>("submittedAt"),
      Row<&AgentTaskStatus::started_at, Str>("startedAt"),
      Row<&AgentTaskStatus::completed_at, Str>("completedAt"),
      Row<&AgentTaskStatus::cancel_requested_at, Str>("cancelRequestedAt"),
      Row<&AgentTaskStatus::cancel_reason, Str>("cancelReason"),
      Row<&AgentTaskStatus::result, Struct<TaskResult>>("result"),
      Row<&AgentTaskStatus::commands, Int32>("commands"),
      Row<&AgentTaskStatus::artifacts, ListOf<ArtifactStatus>>("artifacts"),
      Row<&AgentTaskStatus::attempts, ListOf<TaskAttempt>>("attempts"),
      Row<&AgentTaskStatus::next_attempt_at, Str>("nextAttemptAt"),
      Row<&AgentTaskStatus::usage, Struct<TaskUsageTotals>>("usage"),
  };
};

// -- GitSource

template <>
struct FieldsOf<GitRef> {
  static constexpr std::string_view kShape = "a mapping {branch}, {tag} or {commit}";
  static constexpr FieldRow<GitRef> kRows[] = {
      Row<&GitRef::branch, Str>("branch"),
      Row<&GitRef::tag, Str>("tag"),
      Row<&GitRef::commit, Str>("commit"),
  };
};

template <>
struct FieldsOf<GitPrune> {
  static constexpr std::string_view kShape = "true, false or a mapping {enabled, allowEmpty}";
  static constexpr FieldRow<GitPrune> kRows[] = {
      Row<&GitPrune::enabled, Bool>("enabled"),
      Row<&GitPrune::allow_empty, Bool>("allowEmpty"),
  };
};

// spec.prune: a boolean (shorthand for {enabled: B}) or the mapping. Written as the boolean
// unless allowEmpty is set, so that the common case reads as it was written.
struct GitPruneCodec {
  using Value = GitPrune;
  static Status Read(const Ctx& ctx, const Field& f, Value* out) {
    if (f.node->type == Node::Type::kScalar) {
      *out = GitPrune{};
      return ReadBool(ctx, f, &out->enabled);
    }
    return Struct<GitPrune>::Read(ctx, f, out);
  }
  static Node Write(const Value& v) {
    if (!v.allow_empty) {
      return Node::Bool(v.enabled);
    }
    return Struct<GitPrune>::Write(v);
  }
};

template <>
struct FieldsOf<GitCredentials> {
  static constexpr std::string_view kShape = "a mapping {sshKeyFrom} or {tokenFrom}";
  static constexpr FieldRow<GitCredentials> kRows[] = {
      Row<&GitCredentials::ssh_key_from, Struct<SecretRef>>("sshKeyFrom"),
      Row<&GitCredentials::token_from, Struct<SecretRef>>("tokenFrom"),
  };
};

template <>
struct FieldsOf<GitSourceSpec> : PlainMapping {
  static constexpr FieldRow<GitSourceSpec> kRows[] = {
      Row<&GitSourceSpec::url, Str>("url"),
      Row<&GitSourceSpec::ref, Struct<GitRef>>("ref"),
      Row<&GitSourceSpec::path, Str>("path", kAlways),
      Row<&GitSourceSpec::interval, Duration>("interval", kAlways),
      Row<&GitSourceSpec::prune, GitPruneCodec>("prune"),
      Row<&GitSourceSpec::applyset, Str>("applyset"),
      Row<&GitSourceSpec::credentials, Struct<GitCredentials>>("credentials"),
  };
};

template <>
struct FieldsOf<GitSourceStatus> : PlainMapping {
  static constexpr FieldRow<GitSourceStatus> kRows[] = {
      Row<&GitSourceStatus::observed_generation, Int>("observedGeneration"),
      Row<&GitSourceStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&GitSourceStatus::revision, Str>("revision"),
      Row<&GitSourceStatus::last_applied_at, Str>("lastAppliedAt"),
      Row<&GitSourceStatus::objects, Int32>("objects"),
      Row<&GitSourceStatus::last_attempted_revision, Str>("lastAttemptedRevision"),
      Row<&GitSourceStatus::last_attempt_at, Str>("lastAttemptAt"),
  };
};

// -- AgentPool

template <>
struct FieldsOf<PoolTemplateMeta> : PlainMapping {
  static constexpr FieldRow<PoolTemplateMeta> kRows[] = {
      Row<&PoolTemplateMeta::labels, StrMap>("labels"),
  };
};

template <>
struct FieldsOf<AgentPoolTemplate> : PlainMapping {
  static constexpr FieldRow<AgentPoolTemplate> kRows[] = {
      Row<&AgentPoolTemplate::metadata, Struct<PoolTemplateMeta>>("metadata"),
      Row<&AgentPoolTemplate::spec, Struct<AgentWorkerSpec>>("spec", kAlways),
  };
};

template <>
struct FieldsOf<PoolReplicas> : PlainMapping {
  static constexpr FieldRow<PoolReplicas> kRows[] = {
      Row<&PoolReplicas::min, Int32>("min", kAlways),
      Row<&PoolReplicas::max, Int32>("max", kAlways),
  };
};

template <>
struct FieldsOf<AgentPoolSpec> : PlainMapping {
  static constexpr FieldRow<AgentPoolSpec> kRows[] = {
      Row<&AgentPoolSpec::template_, Struct<AgentPoolTemplate>>("template", kAlways),
      Row<&AgentPoolSpec::replicas, Struct<PoolReplicas>>("replicas", kAlways),
      Row<&AgentPoolSpec::warm, Int32>("warm"),
      Row<&AgentPoolSpec::scale_down_after, Duration>("scaleDownAfter", kAlways),
      Row<&AgentPoolSpec::session, Enum<SessionMode>>("session", kAlways),
      Row<&AgentPoolSpec::progress_deadline, Duration>("progressDeadline", kAlways),
  };
};

template <>
struct FieldsOf<AgentPoolStatus> : PlainMapping {
  static constexpr FieldRow<AgentPoolStatus> kRows[] = {
      Row<&AgentPoolStatus::observed_generation, Int>("observedGeneration"),
      Row<&AgentPoolStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&AgentPoolStatus::replicas, Int32>("replicas"),
      Row<&AgentPoolStatus::ready, Int32>("ready"),
      Row<&AgentPoolStatus::busy, Int32>("busy"),
      Row<&AgentPoolStatus::idle, Int32>("idle"),
      Row<&AgentPoolStatus::sleeping, Int32>("sleeping"),
      Row<&AgentPoolStatus::queued, Int32>("queued"),
      Row<&AgentPoolStatus::updated_replicas, Int32>("updatedReplicas"),
      Row<&AgentPoolStatus::template_hash, Str>("templateHash"),
  };
};

// -- Notifier

template <>
struct FieldsOf<NotifierSelector> {
  static constexpr std::string_view kShape = "a mapping {matchLabels: {key: value}}";
  static constexpr FieldRow<NotifierSelector> kRows[] = {
      Row<&NotifierSelector::match_labels, StrMap>("matchLabels"),
  };
};

template <>
struct FieldsOf<NotifierSpec> : PlainMapping {
  static constexpr FieldRow<NotifierSpec> kRows[] = {
      Row<&NotifierSpec::type, Enum<NotifierType>>("type", kAlways),
      Row<&NotifierSpec::url_from, Struct<SecretRef>>("urlFrom"),
      Row<&NotifierSpec::signing_secret_from, Struct<SecretRef>>("signingSecretFrom"),
      Row<&NotifierSpec::events, StrList>("events"),
      Row<&NotifierSpec::selector, Struct<NotifierSelector>>("selector"),
      Row<&NotifierSpec::suspend, Bool>("suspend"),
  };
};

template <>
struct FieldsOf<NotifierStatus> : PlainMapping {
  static constexpr FieldRow<NotifierStatus> kRows[] = {
      Row<&NotifierStatus::observed_generation, Int>("observedGeneration"),
      Row<&NotifierStatus::conditions, ListOf<Condition>>("conditions"),
      Row<&NotifierStatus::last_delivered_at, Str>("lastDeliveredAt"),
      Row<&NotifierStatus::last_error, Str>("lastError"),
      Row<&NotifierStatus::pending, Int>("pending"),
      Row<&NotifierStatus::delivered, Int>("delivered"),
      Row<&NotifierStatus::dropped, Int>("dropped"),
  };
};

// ---- Whole objects ----------------------------------------------------------------------------

// Spec and ResourceStatus are variants over the kinds' types: one alternative per kind.
template <typename Variant>
Node WriteVariant(const Variant& v) {
  return std::visit([](const auto& s) { return Struct<std::decay_t<decltype(s)>>::Write(s); }, v);
}

// Reads a spec or status into the alternative `out` holds (MakeObject set the kind's), by its
// type's field table: nothing here is per kind.
template <typename Variant>
Status ReadVariant(const Ctx& ctx, const Field& f, Variant* out) {
  return std::visit(
      [&](auto& value) { return Struct<std::decay_t<decltype(value)>>::Read(ctx, f, &value); },
      *out);
}

Node EncodeObjectNode(const Object& o) {
  Node n = Node::Map();
  n.Add("apiVersion", Node::String(std::string(kApiVersion)));
  n.Add("kind", Node::String(std::string(KindName(o.kind))));
  n.Add("metadata", Struct<ObjectMeta>::Write(o.metadata));
  n.Add("spec", WriteVariant(o.spec));
  if (Node status = WriteVariant(o.status); !status.entries.empty()) {
    n.Add("status", std::move(status));
  }
  return n;
}

// Decodes a whole object from `root` (a document root, path "").
StatusOr<Object> ReadObject(const Ctx& ctx, const Field& root) {
  if (root.node->type != Node::Type::kMap) {
    return Error(
        ctx, root,
        "expected a mapping with apiVersion, kind, metadata and spec, got " + Describe(*root.node));
  }
  MapReader r(ctx, root);
  RETURN_IF_ERROR(r.Open({"apiVersion", "kind", "metadata", "spec", "status"}));
  auto api_version = r.Get("apiVersion");
  if (ctx.manifest) {
    if (!api_version) {
      return Error(ctx, root.line, root.column, "apiVersion",
                   "required field is missing (expected " + std::string(kApiVersion) + ")");
    }
    std::string text;
    RETURN_IF_ERROR(ReadString(ctx, *api_version, &text));
    if (text != kApiVersion) {
      return Error(
          ctx, *api_version,
          "unsupported apiVersion " + Quote(text) + " (expected " + std::string(kApiVersion) + ")");
    }
  }
  auto kind_field = r.Get("kind");
  if (!kind_field) {
    return Error(ctx, root.line, root.column, "kind",
                 "required field is missing (expected one of: " + KindNameList() + ")");
  }
  Kind kind = Kind::kSandbox;
  RETURN_IF_ERROR(ReadKindName(ctx, *kind_field, &kind));
  Object object = MakeObject(kind, "");
  auto meta = r.Get("metadata");
  if (ctx.manifest && !meta) {
    return Error(ctx, root.line, root.column, "metadata.name", "required field is missing");
  }
  if (meta) {
    RETURN_IF_ERROR(Struct<ObjectMeta>::Read(ctx, *meta, &object.metadata));
  }
  if (ctx.manifest && object.metadata.name.empty()) {
    const Field& at = meta ? *meta : root;
    return Error(ctx, at.line, at.column, "metadata.name", "required field is missing");
  }
  if (auto spec = r.Get("spec")) {
    RETURN_IF_ERROR(ReadVariant(ctx, *spec, &object.spec));
  }
  if (!ctx.manifest) {
    if (auto status = r.Get("status")) {
      RETURN_IF_ERROR(ReadVariant(ctx, *status, &object.status));
    }
  }
  return object;
}

}  // namespace

StatusOr<std::vector<Manifest>> DecodeManifests(std::string_view content, std::string_view file) {
  ASSIGN_OR_RETURN(std::vector<internal::Document> docs, internal::ParseYaml(content, file));
  std::vector<Manifest> out;
  out.reserve(docs.size());
  for (const internal::Document& doc : docs) {
    if (doc.root.is_null()) {
      continue;
    }
    Manifest m;
    m.file = std::string(file);
    m.line = doc.line;
    m.column = doc.root.column;
    Ctx ctx{file, /*manifest=*/true, &m.positions};
    Field root{&doc.root, "", doc.root.line, doc.root.column};
    ASSIGN_OR_RETURN(m.object, ReadObject(ctx, root));
    out.push_back(std::move(m));
  }
  return out;
}

Status LocateError(const Manifest& manifest, const Status& status) {
  if (status.ok()) {
    return status;
  }
  const std::string& message = status.message();
  Manifest::Position at{manifest.line, manifest.column};
  // The field path is the message up to the first ": "; try it and then ever shorter prefixes
  // ("spec.setup[1].name" → "spec.setup[1]" → "spec.setup" → "spec").
  const size_t colon = message.find(": ");
  if (colon != std::string::npos) {
    std::string path = message.substr(0, colon);
    while (!path.empty()) {
      if (auto it = manifest.positions.find(path); it != manifest.positions.end()) {
        at = it->second;
        break;
      }
      const size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos) {
        break;
      }
      path.resize(cut);
    }
  }
  return Status(status.code(), manifest.file + ":" + std::to_string(at.line) + ":" +
                                   std::to_string(at.column) + ": " + message);
}

std::string EncodeObjectJson(const Object& object, bool pretty) {
  return internal::EmitJson(EncodeObjectNode(object), pretty);
}

std::string EncodeObjectYaml(const Object& object) {
  return internal::EmitYaml(EncodeObjectNode(object));
}

StatusOr<Object> DecodeObjectJson(std::string_view json) {
  ASSIGN_OR_RETURN(Node root, internal::ParseJson(json));
  Ctx ctx{"", /*manifest=*/false, nullptr};
  return ReadObject(ctx, Field{&root, "", 0, 0});
}

std::string EncodeSpecJson(const Object& object) {
  return internal::EmitJson(WriteVariant(object.spec), false);
}

std::string EncodeStatusJson(const Object& object) {
  return internal::EmitJson(WriteVariant(object.status), false);
}

StatusOr<Spec> DecodeSpecJson(Kind kind, std::string_view json) {
  ASSIGN_OR_RETURN(Node root, internal::ParseJson(json));
  Ctx ctx{"", /*manifest=*/false, nullptr};
  Spec spec = MakeObject(kind, "").spec;
  RETURN_IF_ERROR(ReadVariant(ctx, Field{&root, "spec", 0, 0}, &spec));
  return spec;
}

StatusOr<ResourceStatus> DecodeStatusJson(Kind kind, std::string_view json) {
  ASSIGN_OR_RETURN(Node root, internal::ParseJson(json));
  Ctx ctx{"", /*manifest=*/false, nullptr};
  ResourceStatus status = MakeObject(kind, "").status;
  RETURN_IF_ERROR(ReadVariant(ctx, Field{&root, "status", 0, 0}, &status));
  return status;
}

}  // namespace sbx::api
