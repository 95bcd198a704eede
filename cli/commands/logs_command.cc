#include "cli/commands/logs_command.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>
#include <stop_token>
#include <thread>

#include "cli/commands/object_update.h"
#include "cli/commands/task_log_printer.h"
#include "cli/commands/terminal_text.h"
#include "controller/apiclient/http_store.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/executor_log.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http_cloud_clients.h"
#include "controller/cloud/sandbox_commands.h"

namespace sbx::cli {
namespace {

namespace databricks = controller::databricks;

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

// `logs agentworker/NAME` through sbxd, which reads the log in the sandbox itself: the client
// needs no cloud credentials. -f streams until interrupted or the server ends it.
int RunRemoteWorkerLogs(CommandContext& ctx, controller::apiclient::HttpStore& remote,
                        const api::ObjectKey& key, const LogsCommandOptions& options) {
  ProgramOutput output(ctx.out(), ctx.out_is_terminal());
  std::stop_source stop;
  std::jthread watcher;
  if (options.follow) {
    watcher = std::jthread([&ctx, &stop](std::stop_token own) {
      while (!own.stop_requested() && !ctx.interrupted()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      stop.request_stop();
    });
  }
  // The chunks are handed over on this thread (http_transport.h), as they arrive.
  const api::Status streamed = remote.ExecutorLog(
      key, options.tail, options.follow, [&](std::string_view bytes) { output.Write(bytes); },
      stop.get_token());
  if (watcher.joinable()) {
    watcher.request_stop();
    watcher.join();
  }
  output.Finish();
  if (!streamed.ok()) {
    if (streamed.code() == api::StatusCode::kNotFound) {
      return ctx.Fail(streamed);
    }
    ctx.PrintError(streamed.message());
    return kExitError;
  }
  return kExitOk;
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
  if (controller::apiclient::HttpStore* remote = ctx.remote(); remote != nullptr) {
    return RunRemoteWorkerLogs(ctx, *remote, *key, options);
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
  auto created = api::CreatedSandbox(*sandbox);  // never the spec's sandboxId (#24)
  if (!created.ok()) {
    return ctx.Fail(created.status());
  }
  const controller::ExecutorLogTarget target{key->namespace_, created->workspace_ref,
                                             created->sandbox_id, key->name};

  std::unique_ptr<controller::http::HttpTransport> transport =
      controller::http::MakeCppRestTransport();
  std::unique_ptr<controller::http::StreamingTransport> streaming =
      controller::http::MakeCppRestStreamingTransport();
  controller::HttpCloudClientsOptions cloud_options;
  cloud_options.secrets = controller::SecretPolicyFromEnvironment(databricks::ProcessEnv());
  controller::HttpCloudClients clouds(**store, ctx.clock(), *transport, *streaming,
                                      databricks::ProcessEnv(), cloud_options);
  controller::CloudSandboxCommands commands(clouds);

  auto first = controller::ReadExecutorLogTail(commands, target, options.tail, kLogsMaxBytes);
  if (!first.ok()) {
    ctx.PrintError("logs of " + QualifiedName(*key) + " in sandbox " + target.sandbox_id + ": " +
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
    auto next = controller::ReadExecutorLogFrom(commands, target, offset, inode, kLogsMaxBytes);
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
