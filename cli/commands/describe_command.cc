#include "cli/commands/describe_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "api/codec.h"
#include "api/conditions.h"
#include "api/usage.h"
#include "cli/commands/object_printer.h"
#include "cli/commands/table_printer.h"
#include "cli/commands/terminal_text.h"

namespace sbx::cli {
namespace {

constexpr int kLabelWidth = 20;

// One `Label:   value` line; the value is escaped (newlines too) to stay on its line.
void Field(std::ostream& out, std::string_view label, std::string_view value, int indent = 0) {
  std::string line(static_cast<size_t>(indent), ' ');
  line += label;
  line += ":";
  const size_t pad = kLabelWidth > static_cast<int>(line.size())
                         ? static_cast<size_t>(kLabelWidth) - line.size()
                         : 1;
  line.append(pad, ' ');
  line += value.empty() ? "<none>" : EscapeTerminalText(value, TerminalLayout::kSingleLine);
  out << line << "\n";
}

void MapField(std::ostream& out, std::string_view label,
              const std::map<std::string, std::string>& values) {
  if (values.empty()) {
    Field(out, label, "<none>");
    return;
  }
  bool first = true;
  for (const auto& [k, v] : values) {
    std::string pair = k;
    pair.append("=").append(v);
    if (first) {
      Field(out, label, pair);
      first = false;
    } else {
      out << std::string(kLabelWidth, ' ') << EscapeTerminalText(pair, TerminalLayout::kSingleLine)
          << "\n";
    }
  }
}

// The lines of `block`, indented, with control characters other than newline and tab escaped.
void Indented(std::ostream& out, std::string_view text, int indent) {
  const std::string escaped = EscapeTerminalText(text, TerminalLayout::kMultiLine);
  const std::string_view block = escaped;
  size_t start = 0;
  while (start < block.size()) {
    size_t nl = block.find('\n', start);
    if (nl == std::string_view::npos) {
      nl = block.size();
    }
    out << std::string(static_cast<size_t>(indent), ' ') << block.substr(start, nl - start) << "\n";
    start = nl + 1;
  }
}

// What a user asks of a task: where it ran, when, what it answered, what it cost, what it
// collected.
void AgentTaskFields(std::ostream& out, const api::Object& o,
                     std::chrono::system_clock::time_point now) {
  const auto& s = o.agent_task_status();
  Field(out, "Phase", std::string(api::TaskPhaseName(s.phase)), 2);
  Field(out, "Worker", s.worker, 2);
  if (s.queue_position > 0) {
    Field(out, "Queue Position", std::to_string(s.queue_position), 2);
  }
  Field(out, "Session ID", s.session_id, 2);
  Field(out, "Turn ID", s.turn_id, 2);
  Field(out, "Submitted At", s.submitted_at, 2);
  Field(out, "Started At", s.started_at, 2);
  Field(out, "Completed At", s.completed_at, 2);
  Field(out, "Duration", TaskDuration(s, now), 2);
  const auto cancel = o.metadata.annotations.find(std::string(api::kCancelRequestedAnnotation));
  if (cancel != o.metadata.annotations.end()) {
    Field(out, "Cancel Requested", cancel->second, 2);
  }
  if (!s.cancel_requested_at.empty()) {
    Field(out, "Cancel Sent",
          s.cancel_requested_at + (s.cancel_reason.empty() ? "" : " (" + s.cancel_reason + ")"), 2);
  }
  Field(out, "Commands", std::to_string(s.commands), 2);
  out << "  Result:\n";
  if (s.result.message.empty()) {
    out << "    <none>\n";
  } else {
    Indented(out, s.result.message, 4);
  }
  const api::TaskError& error = s.result.error;
  Field(out, "Error",
        error.code + (error.code.empty() || error.message.empty() ? "" : ": ") + error.message, 2);
  const api::TaskUsageTotals& usage = s.usage;
  Field(out, "Usage",
        "input " + std::to_string(usage.input_tokens) + " (cached " +
            std::to_string(usage.cached_input_tokens) + "), output " +
            std::to_string(usage.output_tokens) + " (reasoning " +
            std::to_string(usage.reasoning_tokens) + ") tokens, compute " +
            api::FormatSeconds(usage.compute_millis) + "s, all attempts" +
            (usage.cost.empty() ? "" : ", cost " + usage.cost),
        2);
  out << "  Artifacts:\n";
  if (s.artifacts.empty()) {
    out << "    <none>\n";
  } else {
    TablePrinter t({"    PATH", "BYTES", "SHA256 / ERROR"});
    for (const api::ArtifactStatus& a : s.artifacts) {
      t.AddRow({"    " + a.path, a.error.empty() ? std::to_string(a.bytes) : "-",
                a.error.empty() ? a.sha256 : "error: " + a.error});
    }
    t.Print(out);
  }
  if (!s.attempts.empty() || o.agent_task_spec().backoff_limit > 0) {
    out << "  Attempts:";
    if (o.agent_task_spec().backoff_limit > 0) {
      out << " (backoffLimit " << o.agent_task_spec().backoff_limit << ")";
    }
    out << "\n";
    if (s.attempts.empty()) {
      out << "    <none>\n";
    } else {
      TablePrinter t({"    #", "WORKER", "TURN", "PHASE", "STARTED", "COMPLETED", "ERROR"});
      auto or_none = [](const std::string& v) { return v.empty() ? "<none>" : v; };
      for (const api::TaskAttempt& a : s.attempts) {
        t.AddRow({"    " + std::to_string(a.attempt), or_none(a.worker), or_none(a.turn_id),
                  std::string(api::TaskPhaseName(a.phase)), or_none(a.started_at),
                  or_none(a.completed_at),
                  or_none(a.error.code + (a.error.message.empty() ? "" : ": " + a.error.message))});
      }
      t.Print(out);
    }
    if (!s.next_attempt_at.empty()) {
      Field(out, "Next Attempt At", s.next_attempt_at, 2);
    }
  }
  Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
}

// An AgentPool's replicas (with the task each runs) and its queued tasks, oldest first.
void PoolMembers(std::ostream& out, const Related& related,
                 std::chrono::system_clock::time_point now) {
  out << "Replicas:\n";
  if (related.replicas.empty()) {
    out << "  <none>\n";
  } else {
    std::map<std::string, std::string> task_of;  // uid → name
    for (const api::Object& t : related.queued) {
      task_of[t.metadata.uid] = t.metadata.name;
    }
    TablePrinter t({"  NAME", "READY", "TASK", "AGE"});
    for (const api::Object& r : related.replicas) {
      auto bound = r.metadata.annotations.find(std::string(api::kBoundTaskAnnotation));
      std::string task = "<none>";
      if (bound != r.metadata.annotations.end()) {
        auto name = task_of.find(bound->second);
        task = name != task_of.end() ? name->second : bound->second;  // or "retiring"
      }
      t.AddRow({"  " + r.metadata.name, ConditionCell(r, api::condition::kReady), task,
                AgeSince(r.metadata.creation_timestamp, now)});
    }
    t.Print(out);
  }
  out << "Queued Tasks:\n";
  std::vector<const api::Object*> waiting;
  for (const api::Object& t : related.queued) {
    if (t.agent_task_status().worker.empty()) {
      waiting.push_back(&t);
    }
  }
  if (waiting.empty()) {
    out << "  <none>\n";
    return;
  }
  TablePrinter t({"  NAME", "AHEAD", "AGE"});
  for (const api::Object* task : waiting) {
    t.AddRow({"  " + task->metadata.name, std::to_string(task->agent_task_status().queue_position),
              AgeSince(task->metadata.creation_timestamp, now)});
  }
  t.Print(out);
}

void StatusFields(std::ostream& out, const api::Object& o,
                  std::chrono::system_clock::time_point now) {
  switch (o.kind) {
    case api::Kind::kSandbox: {
      const auto& s = o.sandbox_status();
      Field(out, "Sandbox Name", s.sandbox_name, 2);
      Field(out, "State", s.state, 2);
      Field(out, "Create Time", s.create_time, 2);
      Field(out, "Boot ID", s.boot_id, 2);
      Field(out, "Running",
            api::FormatSeconds(api::RunningMillisAt(s.usage, now)) + "s RUNNING since created" +
                (s.usage.running_since.empty() ? ""
                                               : " (running since " + s.usage.running_since + ")"),
            2);
      Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
      for (const api::SetupResult& r : s.setup) {
        Field(out, "Setup " + r.name,
              (r.succeeded ? "Succeeded" : "Failed (exit " + std::to_string(r.exit_code) + ")") +
                  (r.message.empty() ? "" : ": " + r.message),
              2);
      }
      break;
    }
    case api::Kind::kAgentWorker: {
      const auto& s = o.agent_worker_status();
      Field(out, "Session ID", s.session_id, 2);
      Field(out, "Environment ID", s.environment_id, 2);
      Field(out, "Environment", s.environment_status, 2);
      Field(out, "Remote URL", s.remote_url, 2);
      Field(out, "Executor PID", s.executor.pid == 0 ? "" : std::to_string(s.executor.pid), 2);
      Field(out, "Launched At", s.executor.launched_at, 2);
      Field(out, "Restarts", std::to_string(s.executor.restarts), 2);
      Field(out, "Last Exit", s.executor.last_exit_reason, 2);
      Field(out, "Last Probe", s.executor.last_probe_at, 2);
      Field(out, "Next Launch", s.executor.next_launch_after, 2);
      Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
      break;
    }
    case api::Kind::kWorkspace: {
      const api::WorkspaceUsage& u = o.workspace_status().usage;
      Field(out, "Observed Gen", std::to_string(o.workspace_status().observed_generation), 2);
      if (!u.period.empty()) {
        Field(out, "Usage",
              u.period + ": " + std::to_string(u.tasks) + " task(s), input " +
                  std::to_string(u.input_tokens) + " (cached " +
                  std::to_string(u.cached_input_tokens) + "), output " +
                  std::to_string(u.output_tokens) + " (reasoning " +
                  std::to_string(u.reasoning_tokens) + ") tokens, compute " +
                  api::FormatSeconds(u.compute_millis) + "s" +
                  (u.cost.empty() ? "" : ", cost " + u.cost),
              2);
      }
      break;
    }
    case api::Kind::kAgentTask:
      AgentTaskFields(out, o, now);
      break;
    case api::Kind::kGitSource: {
      const auto& s = o.git_source_status();
      Field(out, "Revision", s.revision, 2);
      Field(out, "Last Applied", s.last_applied_at, 2);
      Field(out, "Objects", std::to_string(s.objects), 2);
      Field(out, "Last Attempt", s.last_attempt_at, 2);
      Field(out, "Attempted Rev", s.last_attempted_revision, 2);
      Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
      break;
    }
    case api::Kind::kAgentPool: {
      const auto& s = o.agent_pool_status();
      Field(out, "Replicas",
            std::to_string(s.replicas) + " (" + std::to_string(s.ready) + " ready, " +
                std::to_string(s.busy) + " busy, " + std::to_string(s.idle) + " idle, " +
                std::to_string(s.sleeping) + " sleeping)",
            2);
      Field(out, "Updated", std::to_string(s.updated_replicas), 2);
      Field(out, "Queued Tasks", std::to_string(s.queued), 2);
      Field(out, "Template Hash", s.template_hash, 2);
      Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
      break;
    }
    case api::Kind::kNotifier: {
      const auto& s = o.notifier_status();
      Field(out, "Pending", std::to_string(s.pending), 2);
      Field(out, "Delivered", std::to_string(s.delivered), 2);
      Field(out, "Dropped", std::to_string(s.dropped), 2);
      Field(out, "Last Delivered",
            s.last_delivered_at.empty()
                ? ""
                : s.last_delivered_at + " (" + AgeSince(s.last_delivered_at, now) + " ago)",
            2);
      Field(out, "Last Error", s.last_error, 2);
      Field(out, "Observed Gen", std::to_string(s.observed_generation), 2);
      break;
    }
  }
}

}  // namespace

void Describe(std::ostream& out, const api::Object& o,
              const std::vector<controller::Store::Event>& events,
              std::chrono::system_clock::time_point now, const Related& related) {
  Field(out, "Name", o.metadata.name);
  Field(out, "Namespace", o.metadata.namespace_);
  Field(out, "Kind", api::KindName(o.kind));
  MapField(out, "Labels", o.metadata.labels);
  MapField(out, "Annotations", o.metadata.annotations);
  Field(out, "UID", o.metadata.uid);
  Field(out, "Generation", std::to_string(o.metadata.generation));
  Field(out, "Resource Version", std::to_string(o.metadata.resource_version));
  Field(out, "Created",
        o.metadata.creation_timestamp.empty()
            ? ""
            : o.metadata.creation_timestamp + " (" + AgeSince(o.metadata.creation_timestamp, now) +
                  " ago)");
  if (!o.metadata.deletion_timestamp.empty()) {
    Field(out, "Deleting Since", o.metadata.deletion_timestamp);
  }
  std::string finalizers;
  for (const std::string& f : o.metadata.finalizers) {
    finalizers += (finalizers.empty() ? "" : ", ") + f;
  }
  Field(out, "Finalizers", finalizers);
  std::string owners;
  for (const api::OwnerReference& r : o.metadata.owner_references) {
    owners += (owners.empty() ? "" : ", ") + TypeName(r.kind) + "/" + r.name;
  }
  Field(out, "Controlled By", owners);

  out << "Spec:\n";
  const std::string spec = YamlBlock(api::EncodeObjectYaml(o), "spec");
  if (spec.empty()) {
    out << "  <none>\n";
  } else {
    Indented(out, spec, 0);
  }
  out << "Status:\n";
  StatusFields(out, o, now);
  if (o.kind == api::Kind::kAgentPool) {
    PoolMembers(out, related, now);
  }

  out << "Conditions:\n";
  if (o.conditions().empty()) {
    out << "  <none>\n";
  } else {
    TablePrinter t({"  TYPE", "STATUS", "REASON", "MESSAGE", "LAST TRANSITION"});
    for (const api::Condition& c : o.conditions()) {
      std::string when = c.last_transition_time;
      if (!when.empty()) {
        when += " (" + AgeSince(c.last_transition_time, now) + " ago)";
      }
      t.AddRow({"  " + c.type, std::string(api::ConditionStatusName(c.status)), c.reason, c.message,
                when});
    }
    t.Print(out);
  }

  out << "Events:\n";
  if (events.empty()) {
    out << "  <none>\n";
  } else {
    TablePrinter t({"  TYPE", "REASON", "AGE", "MESSAGE"});
    for (const controller::Store::Event& e : events) {
      std::string age = AgeSince(e.last_seen, now);
      if (e.count > 1) {
        age += " (x" + std::to_string(e.count) + " over " + AgeSince(e.first_seen, now) + ")";
      }
      t.AddRow({"  " + e.type, e.reason, age, e.message});
    }
    t.Print(out);
  }
}

namespace {

// An AgentPool's replicas and its unfinished tasks (sorted by creation); nothing for other kinds.
api::StatusOr<Related> RelatedTo(controller::Store& store, const api::Object& o) {
  Related related;
  if (o.kind != api::Kind::kAgentPool) {
    return related;
  }
  controller::ListOptions list;
  list.namespace_ = o.metadata.namespace_;
  list.kind = api::Kind::kAgentWorker;
  list.label_selector = {{std::string(api::kPoolLabel), o.metadata.name}};
  ASSIGN_OR_RETURN(related.replicas, store.List(list));
  list.kind = api::Kind::kAgentTask;
  list.label_selector.clear();
  ASSIGN_OR_RETURN(std::vector<api::Object> tasks, store.List(list));
  for (api::Object& t : tasks) {
    if (t.agent_task_spec().pool_ref == o.metadata.name &&
        !api::IsFinished(t.agent_task_status().phase)) {
      related.queued.push_back(std::move(t));
    }
  }
  std::sort(related.queued.begin(), related.queued.end(),
            [](const api::Object& a, const api::Object& b) {
              return std::tie(a.metadata.creation_timestamp, a.metadata.name) <
                     std::tie(b.metadata.creation_timestamp, b.metadata.name);
            });
  return related;
}

}  // namespace

int RunDescribe(CommandContext& ctx, const DescribeCommandOptions& options) {
  if (options.args.empty()) {
    return ctx.Fail(
        api::InvalidArgumentError("you must specify the type of resource to "
                                  "describe"));
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  std::vector<api::Object> objects;
  bool not_found = false;
  if (options.args.size() == 1 && options.args[0].find('/') == std::string::npos) {
    auto kind = api::ParseKind(options.args[0]);
    if (!kind.ok()) {
      return ctx.Fail(kind.status());
    }
    controller::ListOptions list;
    list.kind = *kind;
    list.namespace_ = ctx.ListNamespace();
    auto listed = (*store)->List(list);
    if (!listed.ok()) {
      return ctx.Fail(listed.status());
    }
    objects = std::move(listed).value();
    if (objects.empty()) {
      ctx.err() << (list.namespace_ ? "No resources found in " + *list.namespace_ + " namespace."
                                    : std::string("No resources found"))
                << "\n";
      return kExitOk;
    }
  } else {
    auto keys = ResolveTargets(options.args, ctx.options().namespace_);
    if (!keys.ok()) {
      return ctx.Fail(keys.status());
    }
    for (const api::ObjectKey& key : *keys) {
      auto got = (*store)->Get(key);
      if (got.ok()) {
        objects.push_back(std::move(got).value());
      } else if (got.status().code() == api::StatusCode::kNotFound) {
        ctx.err() << NotFoundMessage(key) << "\n";
        not_found = true;
      } else {
        return ctx.Fail(got.status());
      }
    }
  }
  bool first = true;
  for (const api::Object& o : objects) {
    auto events = (*store)->ListEvents(api::KeyOf(o));
    if (!events.ok()) {
      return ctx.Fail(events.status());
    }
    if (!first) {
      ctx.out() << "\n\n";
    }
    first = false;
    auto related = RelatedTo(**store, o);
    if (!related.ok()) {
      return ctx.Fail(related.status());
    }
    Describe(ctx.out(), o, *events, ctx.clock().Now(), *related);
  }
  return ctx.exit_code = not_found ? kExitError : kExitOk;
}

void AddDescribeCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<DescribeCommandOptions>();
  CLI::App* sub = app.add_subcommand("describe", "Show details of objects and their events");
  sub->add_option("args", options->args, "KIND [NAME…] or KIND/NAME…");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunDescribe(ctx, *options); }; });
}

}  // namespace sbx::cli
