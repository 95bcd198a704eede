#include "cli/commands/object_printer.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "api/codec.h"
#include "api/conditions.h"
#include "api/rfc3339.h"
#include "api/usage.h"
#include "cli/commands/command_context.h"
#include "cli/commands/table_printer.h"

namespace sbx::cli {
namespace {

std::string OrNone(std::string_view s) { return s.empty() ? "<none>" : std::string(s); }

std::string OneLine(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    }
  }
  return out;
}

std::string ReadyReason(const api::Object& o) {
  const api::Condition* c = api::FindCondition(o.conditions(), api::condition::kReady);
  return c == nullptr ? "" : c->reason;
}
std::string ReadyMessage(const api::Object& o) {
  const api::Condition* c = api::FindCondition(o.conditions(), api::condition::kReady);
  return c == nullptr ? "" : OneLine(c->message);
}

std::string ExecutorCell(const api::Object& o) {
  const auto& conditions = o.conditions();
  // Power OnDemand: a worker whose sandbox sleeps (or is being woken for work) says so.
  if (const api::Condition* ready = api::FindCondition(conditions, api::condition::kReady)) {
    if (ready->reason == api::reason::kSleeping) {
      return "SLEEPING";
    }
    if (ready->reason == api::reason::kWaking) {
      return "WAKING";
    }
  }
  if (api::ConditionStatusOf(conditions, api::condition::kExecutorConnected) ==
      api::ConditionStatus::kTrue) {
    return std::string(api::reason::kConnected);
  }
  const api::Condition* running = api::FindCondition(conditions, api::condition::kExecutorRunning);
  if (running != nullptr && running->status == api::ConditionStatus::kTrue) {
    return std::string(api::reason::kRunning);
  }
  if (running != nullptr && !running->reason.empty()) {
    return running->reason;
  }
  return OrNone(o.agent_worker_status().executor.last_exit_reason);
}

// Tokens used over all attempts, input + output (status.usage); "<none>" before any turn ended.
std::string TokensCell(const api::TaskUsageTotals& u) {
  const int64_t tokens = u.input_tokens + u.output_tokens;
  return tokens > 0 ? std::to_string(tokens) : "<none>";
}

// RUNNING time as seconds with up to 3 places ("0.3s"); "<none>" while nothing was counted.
std::string ComputeCell(int64_t millis) {
  return millis > 0 ? api::FormatSeconds(millis) + "s" : "<none>";
}

// Attempts made so far, the running one included ("2"); "2/3" when retries are allowed.
std::string AttemptsCell(const api::AgentTaskSpec& spec, const api::AgentTaskStatus& s) {
  const bool running = s.phase == api::TaskPhase::kSubmitted || s.phase == api::TaskPhase::kRunning;
  std::string out = std::to_string(s.attempts.size() + (running ? 1 : 0));
  return spec.backoff_limit > 0 ? out + "/" + std::to_string(spec.backoff_limit + 1) : out;
}

// RESULT cells longer than this are cut (the whole message is in `describe`).
constexpr size_t kMaxResultCell = 60;

// The first line of the result message, or the error code of a task that failed.
std::string ResultCell(const api::AgentTaskStatus& s) {
  if (!s.result.error.code.empty()) {
    return s.result.error.code;
  }
  std::string_view message = s.result.message;
  message = message.substr(0, message.find('\n'));
  if (message.size() > kMaxResultCell) {
    size_t cut = kMaxResultCell;
    while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) {
      --cut;  // not inside a UTF-8 sequence
    }
    return std::string(message.substr(0, cut)) + "…";
  }
  return OrNone(message);
}

// A Notifier's selector as "team=a,tier=web"; "<none>" without one (every object of its
// namespace).
std::string SelectorCell(const api::NotifierSelector& selector) {
  std::string out;
  for (const auto& [key, value] : selector.match_labels) {
    out.append(out.empty() ? "" : ",").append(key).append("=").append(value);
  }
  return OrNone(out);
}

}  // namespace

api::StatusOr<OutputFormat> ParseOutputFormat(std::string_view text) {
  if (text.empty()) {
    return OutputFormat::kTable;
  }
  if (text == "wide") {
    return OutputFormat::kWide;
  }
  if (text == "yaml") {
    return OutputFormat::kYaml;
  }
  if (text == "json") {
    return OutputFormat::kJson;
  }
  if (text == "name") {
    return OutputFormat::kName;
  }
  return api::InvalidArgumentError(
      "unable to match a printer suitable for the output format \"" + std::string(text) +
      "\", allowed formats are: custom-columns,json,jsonpath,name,wide,yaml");
}

namespace {

// Splits "A:.x,B:.y[?(@.k==\"a,b\")]" at the commas outside brackets and quotes.
std::vector<std::string_view> SplitColumns(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      quote = c == quote ? '\0' : quote;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '(' || c == '{') {
      ++depth;
    } else if (c == ']' || c == ')' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

}  // namespace

api::StatusOr<OutputSpec> ParseOutputSpec(std::string_view text) {
  OutputSpec spec;
  constexpr std::string_view kJsonPath = "jsonpath";
  constexpr std::string_view kColumns = "custom-columns";
  if (text == kJsonPath || text.substr(0, kJsonPath.size() + 1) == "jsonpath=") {
    if (text.size() <= kJsonPath.size() + 1) {
      return api::InvalidArgumentError(
          "template format specified but no template given (-o jsonpath='{.metadata.name}')");
    }
    spec.format = OutputFormat::kJsonPath;
    ASSIGN_OR_RETURN(spec.jsonpath, JsonPath::ParseTemplate(text.substr(kJsonPath.size() + 1)));
    return spec;
  }
  if (text == kColumns || text.substr(0, kColumns.size() + 1) == "custom-columns=") {
    if (text.size() <= kColumns.size() + 1) {
      return api::InvalidArgumentError(
          "custom-columns format specified but no custom columns given "
          "(-o custom-columns=NAME:.metadata.name,…)");
    }
    spec.format = OutputFormat::kCustomColumns;
    for (const std::string_view column : SplitColumns(text.substr(kColumns.size() + 1))) {
      const size_t colon = column.find(':');
      if (colon == std::string_view::npos || colon == 0 || colon + 1 == column.size()) {
        return api::InvalidArgumentError("unexpected custom-columns spec: \"" +
                                         std::string(column) +
                                         "\", expected <header>:<json-path-expr>");
      }
      ASSIGN_OR_RETURN(JsonPath path, JsonPath::ParseRelaxed(column.substr(colon + 1)));
      spec.columns.push_back({std::string(column.substr(0, colon)), std::move(path)});
    }
    return spec;
  }
  ASSIGN_OR_RETURN(spec.format, ParseOutputFormat(text));
  return spec;
}

bool IsTable(const OutputSpec& spec) {
  return spec.format == OutputFormat::kTable || spec.format == OutputFormat::kWide ||
         spec.format == OutputFormat::kCustomColumns;
}

std::vector<std::string> TableHeaders(const OutputSpec& spec, api::Kind kind, bool with_namespace) {
  if (spec.format != OutputFormat::kCustomColumns) {
    return TableHeaders(kind, spec.format == OutputFormat::kWide, with_namespace);
  }
  std::vector<std::string> headers;
  for (const CustomColumn& column : spec.columns) {
    headers.push_back(column.header);
  }
  return headers;
}

std::vector<std::string> TableRow(const OutputSpec& spec, const api::Object& object,
                                  bool with_namespace, std::chrono::system_clock::time_point now) {
  if (spec.format != OutputFormat::kCustomColumns) {
    return TableRow(object, spec.format == OutputFormat::kWide, with_namespace, now);
  }
  // Our own encoding is JSON by construction.
  const auto document = JsonDocument::Parse(api::EncodeObjectJson(object, /*pretty=*/false));
  std::vector<std::string> row;
  for (const CustomColumn& column : spec.columns) {
    auto values = column.path.Values(*document);
    std::string cell;
    if (values.ok()) {
      for (const JsonPathValue& v : *values) {
        cell += (cell.empty() ? "" : ",") + v.text;
      }
    }
    row.push_back(values.ok() && !values->empty() ? cell : "<none>");
  }
  return row;
}

api::Status SortObjects(std::vector<api::Object>& objects, const JsonPath& path) {
  std::vector<std::pair<std::optional<JsonPathValue>, api::Object>> keyed;
  bool found = false;
  for (api::Object& object : objects) {
    const auto document = JsonDocument::Parse(api::EncodeObjectJson(object, /*pretty=*/false));
    ASSIGN_OR_RETURN(std::vector<JsonPathValue> values, path.Values(*document));
    std::optional<JsonPathValue> key;
    if (!values.empty()) {
      key = values.front();
      found = true;
    }
    keyed.emplace_back(std::move(key), std::move(object));
  }
  if (!found && !keyed.empty()) {
    for (size_t i = 0; i < keyed.size(); ++i) {
      objects[i] = std::move(keyed[i].second);
    }
    return api::InvalidArgumentError("couldn't find any field with path \"" + path.text() +
                                     "\" in the list of objects");
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (!a.first || !b.first) {
      return !a.first && b.first;
    }
    return CompareJsonPathValues(*a.first, *b.first) < 0;
  });
  for (size_t i = 0; i < keyed.size(); ++i) {
    objects[i] = std::move(keyed[i].second);
  }
  return api::OkStatus();
}

std::string TaskDuration(const api::AgentTaskStatus& status,
                         std::chrono::system_clock::time_point now) {
  const auto from =
      api::ParseRfc3339(status.submitted_at.empty() ? status.started_at : status.submitted_at);
  const std::optional<api::WallTime> to =
      api::IsFinished(status.phase) ? api::ParseRfc3339(status.completed_at) : now;
  if (!from || !to) {
    return "<none>";
  }
  return FormatAge(std::chrono::duration_cast<std::chrono::seconds>(*to - *from));
}

std::string ConditionCell(const api::Object& object, std::string_view type) {
  const api::Condition* c = api::FindCondition(object.conditions(), type);
  return c == nullptr ? "Unknown" : std::string(api::ConditionStatusName(c->status));
}

namespace {

// One column of `get`'s table: its header, whether only -o wide shows it, and its cell.
using Now = std::chrono::system_clock::time_point;
struct Column {
  std::string_view header;
  bool wide;
  std::string (*cell)(const api::Object& o, Now now);
};

std::string AgeCell(const api::Object& o, Now now) {
  return AgeSince(o.metadata.creation_timestamp, now);
}
std::string ReadyCell(const api::Object& o, Now /*now*/) {
  return ConditionCell(o, api::condition::kReady);
}
std::string ReasonCell(const api::Object& o, Now /*now*/) { return OrNone(ReadyReason(o)); }
std::string MessageCell(const api::Object& o, Now /*now*/) { return ReadyMessage(o); }

std::vector<Column> SandboxColumns() {
  using api::Object;
  return {{"READY", false, ReadyCell},
          {"STATE", false, [](const Object& o, Now) { return OrNone(o.sandbox_status().state); }},
          {"SANDBOX-ID", false,
           [](const Object& o, Now) { return OrNone(o.sandbox_spec().sandbox_id); }},
          {"AGE", false, AgeCell},
          {"POWER", true,
           [](const Object& o, Now) -> std::string {
             const api::Power power = o.sandbox_spec().power;
             return power == api::Power::kRunning   ? "Running"
                    : power == api::Power::kStopped ? "Stopped"
                                                    : "OnDemand";
           }},
          {"WORKSPACE", true, [](const Object& o, Now) { return o.sandbox_spec().workspace_ref; }},
          {"RUNNING", true,
           [](const Object& o, Now now) {
             return ComputeCell(api::RunningMillisAt(o.sandbox_status().usage, now));
           }},
          {"SYNCED", true,
           [](const Object& o, Now) { return ConditionCell(o, api::condition::kSynced); }},
          {"REASON", true, ReasonCell},
          {"MESSAGE", true, MessageCell}};
}

std::vector<Column> AgentWorkerColumns() {
  using api::Object;
  return {{"READY", false, ReadyCell},
          {"SANDBOX", false,
           [](const Object& o, Now) {
             const std::string& ref = o.agent_worker_spec().sandbox_ref;
             return !ref.empty() ? ref : o.metadata.name;
           }},
          {"SESSION", false,
           [](const Object& o, Now) { return OrNone(o.agent_worker_status().session_id); }},
          {"EXECUTOR", false, [](const Object& o, Now) { return ExecutorCell(o); }},
          {"AGE", false, AgeCell},
          {"RESTARTS", true,
           [](const Object& o, Now) {
             return std::to_string(o.agent_worker_status().executor.restarts);
           }},
          {"ENVIRONMENT", true,
           [](const Object& o, Now) { return OrNone(o.agent_worker_status().environment_id); }},
          {"REASON", true, ReasonCell},
          {"MESSAGE", true, MessageCell}};
}

std::vector<Column> AgentTaskColumns() {
  using api::Object;
  return {
      {"PHASE", false,
       [](const Object& o, Now) {
         return std::string(api::TaskPhaseName(o.agent_task_status().phase));
       }},
      {"WORKER", false,
       [](const Object& o, Now) {
         // Before a worker is picked, the one asked for (a selector picks one later), or the
         // pool.
         const auto& spec = o.agent_task_spec();
         const auto& status = o.agent_task_status();
         return OrNone(!status.worker.empty()   ? status.worker
                       : !spec.pool_ref.empty() ? "agentpool/" + spec.pool_ref
                                                : spec.worker_ref);
       }},
      {"AGE", false, AgeCell},
      {"DURATION", false,
       [](const Object& o, Now now) { return TaskDuration(o.agent_task_status(), now); }},
      {"COMMANDS", false,
       [](const Object& o, Now) { return std::to_string(o.agent_task_status().commands); }},
      {"ATTEMPTS", false,
       [](const Object& o, Now) {
         return AttemptsCell(o.agent_task_spec(), o.agent_task_status());
       }},
      {"RESULT", false, [](const Object& o, Now) { return ResultCell(o.agent_task_status()); }},
      {"QUEUE", true,
       [](const Object& o, Now) {
         const int64_t position = o.agent_task_status().queue_position;
         return position > 0 ? std::to_string(position) : "<none>";
       }},
      {"SESSION", true,
       [](const Object& o, Now) { return OrNone(o.agent_task_status().session_id); }},
      {"TURN", true, [](const Object& o, Now) { return OrNone(o.agent_task_status().turn_id); }},
      {"TOKENS", true,
       [](const Object& o, Now) { return TokensCell(o.agent_task_status().usage); }},
      {"COMPUTE", true,
       [](const Object& o, Now) {
         return ComputeCell(o.agent_task_status().usage.compute_millis);
       }},
      {"COST", true,
       [](const Object& o, Now) { return OrNone(o.agent_task_status().usage.cost); }}};
}

std::vector<Column> WorkspaceColumns() {
  using api::Object;
  return {
      {"READY", false, ReadyCell},
      {"HOST", false,
       [](const Object& o, Now) { return OrNone(o.workspace_spec().databricks.host); }},
      {"AGE", false, AgeCell},
      {"PROFILE", true,
       [](const Object& o, Now) { return OrNone(o.workspace_spec().databricks.profile); }},
      {"REASON", true, ReasonCell},
      {"MESSAGE", true, MessageCell},
      {"PERIOD", true,
       [](const Object& o, Now) { return OrNone(o.workspace_status().usage.period); }},
      {"TOKENS", true,
       [](const Object& o, Now) {
         const api::WorkspaceUsage& u = o.workspace_status().usage;
         return std::to_string(u.input_tokens + u.output_tokens);
       }},
      {"COMPUTE", true,
       [](const Object& o, Now) { return ComputeCell(o.workspace_status().usage.compute_millis); }},
      {"COST", true, [](const Object& o, Now) { return OrNone(o.workspace_status().usage.cost); }},
      {"BUDGET", true, [](const Object& o, Now) -> std::string {
         const api::Condition* budget =
             api::FindCondition(o.conditions(), api::condition::kBudgetExceeded);
         return budget == nullptr                               ? "<none>"
                : budget->status == api::ConditionStatus::kTrue ? "Exceeded"
                                                                : "Within";
       }}};
}

std::vector<Column> GitSourceColumns() {
  using api::Object;
  return {
      {"URL", false, [](const Object& o, Now) { return o.git_source_spec().url; }},
      {"REF", false,
       [](const Object& o, Now) {
         const auto& ref = o.git_source_spec().ref;
         return !ref.branch.empty() ? ref.branch
                : !ref.tag.empty()  ? "tag:" + ref.tag
                                    : ref.commit.substr(0, 12);
       }},
      {"REVISION", false,
       [](const Object& o, Now) { return OrNone(o.git_source_status().revision.substr(0, 12)); }},
      {"READY", false, ReadyCell},
      {"AGE", false, AgeCell},
      {"PATH", true, [](const Object& o, Now) { return o.git_source_spec().path; }},
      {"OBJECTS", true,
       [](const Object& o, Now) { return std::to_string(o.git_source_status().objects); }},
      {"REASON", true, ReasonCell},
      {"MESSAGE", true, MessageCell}};
}

std::vector<Column> AgentPoolColumns() {
  using api::Object;
  return {
      {"READY", false,
       [](const Object& o, Now) {
         const auto& status = o.agent_pool_status();
         return std::to_string(status.ready) + "/" + std::to_string(status.replicas);
       }},
      {"BUSY", false,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_status().busy); }},
      {"IDLE", false,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_status().idle); }},
      {"QUEUED", false,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_status().queued); }},
      {"MIN", false,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_spec().replicas.min); }},
      {"MAX", false,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_spec().replicas.max); }},
      {"AGE", false, AgeCell},
      {"SLEEPING", true,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_status().sleeping); }},
      {"UPDATED", true,
       [](const Object& o, Now) { return std::to_string(o.agent_pool_status().updated_replicas); }},
      {"SESSION", true,
       [](const Object& o, Now) -> std::string {
         return o.agent_pool_spec().session == api::SessionMode::kShared ? "Shared" : "PerTask";
       }},
      {"REASON", true, ReasonCell},
      {"MESSAGE", true, MessageCell}};
}

std::vector<Column> NotifierColumns() {
  using api::Object;
  return {{"TYPE", false,
           [](const Object& o, Now) {
             return std::string(api::NotifierTypeName(o.notifier_spec().type));
           }},
          {"READY", false, ReadyCell},
          {"SUSPEND", false,
           [](const Object& o, Now) -> std::string {
             return o.notifier_spec().suspend ? "True" : "False";
           }},
          {"EVENTS", false,
           [](const Object& o, Now) { return std::to_string(o.notifier_spec().events.size()); }},
          {"PENDING", false,
           [](const Object& o, Now) { return std::to_string(o.notifier_status().pending); }},
          {"DELIVERED", false,
           [](const Object& o, Now) { return std::to_string(o.notifier_status().delivered); }},
          {"AGE", false, AgeCell},
          {"DROPPED", true,
           [](const Object& o, Now) { return std::to_string(o.notifier_status().dropped); }},
          {"LAST-DELIVERED", true,
           [](const Object& o, Now now) -> std::string {
             const std::string& at = o.notifier_status().last_delivered_at;
             return at.empty() ? "<none>" : AgeSince(at, now) + " ago";
           }},
          {"SELECTOR", true,
           [](const Object& o, Now) { return SelectorCell(o.notifier_spec().selector); }},
          {"REASON", true, ReasonCell},
          {"MESSAGE", true, MessageCell}};
}

// Every kind's columns, the plain ones first: one table serves the headers and the rows, so the
// two cannot disagree, and a new kind is a row here (a test checks that every kind has one).
const std::map<api::Kind, std::vector<Column>>& KindColumns() {
  static const auto* const kColumns = new std::map<api::Kind, std::vector<Column>>{
      {api::Kind::kSandbox, SandboxColumns()},     {api::Kind::kAgentWorker, AgentWorkerColumns()},
      {api::Kind::kAgentTask, AgentTaskColumns()}, {api::Kind::kWorkspace, WorkspaceColumns()},
      {api::Kind::kGitSource, GitSourceColumns()}, {api::Kind::kAgentPool, AgentPoolColumns()},
      {api::Kind::kNotifier, NotifierColumns()},
  };
  return *kColumns;
}

const std::vector<Column>& ColumnsOf(api::Kind kind) {
  static const std::vector<Column> kNone;
  auto it = KindColumns().find(kind);
  return it == KindColumns().end() ? kNone : it->second;
}

}  // namespace

bool HasTableColumns(api::Kind kind) { return !ColumnsOf(kind).empty(); }

std::vector<std::string> TableHeaders(api::Kind kind, bool wide, bool with_namespace) {
  std::vector<std::string> h;
  if (with_namespace) {
    h.emplace_back("NAMESPACE");
  }
  h.emplace_back("NAME");
  for (const Column& c : ColumnsOf(kind)) {
    if (wide || !c.wide) {
      h.emplace_back(c.header);
    }
  }
  return h;
}

std::vector<std::string> TableRow(const api::Object& o, bool wide, bool with_namespace,
                                  std::chrono::system_clock::time_point now) {
  std::vector<std::string> r;
  if (with_namespace) {
    r.push_back(o.metadata.namespace_);
  }
  r.push_back(o.metadata.name);
  for (const Column& c : ColumnsOf(o.kind)) {
    if (wide || !c.wide) {
      r.push_back(c.cell(o, now));
    }
  }
  return r;
}

std::string JsonList(const std::vector<std::string>& encoded_objects) {
  std::string out = "{\n    \"apiVersion\": \"v1\",\n    \"items\": [";
  for (size_t i = 0; i < encoded_objects.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    std::istringstream lines(encoded_objects[i]);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      if (!first) {
        out += "\n";
      }
      out += "        " + line;
      first = false;
    }
  }
  out += encoded_objects.empty() ? "],\n" : "\n    ],\n";
  out += "    \"kind\": \"List\"\n}\n";
  return out;
}

api::Status PrintObjects(std::ostream& out, const std::vector<api::Object>& objects,
                         const OutputSpec& spec, bool single, bool with_namespace,
                         std::chrono::system_clock::time_point now) {
  const auto encode_json = [&] {
    if (single && objects.size() == 1) {
      return api::EncodeObjectJson(objects[0], /*pretty=*/true);
    }
    std::vector<std::string> encoded;
    encoded.reserve(objects.size());
    for (const api::Object& o : objects) {
      encoded.push_back(api::EncodeObjectJson(o, /*pretty=*/true));
    }
    return JsonList(encoded);
  };
  switch (spec.format) {
    case OutputFormat::kName:
      for (const api::Object& o : objects) {
        out << QualifiedName(api::KeyOf(o)) << "\n";
      }
      return api::OkStatus();
    case OutputFormat::kYaml:
      for (size_t i = 0; i < objects.size(); ++i) {
        if (i > 0) {
          out << "---\n";
        }
        std::string yaml = api::EncodeObjectYaml(objects[i]);
        if (!yaml.empty() && yaml.back() != '\n') {
          yaml += "\n";
        }
        out << yaml;
      }
      return api::OkStatus();
    case OutputFormat::kJson: {
      std::string json = encode_json();
      if (!json.empty() && json.back() != '\n') {
        json += "\n";
      }
      out << json;
      return api::OkStatus();
    }
    case OutputFormat::kJsonPath: {
      // As kubectl: the template sees the object of a named get, else the List; no newline is
      // added (the template says where lines end).
      const auto document = JsonDocument::Parse(encode_json());
      ASSIGN_OR_RETURN(std::string text,
                       spec.jsonpath->Execute(*document, spec.allow_missing_keys));
      out << text;
      return api::OkStatus();
    }
    case OutputFormat::kCustomColumns: {
      TablePrinter table(TableHeaders(spec, api::Kind::kSandbox, with_namespace));
      for (const api::Object& o : objects) {
        table.AddRow(TableRow(spec, o, with_namespace, now));
      }
      table.Print(out, !spec.no_headers);
      return api::OkStatus();
    }
    case OutputFormat::kTable:
    case OutputFormat::kWide: {
      std::map<api::Kind, std::vector<const api::Object*>> by_kind;
      for (const api::Object& o : objects) {
        by_kind[o.kind].push_back(&o);
      }
      const bool several_kinds = by_kind.size() > 1;
      bool first = true;
      for (const auto& [kind, list] : by_kind) {
        if (!first) {
          out << "\n";
        }
        first = false;
        TablePrinter table(TableHeaders(spec, kind, with_namespace));
        for (const api::Object* o : list) {
          std::vector<std::string> row = TableRow(spec, *o, with_namespace, now);
          if (several_kinds) {
            row[with_namespace ? 1 : 0] = QualifiedName(api::KeyOf(*o));
          }
          table.AddRow(std::move(row));
        }
        table.Print(out, !spec.no_headers);
      }
      return api::OkStatus();
    }
  }
  return api::OkStatus();
}

std::string YamlBlock(std::string_view yaml, std::string_view key) {
  std::string out;
  bool inside = false;
  size_t start = 0;
  while (start < yaml.size()) {
    size_t nl = yaml.find('\n', start);
    if (nl == std::string_view::npos) {
      nl = yaml.size();
    }
    const std::string_view line = yaml.substr(start, nl - start);
    start = nl + 1;
    const bool top_level = !line.empty() && line.front() != ' ' && line.front() != '-';
    if (top_level) {
      if (inside) {
        break;
      }
      inside =
          line.substr(0, key.size()) == key && line.size() > key.size() && line[key.size()] == ':';
      if (inside && line.size() > key.size() + 1) {
        // Inline value such as "spec: {}".
        out += "  ";
        out += line.substr(key.size() + 1);
        out += "\n";
      }
      continue;
    }
    if (inside) {
      out += line;
      out += "\n";
    }
  }
  return out;
}

}  // namespace sbx::cli
