#include "cli/commands/exec_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/terminal_text.h"
#include "controller/apiclient/http_store.h"
#include "controller/cloud/databricks/auth.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http_cloud_clients.h"
#include "controller/cloud/sandbox_commands.h"

namespace sbx::cli {
namespace {

api::StatusOr<api::ObjectKey> ExecTarget(const std::string& target, const std::string& ns) {
  if (target.find('/') == std::string::npos) {
    return api::ObjectKey{api::Kind::kSandbox, ns, target};
  }
  ASSIGN_OR_RETURN(KindAndName kn, ParseKindAndName(target));
  if (kn.kind != api::Kind::kSandbox) {
    return api::InvalidArgumentError("exec runs commands in sandboxes; \"" + target +
                                     "\" is not a sandbox");
  }
  return api::ObjectKey{api::Kind::kSandbox, ns, kn.name};
}

}  // namespace

int RunExec(CommandContext& ctx, const ExecCommandOptions& options) {
  if (options.command.empty()) {
    return ctx.Fail(api::InvalidArgumentError(
        "you must specify a command to run, after \"--\" (sbxctl exec sandbox/NAME -- CMD)"));
  }
  auto key = ExecTarget(options.target, ctx.options().namespace_);
  if (!key.ok()) {
    return ctx.Fail(key.status());
  }
  auto timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) {
    return ctx.Fail(timeout.status());
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  std::vector<std::string> command = options.command;
  api::StatusOr<controller::CommandResult> result = api::InternalError("unset");
  if (controller::apiclient::HttpStore* remote = ctx.remote(); remote != nullptr) {
    // sbxd runs it with its own credentials: the client needs none.
    result = remote->Exec(*key, command, *timeout);
  } else {
    auto object = (*store)->Get(*key);
    if (!object.ok()) {
      return ctx.Fail(object.status());
    }
    // The sandbox sbx created, never the spec's sandboxId/workspaceRef (#24).
    auto created = api::CreatedSandbox(*object);
    if (!created.ok()) {
      return ctx.Fail(created.status());
    }
    std::unique_ptr<controller::http::HttpTransport> transport =
        controller::http::MakeCppRestTransport();
    std::unique_ptr<controller::http::StreamingTransport> streaming =
        controller::http::MakeCppRestStreamingTransport();
    controller::HttpCloudClientsOptions cloud_options;
    cloud_options.secrets =
        controller::SecretPolicyFromEnvironment(controller::databricks::ProcessEnv());
    controller::HttpCloudClients clouds(**store, ctx.clock(), *transport, *streaming,
                                        controller::databricks::ProcessEnv(), cloud_options);
    controller::CloudSandboxCommands commands(clouds);
    controller::CommandRequest request;
    request.cmd = command.front();
    request.args.assign(command.begin() + 1, command.end());
    request.timeout = *timeout;
    result = commands.Run(key->namespace_, created->workspace_ref, created->sandbox_id, request);
    if (!result.ok()) {
      return ctx.Fail(api::Status(result.status().code(), "exec in sandbox " + created->sandbox_id +
                                                              ": " + result.status().message()));
    }
  }
  if (!result.ok()) {
    return ctx.Fail(result.status());  // the server said which sandbox
  }
  // The command's own bytes: unchanged into a pipe or file, escaped on a terminal.
  ProgramOutput stdout_output(ctx.out(), ctx.out_is_terminal());
  stdout_output.Write(result->stdout_text);
  stdout_output.Finish();
  ProgramOutput stderr_output(ctx.err(), ctx.err_is_terminal());
  stderr_output.Write(result->stderr_text);
  stderr_output.Finish();
  if (result->truncated) {
    ctx.PrintError("output truncated by the sandbox API");
  }
  if (result->outcome == controller::CommandOutcome::kTimedOut) {
    ctx.PrintError("command timed out after " + options.timeout);
    return kExitError;
  }
  if (!result->exit_code) {
    ctx.PrintError("command ended without an exit code (killed or never started)");
    return kExitError;
  }
  return *result->exit_code;
}

void AddExecCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ExecCommandOptions>();
  CLI::App* sub =
      app.add_subcommand("exec", "Run a command in a sandbox: exec sandbox/NAME -- CMD");
  sub->add_option("target", options->target, "sandbox/NAME (or NAME)")->required();
  sub->add_option("command", options->command, "CMD [ARG…], after --");
  sub->add_option("--timeout", options->timeout, "execution timeout (e.g. 30s, 5m)")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunExec(ctx, *options); }; });
}

}  // namespace sbx::cli
