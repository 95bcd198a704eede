#include "cli/commands/apply_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/immutable_fields.h"
#include "cli/commands/manifest_reader.h"
#include "cli/commands/wait_command.h"

namespace sbx::cli {

std::string ApplyActionName(controller::ApplyAction action) {
  switch (action) {
    case controller::ApplyAction::kCreated:
      return "created";
    case controller::ApplyAction::kConfigured:
      return "configured";
    case controller::ApplyAction::kUnchanged:
      return "unchanged";
    case controller::ApplyAction::kPruned:
      return "pruned";
  }
  return "unknown";
}

int RunApply(CommandContext& ctx, const ApplyCommandOptions& options) {
  if (options.files.empty()) {
    return ctx.Fail(api::InvalidArgumentError("must specify one of -f"));
  }
  if (options.prune && options.applyset.empty()) {
    return ctx.Fail(api::InvalidArgumentError("--prune requires --applyset NAME"));
  }
  auto timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) {
    return ctx.Fail(timeout.status());
  }
  const std::optional<ManifestSet> read =
      ReadCommandManifests(ctx, options.files, options.recursive);
  if (!read) {
    return ctx.exit_code = kExitError;
  }
  const ManifestSet& set = *read;
  if (set.manifests.empty() && !options.prune) {
    return ctx.Fail(api::InvalidArgumentError("no objects passed to apply"));
  }
  // Pruning against an empty apply deletes every member of the set, and their deletionPolicy
  // (Delete by default) then deletes the sandboxes: a directory with no manifests left in it,
  // or a wrong -f, must not do that by accident. kubectl refuses the same way. The store refuses
  // it too; this says so in the CLI's terms before the store is even opened.
  if (set.manifests.empty() && options.prune && !options.prune_allow_empty) {
    return ctx.Fail(api::InvalidArgumentError(
        "apply --prune: no objects passed to apply; refusing to prune every member of "
        "applyset \"" +
        options.applyset + "\" (use --prune-allow-empty to allow it)"));
  }

  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  std::vector<api::Object> objects;
  objects.reserve(set.manifests.size());
  for (const api::Manifest& m : set.manifests) {
    objects.push_back(m.object);
  }
  controller::ApplyOptions apply_options;
  apply_options.dry_run = options.dry_run;
  apply_options.applyset = options.applyset;
  apply_options.prune = options.prune;
  apply_options.prune_allow_empty = options.prune_allow_empty;
  apply_options.audit = ctx.WriteBy();
  auto results = (*store)->Apply(objects, apply_options);
  if (!results.ok()) {
    return ctx.Fail(results.status());
  }
  const std::string suffix = options.dry_run ? " (dry run)" : "";
  for (const controller::ApplyResult& r : *results) {
    ctx.out() << QualifiedName(r.key) << " " << ApplyActionName(r.action) << suffix << "\n";
  }
  ctx.out().flush();
  for (const std::string& warning : ImmutableFieldWarnings(**store, *results)) {
    ctx.err() << "Warning: " << warning << "\n";
  }

  if (!options.wait || options.dry_run) {
    return kExitOk;
  }
  const auto deadline = ctx.clock().Steady() + *timeout;
  for (const controller::ApplyResult& r : *results) {
    if (r.action == controller::ApplyAction::kPruned || r.key.kind == api::Kind::kWorkspace) {
      continue;
    }
    const api::Status waited = WaitFor(ctx, **store, r.key, WaitCondition{}, deadline);
    if (!waited.ok()) {
      return ctx.Fail(waited);
    }
    ctx.out() << QualifiedName(r.key) << " condition met\n";
  }
  return kExitOk;
}

void AddApplyCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ApplyCommandOptions>();
  CLI::App* sub = app.add_subcommand("apply", "Apply manifests: create or update objects");
  sub->add_option("-f,--filename", options->files, "file, directory or - (stdin); repeatable")
      ->required()
      ->allow_extra_args(false);
  sub->add_flag("-R,--recursive", options->recursive, "read directories recursively");
  sub->add_flag("--dry-run", options->dry_run, "show what would change, change nothing");
  sub->add_flag("--prune", options->prune,
                "delete members of the --applyset that are not in this apply");
  sub->add_flag("--prune-allow-empty", options->prune_allow_empty,
                "let --prune delete every member of the set when no objects are passed");
  sub->add_option("--applyset", options->applyset, "name of the set these objects belong to");
  sub->add_flag("--wait", options->wait, "wait until every applied object is Ready");
  sub->add_option("--timeout", options->timeout, "how long --wait waits (e.g. 30s, 5m)")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunApply(ctx, *options); }; });
}

}  // namespace sbx::cli
