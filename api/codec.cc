// Field mapping between sbx objects and the codec tree (api/internal/tree.h). The mapping is
// written once and serves YAML manifests (strict, with positions) and the store's JSON
// (lenient about unknown fields, no positions).
//
// Canonical encoding rule: a field whose C++ default is empty/zero/false/unset is omitted when
// it has that value; a field with a non-empty default (namespace, workspaceRef, power, …) is
// always written. Decoding an absent field gives the C++ default, so decode(encode(x)) == x and
// the same object always gives the same bytes.
#include "api/codec.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <utility>

#include "api/duration.h"
#include "api/internal/tree.h"

namespace sbx::api {
namespace {

using internal::Entry;
using internal::Node;

// ---- Encoding -------------------------------------------------------------------------------

void AddString(Node& map, std::string key, const std::string& value) {
  if (!value.empty()) {
    map.Add(std::move(key), Node::String(value));
  }
}

void AddInt(Node& map, std::string key, int64_t value) {
  if (value != 0) {
    map.Add(std::move(key), Node::Int(value));
  }
}

void AddMapIfNotEmpty(Node& map, std::string key, Node value) {
  if (!value.entries.empty()) {
    map.Add(std::move(key), std::move(value));
  }
}

Node StringMap(const std::map<std::string, std::string>& m) {
  Node n = Node::Map();
  for (const auto& [k, v] : m) {
    n.Add(k, Node::String(v));
  }
  return n;
}

Node StringList(const std::vector<std::string>& v) {
  Node n = Node::Seq();
  for (const auto& s : v) {
    n.items.push_back(Node::String(s));
  }
  return n;
}

void AddSecret(Node& map, std::string key, const SecretRef& ref) {
  if (ref.empty()) {
    return;
  }
  Node n = Node::Map();
  AddString(n, "env", ref.env);
  AddString(n, "file", ref.file);
  map.Add(std::move(key), std::move(n));
}

std::string_view PowerName(Power p) { return p == Power::kRunning ? "Running" : "Stopped"; }
std::string_view DeletionPolicyName(DeletionPolicy p) {
  return p == DeletionPolicy::kDelete ? "Delete" : "Orphan";
}
std::string_view RestartPolicyName(RestartPolicy p) {
  return p == RestartPolicy::kAlways ? "Always" : "Never";
}

Node EncodeMeta(const ObjectMeta& m) {
  Node n = Node::Map();
  n.Add("name", Node::String(m.name));
  n.Add("namespace", Node::String(m.namespace_));
  if (!m.labels.empty()) {
    n.Add("labels", StringMap(m.labels));
  }
  if (!m.annotations.empty()) {
    n.Add("annotations", StringMap(m.annotations));
  }
  AddString(n, "uid", m.uid);
  AddInt(n, "generation", m.generation);
  AddInt(n, "resourceVersion", m.resource_version);
  AddString(n, "creationTimestamp", m.creation_timestamp);
  AddString(n, "deletionTimestamp", m.deletion_timestamp);
  if (!m.finalizers.empty()) {
    n.Add("finalizers", StringList(m.finalizers));
  }
  if (!m.owner_references.empty()) {
    Node refs = Node::Seq();
    for (const OwnerReference& r : m.owner_references) {
      Node o = Node::Map();
      o.Add("kind", Node::String(std::string(KindName(r.kind))));
      o.Add("name", Node::String(r.name));
      AddString(o, "uid", r.uid);
      o.Add("controller", Node::Bool(r.controller));
      refs.items.push_back(std::move(o));
    }
    n.Add("ownerReferences", std::move(refs));
  }
  return n;
}

Node EncodeWorkspaceSpec(const WorkspaceSpec& s) {
  Node n = Node::Map();
  Node db = Node::Map();
  AddString(db, "host", s.databricks.host);
  AddString(db, "profile", s.databricks.profile);
  AddString(db, "workspaceId", s.databricks.workspace_id);
  AddSecret(db, "tokenFrom", s.databricks.token_from);
  AddSecret(db, "clientIdFrom", s.databricks.client_id_from);
  AddSecret(db, "clientSecretFrom", s.databricks.client_secret_from);
  AddMapIfNotEmpty(n, "databricks", std::move(db));
  Node oa = Node::Map();
  AddString(oa, "baseUrl", s.openai.base_url);
  AddSecret(oa, "apiKeyFrom", s.openai.api_key_from);
  AddMapIfNotEmpty(n, "openai", std::move(oa));
  Node limits = Node::Map();
  if (s.limits.requests_per_second != 0) {
    limits.Add("requestsPerSecond", Node::Float(s.limits.requests_per_second));
  }
  AddInt(limits, "maxSandboxes", s.limits.max_sandboxes);
  AddMapIfNotEmpty(n, "limits", std::move(limits));
  return n;
}

Node EncodeSandboxSpec(const SandboxSpec& s) {
  Node n = Node::Map();
  n.Add("workspaceRef", Node::String(s.workspace_ref));
  AddString(n, "sandboxId", s.sandbox_id);
  AddString(n, "displayName", s.display_name);
  if (s.inactivity_timeout.has_value()) {
    n.Add("inactivityTimeout", Node::String(FormatDuration(*s.inactivity_timeout)));
  }
  AddString(n, "image", s.image);
  n.Add("power", Node::String(std::string(PowerName(s.power))));
  if (!s.setup.empty()) {
    Node steps = Node::Seq();
    for (const SetupStep& step : s.setup) {
      Node st = Node::Map();
      st.Add("name", Node::String(step.name));
      st.Add("run", Node::String(step.run));
      st.Add("timeout", Node::String(FormatDuration(step.timeout)));
      steps.items.push_back(std::move(st));
    }
    n.Add("setup", std::move(steps));
  }
  n.Add("deletionPolicy", Node::String(std::string(DeletionPolicyName(s.deletion_policy))));
  return n;
}

Node EncodeAgentWorkerSpec(const AgentWorkerSpec& s) {
  Node n = Node::Map();
  AddString(n, "sandboxRef", s.sandbox_ref);
  if (s.sandbox.has_value()) {
    n.Add("sandbox", EncodeSandboxSpec(*s.sandbox));
  }
  Node agent = Node::Map();
  AddString(agent, "model", s.agent.model);
  AddString(agent, "instructions", s.agent.instructions);
  AddMapIfNotEmpty(n, "agent", std::move(agent));
  n.Add("workspaceDirectory", Node::String(s.workspace_directory));
  Node ex = Node::Map();
  ex.Add("command", Node::String(s.executor.command));
  if (!s.executor.args.empty()) {
    ex.Add("args", StringList(s.executor.args));
  }
  if (!s.executor.env.empty()) {
    Node vars = Node::Seq();
    for (const EnvVar& var : s.executor.env) {
      Node v = Node::Map();
      v.Add("name", Node::String(var.name));
      AddString(v, "value", var.value);
      AddSecret(v, "valueFrom", var.value_from);
      vars.items.push_back(std::move(v));
    }
    ex.Add("env", std::move(vars));
  }
  AddSecret(ex, "apiKeyFrom", s.executor.api_key_from);
  n.Add("executor", std::move(ex));
  n.Add("restartPolicy", Node::String(std::string(RestartPolicyName(s.restart_policy))));
  return n;
}

void AddConditions(Node& n, const std::vector<Condition>& conditions) {
  if (conditions.empty()) {
    return;
  }
  Node list = Node::Seq();
  for (const Condition& c : conditions) {
    Node cn = Node::Map();
    cn.Add("type", Node::String(c.type));
    cn.Add("status", Node::String(std::string(ConditionStatusName(c.status))));
    AddString(cn, "reason", c.reason);
    AddString(cn, "message", c.message);
    AddString(cn, "lastTransitionTime", c.last_transition_time);
    AddInt(cn, "observedGeneration", c.observed_generation);
    list.items.push_back(std::move(cn));
  }
  n.Add("conditions", std::move(list));
}

Node EncodeWorkspaceStatus(const WorkspaceStatus& s) {
  Node n = Node::Map();
  AddInt(n, "observedGeneration", s.observed_generation);
  AddConditions(n, s.conditions);
  return n;
}

Node EncodeSandboxStatus(const SandboxStatus& s) {
  Node n = Node::Map();
  AddInt(n, "observedGeneration", s.observed_generation);
  AddConditions(n, s.conditions);
  AddString(n, "sandboxName", s.sandbox_name);
  AddString(n, "workspaceRef", s.workspace_ref);
  AddString(n, "state", s.state);
  AddString(n, "createTime", s.create_time);
  AddString(n, "bootId", s.boot_id);
  if (!s.setup.empty()) {
    Node list = Node::Seq();
    for (const SetupResult& r : s.setup) {
      Node rn = Node::Map();
      rn.Add("name", Node::String(r.name));
      AddString(rn, "bootId", r.boot_id);
      rn.Add("exitCode", Node::Int(r.exit_code));
      rn.Add("succeeded", Node::Bool(r.succeeded));
      AddString(rn, "message", r.message);
      AddString(rn, "finishedAt", r.finished_at);
      list.items.push_back(std::move(rn));
    }
    n.Add("setup", std::move(list));
  }
  return n;
}

Node EncodeAgentWorkerStatus(const AgentWorkerStatus& s) {
  Node n = Node::Map();
  AddInt(n, "observedGeneration", s.observed_generation);
  AddConditions(n, s.conditions);
  AddString(n, "sessionId", s.session_id);
  AddString(n, "environmentId", s.environment_id);
  AddString(n, "remoteUrl", s.remote_url);
  AddString(n, "agentHash", s.agent_hash);
  AddString(n, "workspaceDirectory", s.workspace_directory);
  Node ex = Node::Map();
  AddInt(ex, "pid", s.executor.pid);
  AddString(ex, "launchedAt", s.executor.launched_at);
  AddInt(ex, "restarts", s.executor.restarts);
  AddString(ex, "lastExitReason", s.executor.last_exit_reason);
  AddString(ex, "specHash", s.executor.spec_hash);
  AddString(ex, "lastProbeAt", s.executor.last_probe_at);
  AddString(ex, "probedBootId", s.executor.probed_boot_id);
  AddString(ex, "nextLaunchAfter", s.executor.next_launch_after);
  AddMapIfNotEmpty(n, "executor", std::move(ex));
  AddString(n, "environmentStatus", s.environment_status);
  return n;
}

Node EncodeSpecNode(const Spec& spec) {
  return std::visit(
      [](const auto& s) -> Node {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, WorkspaceSpec>) {
          return EncodeWorkspaceSpec(s);
        } else if constexpr (std::is_same_v<T, SandboxSpec>) {
          return EncodeSandboxSpec(s);
        } else {
          return EncodeAgentWorkerSpec(s);
        }
      },
      spec);
}

Node EncodeStatusNode(const ResourceStatus& status) {
  return std::visit(
      [](const auto& s) -> Node {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, WorkspaceStatus>) {
          return EncodeWorkspaceStatus(s);
        } else if constexpr (std::is_same_v<T, SandboxStatus>) {
          return EncodeSandboxStatus(s);
        } else {
          return EncodeAgentWorkerStatus(s);
        }
      },
      status);
}

Node EncodeObjectNode(const Object& o) {
  Node n = Node::Map();
  n.Add("apiVersion", Node::String(std::string(kApiVersion)));
  n.Add("kind", Node::String(std::string(KindName(o.kind))));
  n.Add("metadata", EncodeMeta(o.metadata));
  n.Add("spec", EncodeSpecNode(o.spec));
  AddMapIfNotEmpty(n, "status", EncodeStatusNode(o.status));
  return n;
}

// ---- Decoding -------------------------------------------------------------------------------

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

// The closest candidate, when close enough to be a plausible typo ("" otherwise).
std::string Suggest(std::string_view word, std::initializer_list<std::string_view> candidates) {
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

  [[nodiscard]] Status Open(std::initializer_list<std::string_view> known) {
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

template <typename E>
Status ReadEnum(const Ctx& ctx, const Field& f,
                std::initializer_list<std::pair<std::string_view, E>> values, E* out) {
  std::string text;
  RETURN_IF_ERROR(ReadString(ctx, f, &text));
  std::string expected;
  for (const auto& [name, value] : values) {
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

// Helpers that read an optional field of a mapping into `out` (left unchanged when absent).
#define SBX_READ(reader, key, fn, out)        \
  do {                                        \
    if (auto sbx_f_ = (reader).Get(key)) {    \
      RETURN_IF_ERROR(fn(ctx, *sbx_f_, out)); \
    }                                         \
  } while (0)

Status ReadSecret(const Ctx& ctx, const Field& f, SecretRef* out) {
  if (f.node->type != Node::Type::kMap) {
    return Error(ctx, f,
                 "expected a mapping like {env: NAME} or {file: /path}, got " + Describe(*f.node));
  }
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"env", "file"}));
  SBX_READ(r, "env", ReadString, &out->env);
  SBX_READ(r, "file", ReadString, &out->file);
  return OkStatus();
}

Status ReadKindName(const Ctx& ctx, const Field& f, Kind* out) {
  std::string text;
  RETURN_IF_ERROR(ReadString(ctx, f, &text));
  for (Kind k : kAllKinds) {
    if (KindName(k) == text) {
      *out = k;
      return OkStatus();
    }
  }
  std::string problem =
      "unknown kind " + Quote(text) + " (expected one of: Workspace, Sandbox, AgentWorker";
  if (std::string hint = Suggest(text, {"Workspace", "Sandbox", "AgentWorker"}); !hint.empty()) {
    problem += "; did you mean " + Quote(hint) + "?";
  }
  problem += ")";
  return Error(ctx, f, problem);
}

Status ReadOwnerReference(const Ctx& ctx, const Field& f, OwnerReference* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"kind", "name", "uid", "controller"}));
  SBX_READ(r, "kind", ReadKindName, &out->kind);
  SBX_READ(r, "name", ReadString, &out->name);
  SBX_READ(r, "uid", ReadString, &out->uid);
  SBX_READ(r, "controller", ReadBool, &out->controller);
  return OkStatus();
}

Status ReadMeta(const Ctx& ctx, const Field& f, ObjectMeta* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(
      r.Open({"name", "namespace", "labels", "annotations", "uid", "generation", "resourceVersion",
              "creationTimestamp", "deletionTimestamp", "finalizers", "ownerReferences"}));
  SBX_READ(r, "name", ReadString, &out->name);
  SBX_READ(r, "namespace", ReadString, &out->namespace_);
  SBX_READ(r, "labels", ReadStringMap, &out->labels);
  SBX_READ(r, "annotations", ReadStringMap, &out->annotations);
  if (ctx.manifest) {
    return OkStatus();  // Server-set fields in a manifest are accepted and ignored.
  }
  SBX_READ(r, "uid", ReadString, &out->uid);
  SBX_READ(r, "generation", ReadInt, &out->generation);
  SBX_READ(r, "resourceVersion", ReadInt, &out->resource_version);
  SBX_READ(r, "creationTimestamp", ReadString, &out->creation_timestamp);
  SBX_READ(r, "deletionTimestamp", ReadString, &out->deletion_timestamp);
  SBX_READ(r, "finalizers", ReadStringList, &out->finalizers);
  if (auto refs = r.Get("ownerReferences")) {
    out->owner_references.clear();
    RETURN_IF_ERROR(ForEachItem(ctx, *refs, [&](const Field& item) -> Status {
      OwnerReference ref;
      RETURN_IF_ERROR(ReadOwnerReference(ctx, item, &ref));
      out->owner_references.push_back(std::move(ref));
      return OkStatus();
    }));
  }
  return OkStatus();
}

Status ReadDatabricks(const Ctx& ctx, const Field& f, DatabricksConnection* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(
      r.Open({"host", "profile", "workspaceId", "tokenFrom", "clientIdFrom", "clientSecretFrom"}));
  SBX_READ(r, "host", ReadString, &out->host);
  SBX_READ(r, "profile", ReadString, &out->profile);
  SBX_READ(r, "workspaceId", ReadString, &out->workspace_id);
  SBX_READ(r, "tokenFrom", ReadSecret, &out->token_from);
  SBX_READ(r, "clientIdFrom", ReadSecret, &out->client_id_from);
  SBX_READ(r, "clientSecretFrom", ReadSecret, &out->client_secret_from);
  return OkStatus();
}

Status ReadOpenAi(const Ctx& ctx, const Field& f, OpenAiConnection* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"baseUrl", "apiKeyFrom"}));
  SBX_READ(r, "baseUrl", ReadString, &out->base_url);
  SBX_READ(r, "apiKeyFrom", ReadSecret, &out->api_key_from);
  return OkStatus();
}

Status ReadLimits(const Ctx& ctx, const Field& f, WorkspaceLimits* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"requestsPerSecond", "maxSandboxes"}));
  SBX_READ(r, "requestsPerSecond", ReadDouble, &out->requests_per_second);
  SBX_READ(r, "maxSandboxes", ReadInt32, &out->max_sandboxes);
  return OkStatus();
}

Status ReadWorkspaceSpec(const Ctx& ctx, const Field& f, WorkspaceSpec* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"databricks", "openai", "limits"}));
  SBX_READ(r, "databricks", ReadDatabricks, &out->databricks);
  SBX_READ(r, "openai", ReadOpenAi, &out->openai);
  SBX_READ(r, "limits", ReadLimits, &out->limits);
  return OkStatus();
}

Status ReadPower(const Ctx& ctx, const Field& f, Power* out) {
  return ReadEnum<Power>(ctx, f, {{"Running", Power::kRunning}, {"Stopped", Power::kStopped}}, out);
}

Status ReadDeletionPolicy(const Ctx& ctx, const Field& f, DeletionPolicy* out) {
  return ReadEnum<DeletionPolicy>(
      ctx, f, {{"Delete", DeletionPolicy::kDelete}, {"Orphan", DeletionPolicy::kOrphan}}, out);
}

Status ReadRestartPolicy(const Ctx& ctx, const Field& f, RestartPolicy* out) {
  return ReadEnum<RestartPolicy>(
      ctx, f, {{"Always", RestartPolicy::kAlways}, {"Never", RestartPolicy::kNever}}, out);
}

Status ReadSetupStep(const Ctx& ctx, const Field& f, SetupStep* out) {
  MapReader r(ctx, f);
  if (f.node->type != Node::Type::kMap) {
    return Error(ctx, f, "expected a mapping {name, run, timeout}, got " + Describe(*f.node));
  }
  RETURN_IF_ERROR(r.Open({"name", "run", "timeout"}));
  SBX_READ(r, "name", ReadString, &out->name);
  SBX_READ(r, "run", ReadString, &out->run);
  SBX_READ(r, "timeout", ReadDuration, &out->timeout);
  return OkStatus();
}

Status ReadSandboxSpec(const Ctx& ctx, const Field& f, SandboxSpec* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"workspaceRef", "sandboxId", "displayName", "inactivityTimeout", "image",
                          "power", "setup", "deletionPolicy"}));
  SBX_READ(r, "workspaceRef", ReadString, &out->workspace_ref);
  SBX_READ(r, "sandboxId", ReadString, &out->sandbox_id);
  SBX_READ(r, "displayName", ReadString, &out->display_name);
  if (auto t = r.Get("inactivityTimeout")) {
    std::chrono::seconds d{0};
    RETURN_IF_ERROR(ReadDuration(ctx, *t, &d));
    out->inactivity_timeout = d;
  }
  SBX_READ(r, "image", ReadString, &out->image);
  SBX_READ(r, "power", ReadPower, &out->power);
  if (auto setup = r.Get("setup")) {
    out->setup.clear();
    RETURN_IF_ERROR(ForEachItem(ctx, *setup, [&](const Field& item) -> Status {
      SetupStep step;
      RETURN_IF_ERROR(ReadSetupStep(ctx, item, &step));
      out->setup.push_back(std::move(step));
      return OkStatus();
    }));
  }
  SBX_READ(r, "deletionPolicy", ReadDeletionPolicy, &out->deletion_policy);
  return OkStatus();
}

Status ReadAgent(const Ctx& ctx, const Field& f, AgentSpec* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"model", "instructions"}));
  SBX_READ(r, "model", ReadString, &out->model);
  SBX_READ(r, "instructions", ReadString, &out->instructions);
  return OkStatus();
}

Status ReadEnvVar(const Ctx& ctx, const Field& f, EnvVar* out) {
  if (f.node->type != Node::Type::kMap) {
    return Error(ctx, f,
                 "expected a mapping {name, value} or {name, valueFrom}, got " + Describe(*f.node));
  }
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"name", "value", "valueFrom"}));
  SBX_READ(r, "name", ReadString, &out->name);
  SBX_READ(r, "value", ReadString, &out->value);
  SBX_READ(r, "valueFrom", ReadSecret, &out->value_from);
  return OkStatus();
}

Status ReadExecutor(const Ctx& ctx, const Field& f, ExecutorSpec* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"command", "args", "env", "apiKeyFrom"}));
  SBX_READ(r, "command", ReadString, &out->command);
  SBX_READ(r, "args", ReadStringList, &out->args);
  if (auto env = r.Get("env")) {
    out->env.clear();
    RETURN_IF_ERROR(ForEachItem(ctx, *env, [&](const Field& item) -> Status {
      EnvVar var;
      RETURN_IF_ERROR(ReadEnvVar(ctx, item, &var));
      out->env.push_back(std::move(var));
      return OkStatus();
    }));
  }
  SBX_READ(r, "apiKeyFrom", ReadSecret, &out->api_key_from);
  return OkStatus();
}

Status ReadAgentWorkerSpec(const Ctx& ctx, const Field& f, AgentWorkerSpec* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open(
      {"sandboxRef", "sandbox", "agent", "workspaceDirectory", "executor", "restartPolicy"}));
  SBX_READ(r, "sandboxRef", ReadString, &out->sandbox_ref);
  if (auto s = r.Get("sandbox")) {
    SandboxSpec spec;
    RETURN_IF_ERROR(ReadSandboxSpec(ctx, *s, &spec));
    out->sandbox = std::move(spec);
  }
  SBX_READ(r, "agent", ReadAgent, &out->agent);
  SBX_READ(r, "workspaceDirectory", ReadString, &out->workspace_directory);
  SBX_READ(r, "executor", ReadExecutor, &out->executor);
  SBX_READ(r, "restartPolicy", ReadRestartPolicy, &out->restart_policy);
  return OkStatus();
}

Status ReadConditionStatus(const Ctx& ctx, const Field& f, ConditionStatus* out) {
  return ReadEnum<ConditionStatus>(ctx, f,
                                   {{"True", ConditionStatus::kTrue},
                                    {"False", ConditionStatus::kFalse},
                                    {"Unknown", ConditionStatus::kUnknown}},
                                   out);
}

Status ReadCondition(const Ctx& ctx, const Field& f, Condition* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(
      r.Open({"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}));
  SBX_READ(r, "type", ReadString, &out->type);
  SBX_READ(r, "status", ReadConditionStatus, &out->status);
  SBX_READ(r, "reason", ReadString, &out->reason);
  SBX_READ(r, "message", ReadString, &out->message);
  SBX_READ(r, "lastTransitionTime", ReadString, &out->last_transition_time);
  SBX_READ(r, "observedGeneration", ReadInt, &out->observed_generation);
  return OkStatus();
}

Status ReadConditions(const Ctx& ctx, const Field& f, std::vector<Condition>* out) {
  out->clear();
  return ForEachItem(ctx, f, [&](const Field& item) -> Status {
    Condition c;
    RETURN_IF_ERROR(ReadCondition(ctx, item, &c));
    out->push_back(std::move(c));
    return OkStatus();
  });
}

Status ReadWorkspaceStatus(const Ctx& ctx, const Field& f, WorkspaceStatus* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"observedGeneration", "conditions"}));
  SBX_READ(r, "observedGeneration", ReadInt, &out->observed_generation);
  SBX_READ(r, "conditions", ReadConditions, &out->conditions);
  return OkStatus();
}

Status ReadSetupResult(const Ctx& ctx, const Field& f, SetupResult* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"name", "bootId", "exitCode", "succeeded", "message", "finishedAt"}));
  SBX_READ(r, "name", ReadString, &out->name);
  SBX_READ(r, "bootId", ReadString, &out->boot_id);
  SBX_READ(r, "exitCode", ReadInt32, &out->exit_code);
  SBX_READ(r, "succeeded", ReadBool, &out->succeeded);
  SBX_READ(r, "message", ReadString, &out->message);
  SBX_READ(r, "finishedAt", ReadString, &out->finished_at);
  return OkStatus();
}

Status ReadSandboxStatus(const Ctx& ctx, const Field& f, SandboxStatus* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"observedGeneration", "conditions", "sandboxName", "workspaceRef",
                          "state", "createTime", "bootId", "setup"}));
  SBX_READ(r, "observedGeneration", ReadInt, &out->observed_generation);
  SBX_READ(r, "conditions", ReadConditions, &out->conditions);
  SBX_READ(r, "sandboxName", ReadString, &out->sandbox_name);
  SBX_READ(r, "workspaceRef", ReadString, &out->workspace_ref);
  SBX_READ(r, "state", ReadString, &out->state);
  SBX_READ(r, "createTime", ReadString, &out->create_time);
  SBX_READ(r, "bootId", ReadString, &out->boot_id);
  if (auto setup = r.Get("setup")) {
    out->setup.clear();
    RETURN_IF_ERROR(ForEachItem(ctx, *setup, [&](const Field& item) -> Status {
      SetupResult result;
      RETURN_IF_ERROR(ReadSetupResult(ctx, item, &result));
      out->setup.push_back(std::move(result));
      return OkStatus();
    }));
  }
  return OkStatus();
}

Status ReadExecutorStatus(const Ctx& ctx, const Field& f, ExecutorStatus* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(r.Open({"pid", "launchedAt", "restarts", "lastExitReason", "specHash",
                          "lastProbeAt", "probedBootId", "nextLaunchAfter"}));
  SBX_READ(r, "pid", ReadInt, &out->pid);
  SBX_READ(r, "launchedAt", ReadString, &out->launched_at);
  SBX_READ(r, "restarts", ReadInt32, &out->restarts);
  SBX_READ(r, "lastExitReason", ReadString, &out->last_exit_reason);
  SBX_READ(r, "specHash", ReadString, &out->spec_hash);
  SBX_READ(r, "lastProbeAt", ReadString, &out->last_probe_at);
  SBX_READ(r, "probedBootId", ReadString, &out->probed_boot_id);
  SBX_READ(r, "nextLaunchAfter", ReadString, &out->next_launch_after);
  return OkStatus();
}

Status ReadAgentWorkerStatus(const Ctx& ctx, const Field& f, AgentWorkerStatus* out) {
  MapReader r(ctx, f);
  RETURN_IF_ERROR(
      r.Open({"observedGeneration", "conditions", "sessionId", "environmentId", "remoteUrl",
              "agentHash", "workspaceDirectory", "executor", "environmentStatus"}));
  SBX_READ(r, "observedGeneration", ReadInt, &out->observed_generation);
  SBX_READ(r, "conditions", ReadConditions, &out->conditions);
  SBX_READ(r, "sessionId", ReadString, &out->session_id);
  SBX_READ(r, "environmentId", ReadString, &out->environment_id);
  SBX_READ(r, "remoteUrl", ReadString, &out->remote_url);
  SBX_READ(r, "agentHash", ReadString, &out->agent_hash);
  SBX_READ(r, "workspaceDirectory", ReadString, &out->workspace_directory);
  SBX_READ(r, "executor", ReadExecutorStatus, &out->executor);
  SBX_READ(r, "environmentStatus", ReadString, &out->environment_status);
  return OkStatus();
}

Status ReadSpec(const Ctx& ctx, Kind kind, const Field& f, Spec* out) {
  switch (kind) {
    case Kind::kWorkspace: {
      WorkspaceSpec s;
      RETURN_IF_ERROR(ReadWorkspaceSpec(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
    case Kind::kSandbox: {
      SandboxSpec s;
      RETURN_IF_ERROR(ReadSandboxSpec(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
    case Kind::kAgentWorker: {
      AgentWorkerSpec s;
      RETURN_IF_ERROR(ReadAgentWorkerSpec(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
  }
  return InternalError("unknown kind");
}

Status ReadStatus(const Ctx& ctx, Kind kind, const Field& f, ResourceStatus* out) {
  switch (kind) {
    case Kind::kWorkspace: {
      WorkspaceStatus s;
      RETURN_IF_ERROR(ReadWorkspaceStatus(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
    case Kind::kSandbox: {
      SandboxStatus s;
      RETURN_IF_ERROR(ReadSandboxStatus(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
    case Kind::kAgentWorker: {
      AgentWorkerStatus s;
      RETURN_IF_ERROR(ReadAgentWorkerStatus(ctx, f, &s));
      *out = std::move(s);
      return OkStatus();
    }
  }
  return InternalError("unknown kind");
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
                 "required field is missing (expected one of: Workspace, Sandbox, AgentWorker)");
  }
  Kind kind = Kind::kSandbox;
  RETURN_IF_ERROR(ReadKindName(ctx, *kind_field, &kind));
  Object object = MakeObject(kind, "");
  auto meta = r.Get("metadata");
  if (ctx.manifest && !meta) {
    return Error(ctx, root.line, root.column, "metadata.name", "required field is missing");
  }
  if (meta) {
    RETURN_IF_ERROR(ReadMeta(ctx, *meta, &object.metadata));
  }
  if (ctx.manifest && object.metadata.name.empty()) {
    const Field& at = meta ? *meta : root;
    return Error(ctx, at.line, at.column, "metadata.name", "required field is missing");
  }
  if (auto spec = r.Get("spec")) {
    RETURN_IF_ERROR(ReadSpec(ctx, kind, *spec, &object.spec));
  }
  if (!ctx.manifest) {
    if (auto status = r.Get("status")) {
      RETURN_IF_ERROR(ReadStatus(ctx, kind, *status, &object.status));
    }
  }
  return object;
}

#undef SBX_READ

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
  return internal::EmitJson(EncodeSpecNode(object.spec), false);
}

std::string EncodeStatusJson(const Object& object) {
  return internal::EmitJson(EncodeStatusNode(object.status), false);
}

StatusOr<Spec> DecodeSpecJson(Kind kind, std::string_view json) {
  ASSIGN_OR_RETURN(Node root, internal::ParseJson(json));
  Ctx ctx{"", /*manifest=*/false, nullptr};
  Spec spec;
  RETURN_IF_ERROR(ReadSpec(ctx, kind, Field{&root, "spec", 0, 0}, &spec));
  return spec;
}

StatusOr<ResourceStatus> DecodeStatusJson(Kind kind, std::string_view json) {
  ASSIGN_OR_RETURN(Node root, internal::ParseJson(json));
  Ctx ctx{"", /*manifest=*/false, nullptr};
  ResourceStatus status;
  RETURN_IF_ERROR(ReadStatus(ctx, kind, Field{&root, "status", 0, 0}, &status));
  return status;
}

}  // namespace sbx::api
