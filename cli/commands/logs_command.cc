#include "cli/commands/logs_command.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/commands/object_update.h"
#include "cli/commands/task_log_printer.h"
#include "cli/commands/terminal_text.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http_cloud_clients.h"

namespace sbx::cli {
namespace {

namespace databricks = controller::databricks;

// Prints the log's size in bytes and its inode on the first line, then (a consistent prefix of)
// the log:
// the last N lines (or all), at most CAP bytes. $1 log, $2 N or "all", $3 CAP.
constexpr char kReadScript[] = R"sh(f=$1; n=$2; cap=$3
if [ ! -f "$f" ]; then echo "no executor log at $f (has the executor been launched?)" >&2; exit 3; fi
set -- "$f" "$n" "$cap" $(stat -c '%s %i' "$f"); size=$4
echo "$size $5"
if [ "$n" = all ]; then head -c "$size" "$f" | tail -c "$cap"
else head -c "$size" "$f" | tail -n "$n" | tail -c "$cap"; fi
)sh";

// Prints the log's size and inode on the first line, then the bytes after OFFSET (at most CAP
// of them) — from the start when the log is another file than INODE or shorter than OFFSET
// (a relaunch moved it to log.1 and began a new one). A missing log is empty.
// $1 log, $2 OFFSET, $3 CAP, $4 INODE.
constexpr char kFollowScript[] = R"sh(f=$1; off=$2; cap=$3; ino=$4
set -- $(stat -c '%s %i' "$f" 2>/dev/null || echo 0 0); size=$1
echo "$size $2"
if [ "$2" != "$ino" ] || [ "$size" -lt "$off" ]; then off=0; fi
n=$((size - off)); if [ "$n" -gt "$cap" ]; then n=$cap; fi
if [ "$n" -gt 0 ]; then tail -c +"$((off + 1))" "$f" | head -c "$n"; fi
)sh";

api::StatusOr<api::ObjectKey> LogsTarget(const std::string& target, const std::string& ns) {
  if (target.find('/') == std::string::npos) {
    return api::ObjectKey{api::Kind::kAgentWorker, ns, target};
  }
  ASSIGN_OR_RETURN(KindAndName kn, ParseKindAndName(target));
  if (kn.kind != api::Kind::kAgentWorker && kn.kind != api::Kind::kAgentTask) {
    return api::InvalidArgumentError(
        "logs prints the executor log of agent workers and the log of agent tasks; \"" + target +
        "\" is not an agentworker or an agenttask");
  }
  return api::ObjectKey{kn.kind, ns, kn.name};
}

struct Chunk {
  size_t size = 0;    // the log's size when read
  std::string inode;  // which file it was (a relaunch starts a new one)
  std::string bytes;  // what was printed from it
};

api::StatusOr<Chunk> ReadLog(databricks::SandboxApi& api, const std::string& sandbox_id,
                             const char* script, std::vector<std::string> args) {
  databricks::ExecRequest request;
  request.cmd = "/bin/bash";
  request.args = {"-c", script, "sbx-logs"};
  request.args.insert(request.args.end(), args.begin(), args.end());
  request.execution_timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(databricks::ExecResult r, api.ExecSync(sandbox_id, request));
  if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
    std::string why = r.stderr_text;
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) {
      why.pop_back();
    }
    return api::UnavailableError(why.empty() ? "reading the log failed (exit " +
                                                   std::to_string(r.exit_code.value_or(-1)) + ")"
                                             : why);
  }
  const size_t nl = r.stdout_text.find('\n');
  if (nl == std::string::npos) {
    return api::InternalError("unexpected answer from the sandbox: " + r.stdout_text);
  }
  Chunk c;
  std::istringstream header(r.stdout_text.substr(0, nl));
  header >> c.size >> c.inode;
  c.bytes = r.stdout_text.substr(nl + 1);
  return c;
}

// Sleeps `d` in small steps; false when interrupted.
bool SleepUnlessInterrupted(CommandContext& ctx, std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (ctx.interrupted()) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !ctx.interrupted();
}

// `logs agenttask/NAME [-f]`: the task's log from the store (task_log_printer.h).
int RunTaskLogs(CommandContext& ctx, const api::ObjectKey& key, const LogsCommandOptions& options) {
  if (options.tail != -1) {
    return ctx.Fail(api::InvalidArgumentError("--tail applies to agentworker logs only"));
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  TaskLogOptions print;
  print.follow = options.follow;
  auto task = PrintTaskLog(ctx, **store, key, print);
  if (!task.ok() && task.status().code() != api::StatusCode::kCancelled) {
    return FailUpdate(ctx, task.status());  // NotFound in kubectl's words
  }
  return kExitOk;  // also when interrupted, as `logs -f` of a worker
}

}  // namespace

int RunLogs(CommandContext& ctx, const LogsCommandOptions& options) {
  auto key = LogsTarget(options.target, ctx.options().namespace_);
  if (!key.ok()) {
    return ctx.Fail(key.status());
  }
  if (key->kind == api::Kind::kAgentTask) {
    return RunTaskLogs(ctx, *key, options);
  }
  if (options.tail < -1) {
    return ctx.Fail(api::InvalidArgumentError("--tail must be a number of lines (or -1 for all)"));
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto worker = (*store)->Get(*key);
  if (!worker.ok()) {
    return ctx.Fail(worker.status());
  }
  const api::AgentWorkerSpec& spec = worker->agent_worker_spec();
  const api::ObjectKey sandbox_key{api::Kind::kSandbox, key->namespace_,
                                   spec.sandbox ? key->name : spec.sandbox_ref};
  auto sandbox = (*store)->Get(sandbox_key);
  if (!sandbox.ok()) {
    return ctx.Fail(sandbox.status());
  }
  const std::string& state = sandbox->sandbox_status().state;
  if (state != "RUNNING") {
    ctx.PrintError("sandbox " + sandbox_key.name + " of " + QualifiedName(*key) +
                   " is not running (state " + (state.empty() ? "unknown" : state) +
                   "); the executor log can only be read from a running sandbox");
    return kExitError;
  }
  const std::string& sandbox_id = sandbox->sandbox_spec().sandbox_id;

  std::unique_ptr<controller::http::HttpTransport> transport =
      controller::http::MakeCppRestTransport();
  std::unique_ptr<controller::http::StreamingTransport> streaming =
      controller::http::MakeCppRestStreamingTransport();
  controller::HttpCloudClientsOptions cloud_options;
  cloud_options.secrets = controller::SecretPolicyFromEnvironment(databricks::ProcessEnv());
  controller::HttpCloudClients clouds(**store, ctx.clock(), *transport, *streaming,
                                      databricks::ProcessEnv(), cloud_options);
  auto api = clouds.Sandboxes(key->namespace_, sandbox->sandbox_spec().workspace_ref);
  if (!api.ok()) {
    return ctx.Fail(api.status());
  }
  const std::string log = "/home/sandbox-agent/.sbx/" + key->name + "/log";
  const std::string cap = std::to_string(kLogsMaxBytes);

  auto first = ReadLog(**api, sandbox_id, kReadScript,
                       {log, options.tail < 0 ? "all" : std::to_string(options.tail), cap});
  if (!first.ok()) {
    ctx.PrintError("logs of " + QualifiedName(*key) + " in sandbox " + sandbox_id + ": " +
                   first.status().message());
    return kExitError;
  }
  // The executor's bytes: unchanged into a pipe or file, escaped on a terminal.
  ProgramOutput output(ctx.out(), ctx.out_is_terminal());
  output.Write(first->bytes);
  if (!options.follow) {
    output.Finish();
    return kExitOk;
  }

  size_t offset = first->size;
  std::string inode = first->inode;
  std::string last_error;
  while (SleepUnlessInterrupted(ctx, options.poll_interval)) {
    auto next =
        ReadLog(**api, sandbox_id, kFollowScript, {log, std::to_string(offset), cap, inode});
    if (!next.ok()) {
      // The sandbox may be stopping or restarting: say so once and keep following.
      if (next.status().message() != last_error) {
        last_error = next.status().message();
        ctx.PrintError("reading the log: " + last_error + " (still following)");
      }
      continue;
    }
    last_error.clear();
    if (next->inode != inode || next->size < offset) {
      offset = 0;  // rotated: the executor was relaunched, the new log starts afresh
      inode = next->inode;
    }
    output.Write(next->bytes);
    offset += next->bytes.size();
  }
  output.Finish();
  return kExitOk;
}

void AddLogsCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<LogsCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "logs",
      "Print the executor log of an agent worker (logs agentworker/NAME [--tail N] [-f]) or the "
      "log of an agent task's turn (logs agenttask/NAME [-f])");
  sub->add_option("target", options->target, "agentworker/NAME (or NAME), or agenttask/NAME")
      ->required();
  sub->add_option("--tail", options->tail, "lines of the end of the log to show (-1: all)")
      ->capture_default_str();
  sub->add_flag("-f,--follow", options->follow,
                "keep printing what is appended (an agent task: until it finishes)");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunLogs(ctx, *options); }; });
}

}  // namespace sbx::cli
