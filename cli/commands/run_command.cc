#include "cli/commands/run_command.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "api/duration.h"
#include "cli/commands/artifacts_command.h"
#include "cli/commands/object_update.h"
#include "cli/commands/task_log_printer.h"

namespace sbx::cli {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kSuffixLength = 5;

// Reads --input or -f FILE ("-": stdin), at most `max_bytes`.
api::StatusOr<std::string> ReadInput(CommandContext& ctx, const RunCommandOptions& options) {
  const bool from_file = !options.input_file.empty();
  if (options.input_given == from_file) {
    return api::InvalidArgumentError(
        "give the task's input with exactly one of --input TEXT or "
        "-f FILE (-f - reads stdin)");
  }
  if (!from_file) {
    return options.input;
  }
  std::ifstream file;
  std::istream* in = &ctx.in();
  if (options.input_file != "-") {
    file.open(options.input_file, std::ios::binary);
    if (!file) {
      return api::InvalidArgumentError("-f " + options.input_file + ": cannot be read");
    }
    in = &file;
  }
  const size_t cap = ctx.options().max_manifest_bytes;
  std::string text(cap + 1, '\0');
  in->read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in->gcount()));
  if (text.size() > cap) {
    return api::InvalidArgumentError("-f " + options.input_file + ": larger than " +
                                     std::to_string(cap) + " bytes (--max-manifest-bytes)");
  }
  return text;
}

// The flag a validation problem of the task's spec comes from: "spec.input: must not be empty"
// → "--input: must not be empty".
std::string InFlagTerms(const RunCommandOptions& options, const api::Object& task,
                        std::string_view message) {
  // ValidateForWrite prefixes "agenttask/NAME: ".
  const std::string prefix = QualifiedName(api::KeyOf(task)) + ": ";
  if (message.substr(0, prefix.size()) == prefix) {
    message.remove_prefix(prefix.size());
  }
  const size_t colon = message.find(": ");
  const std::string_view field = message.substr(0, colon);
  const std::string rest =
      colon == std::string_view::npos ? std::string() : std::string(message.substr(colon));
  if (field == "spec.input") {
    return (options.input_file.empty() ? "--input" : "-f " + options.input_file) + rest;
  }
  if (field == "spec.timeout") {
    return "--timeout" + rest;
  }
  if (field == "spec.workerRef") {
    return "WORKER" + rest;
  }
  if (field == "spec.poolRef") {
    return "--pool" + rest;
  }
  if (field.substr(0, 13) == "spec.collect[") {
    const size_t index = std::stoul(std::string(field.substr(13)));
    return "--collect " + options.collect.at(index) + rest;
  }
  if (field == "metadata.name") {
    return "--name" + rest;
  }
  return std::string(message);
}

api::StatusOr<api::Object> BuildTask(CommandContext& ctx, const RunCommandOptions& options) {
  if (options.worker.empty() == options.pool.empty()) {
    return api::InvalidArgumentError(
        "give exactly one of WORKER (an AgentWorker) or --pool NAME (an AgentPool)");
  }
  ASSIGN_OR_RETURN(std::string input, ReadInput(ctx, options));
  const std::string& target = options.worker.empty() ? options.pool : options.worker;
  api::Object task = api::MakeObject(api::Kind::kAgentTask,
                                     options.name.empty() ? GenerateTaskName(target) : options.name,
                                     ctx.options().namespace_);
  api::AgentTaskSpec& spec = task.agent_task_spec();
  spec.worker_ref = options.worker;
  spec.pool_ref = options.pool;
  spec.input = std::move(input);
  if (!options.timeout.empty()) {
    auto timeout = api::ParseDuration(options.timeout);
    if (!timeout.ok()) {
      return api::InvalidArgumentError("--timeout " + options.timeout + ": " +
                                       timeout.status().message());
    }
    spec.timeout = *timeout;
  }
  for (const std::string& path : options.collect) {
    api::CollectSpec collect;
    collect.path = path;
    spec.collect.push_back(std::move(collect));
  }
  if (const api::Status valid = ValidateForWrite(task); !valid.ok()) {
    return api::InvalidArgumentError(InFlagTerms(options, task, valid.message()));
  }
  return task;
}

}  // namespace

std::string GenerateTaskName(std::string_view worker) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string name(worker.substr(0, kMaxNameLength - kSuffixLength - 1));
  name += '-';
  for (size_t i = 0; i < kSuffixLength; ++i) {
    name += kAlphabet[pick(random)];
  }
  return name;
}

int RunRun(CommandContext& ctx, const RunCommandOptions& options) {
  auto task = BuildTask(ctx, options);
  if (!task.ok()) {
    return ctx.Fail(task.status());
  }
  const api::ObjectKey key = api::KeyOf(*task);
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  // A worker or pool that does not exist is a mistake to say now, not a task queued forever.
  const api::ObjectKey runs_on =
      options.pool.empty() ? api::ObjectKey{api::Kind::kAgentWorker, key.namespace_, options.worker}
                           : api::ObjectKey{api::Kind::kAgentPool, key.namespace_, options.pool};
  if (auto found = (*store)->Get(runs_on); !found.ok()) {
    if (found.status().code() == api::StatusCode::kNotFound) {
      ctx.err() << "Error from server (NotFound): " << ResourceName(runs_on.kind) << " \""
                << runs_on.name << "\" not found in namespace \"" << runs_on.namespace_
                << "\"; no task was created\n";
      return ctx.exit_code = kExitError;
    }
    return ctx.Fail(found.status());
  }
  // Store::Apply would configure an existing task; run only ever creates one.
  if (auto existing = (*store)->Get(key); existing.ok()) {
    ctx.err() << "Error from server (AlreadyExists): " << ResourceName(key.kind) << " \""
              << key.name << "\" already exists\n";
    return ctx.exit_code = kExitError;
  } else if (existing.status().code() != api::StatusCode::kNotFound) {
    return ctx.Fail(existing.status());
  }
  controller::ApplyOptions create;
  create.audit = ctx.WriteBy();
  if (auto created = (*store)->Apply({*task}, create); !created.ok()) {
    return ctx.Fail(created.status());
  }
  ctx.out() << QualifiedName(key) << " created\n";
  ctx.out().flush();

  TaskLogOptions follow;
  follow.follow = true;
  follow.progress = true;
  auto finished = PrintTaskLog(ctx, **store, key, follow);
  if (!finished.ok()) {
    if (finished.status().code() == api::StatusCode::kCancelled) {
      ctx.err() << "stopped following; " << QualifiedName(key)
                << " keeps running. Cancel it: sbxctl cancel " << QualifiedName(key)
                << "   Follow it again: sbxctl logs " << QualifiedName(key) << " -f\n";
      return ctx.exit_code = kExitError;
    }
    return FailUpdate(ctx, finished.status());  // deleted while followed: NotFound
  }
  // Nothing to say about artifacts when none were asked for.
  const bool written = finished->agent_task_spec().collect.empty() ||
                       WriteArtifacts(ctx, **store, *finished, options.output_dir);
  const auto& status = finished->agent_task_status();
  ctx.out() << QualifiedName(key) << " " << api::TaskPhaseName(status.phase) << "\n";
  if (status.phase != api::TaskPhase::kSucceeded) {
    if (!status.result.error.code.empty() || !status.result.error.message.empty()) {
      ctx.PrintError(status.result.error.code + (status.result.error.message.empty()
                                                     ? ""
                                                     : ": " + status.result.error.message));
    }
    return ctx.exit_code = kExitError;
  }
  return ctx.exit_code = written ? kExitOk : kExitError;
}

void AddRunCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<RunCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "Run one agent turn: create an AgentTask for WORKER (or --pool NAME), follow its log, "
      "write its artifacts");
  sub->add_option("worker", options->worker, "the AgentWorker to run the turn");
  sub->add_option("--pool", options->pool,
                  "run the turn on an idle replica of this AgentPool instead of a WORKER");
  sub->add_option("--input", options->input, "the user message of the turn");
  sub->add_option("-f,--filename", options->input_file, "read the input from FILE (- for stdin)");
  sub->add_option("--collect", options->collect,
                  "a file to read back after the turn, relative to the worker's "
                  "workspaceDirectory (repeatable)");
  sub->add_option("--timeout", options->timeout,
                  "cancel the turn after this long from its submission (1s–24h; default 30m)");
  sub->add_option("-o,--output-dir", options->output_dir, "where to write the collected files")
      ->capture_default_str();
  sub->add_option("--name", options->name,
                  "the task's name (default WORKER-<random>, or POOL-<random>)");
  sub->callback([&ctx, options, sub] {
    options->input_given = sub->count("--input") > 0;
    ctx.action = [&ctx, options] { return RunRun(ctx, *options); };
  });
}

}  // namespace sbx::cli
