#include "cli/commands/cancel_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "api/rfc3339.h"
#include "cli/commands/object_update.h"

namespace sbx::cli {

int RunCancel(CommandContext& ctx, const CancelCommandOptions& options) {
  auto keys = ResolveTargets(options.args, ctx.options().namespace_);
  if (!keys.ok()) {
    return ctx.Fail(keys.status());
  }
  for (const api::ObjectKey& key : *keys) {
    if (key.kind != api::Kind::kAgentTask) {
      return ctx.Fail(api::InvalidArgumentError("cancel stops agent tasks; \"" +
                                                QualifiedName(key) + "\" is not an agenttask"));
    }
  }
  const std::string now = api::FormatRfc3339(ctx.clock().Now());
  for (const api::ObjectKey& key : *keys) {
    std::string finished;  // the phase of a task that has nothing left to cancel
    auto written = UpdateObject(ctx, key, [&](api::Object& task) {
      const api::TaskPhase phase = task.agent_task_status().phase;
      finished = api::IsFinished(phase) ? std::string(api::TaskPhaseName(phase)) : "";
      if (finished.empty()) {
        // The first request's time stays: it is when the user asked.
        task.metadata.annotations.try_emplace(std::string(api::kCancelRequestedAnnotation), now);
      }
      return api::OkStatus();
    });
    if (!written.ok()) {
      return FailUpdate(ctx, written.status());
    }
    if (!finished.empty()) {
      ctx.out() << QualifiedName(key) << " already finished (" << finished << ")\n";
    } else {
      ctx.out() << QualifiedName(key) << " cancel requested\n";
    }
  }
  return kExitOk;
}

void AddCancelCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<CancelCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "cancel", "Cancel agent tasks: cancel agenttask/NAME… (the turn ends Cancelled)");
  sub->add_option("args", options->args, "agenttask/NAME… or agenttask NAME…")->required();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunCancel(ctx, *options); }; });
}

}  // namespace sbx::cli
