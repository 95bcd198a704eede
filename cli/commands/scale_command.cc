#include "cli/commands/scale_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/object_update.h"

namespace sbx::cli {

int RunScale(CommandContext& ctx, const ScaleCommandOptions& options) {
  if (!options.min && !options.max) {
    return ctx.Fail(api::InvalidArgumentError("give --min, --max or both"));
  }
  std::string target;
  if (options.args.size() == 1) {
    target = options.args[0];
  } else if (options.args.size() == 2 && options.args[0].find('/') == std::string::npos) {
    target = options.args[0] + "/" + options.args[1];
  } else {
    return ctx.Fail(api::InvalidArgumentError("give one agentpool: agentpool/NAME"));
  }
  auto key = ResolveOneTarget(target, api::Kind::kAgentPool, ctx.options().namespace_);
  if (!key.ok()) {
    return ctx.Fail(key.status());
  }
  auto written = UpdateObject(ctx, *key, [&](api::Object& pool) {
    api::PoolReplicas& replicas = pool.agent_pool_spec().replicas;
    if (options.min) {
      replicas.min = *options.min;
    }
    if (options.max) {
      replicas.max = *options.max;
    }
    return api::OkStatus();
  });
  if (!written.ok()) {
    return FailUpdate(ctx, written.status());
  }
  ctx.out() << QualifiedName(*key)
            << (written->action == controller::ApplyAction::kUnchanged ? " not scaled\n"
                                                                       : " scaled\n");
  return ctx.exit_code = kExitOk;
}

void AddScaleCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ScaleCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "scale", "Set an AgentPool's replica bounds: scale agentpool/NAME --min N --max M");
  sub->add_option("target", options->args, "agentpool/NAME (or ap/NAME)")->required();
  sub->add_option("--min", options->min, "the fewest replicas, kept even without work");
  sub->add_option("--max", options->max, "the most replicas");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunScale(ctx, *options); }; });
}

}  // namespace sbx::cli
