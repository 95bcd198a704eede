#include "cli/commands/diff_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "api/codec.h"
#include "cli/commands/immutable_fields.h"
#include "cli/commands/manifest_reader.h"
#include "cli/commands/unified_diff.h"

namespace sbx::cli {

std::string DiffView(const api::Object& object) {
  api::Object view = api::MakeObject(object.kind, object.metadata.name, object.metadata.namespace_);
  view.metadata.labels = object.metadata.labels;
  view.metadata.annotations = object.metadata.annotations;
  view.spec = object.spec;
  return api::EncodeObjectYaml(view);
}

int RunDiff(CommandContext& ctx, const DiffCommandOptions& options) {
  const auto fail = [&ctx](const api::Status& s) {
    ctx.Fail(s);
    return ctx.exit_code = kExitDiffError;
  };
  if (options.files.empty()) {
    return fail(api::InvalidArgumentError("must specify one of -f"));
  }
  if (options.prune && options.applyset.empty()) {
    return fail(api::InvalidArgumentError("--prune requires --applyset NAME"));
  }
  const std::optional<ManifestSet> read =
      ReadCommandManifests(ctx, options.files, options.recursive);
  if (!read) {
    return ctx.exit_code = kExitDiffError;
  }
  const ManifestSet& set = *read;
  auto store = ctx.store();
  if (!store.ok()) {
    return fail(store.status());
  }
  std::vector<api::Object> objects;
  for (const api::Manifest& m : set.manifests) {
    objects.push_back(m.object);
  }
  controller::ApplyOptions apply_options;
  apply_options.dry_run = true;
  apply_options.applyset = options.applyset;
  apply_options.prune = options.prune;
  auto results = (*store)->Apply(objects, apply_options);
  if (!results.ok()) {
    return fail(results.status());
  }
  for (const std::string& warning : ImmutableFieldWarnings(**store, *results)) {
    ctx.err() << "Warning: " << warning << "\n";
  }
  bool differences = false;
  for (const controller::ApplyResult& r : *results) {
    if (r.action == controller::ApplyAction::kUnchanged) {
      continue;
    }
    std::string live;
    auto stored = (*store)->Get(r.key);
    if (stored.ok()) {
      live = DiffView(*stored);
    } else if (stored.status().code() != api::StatusCode::kNotFound) {
      return fail(stored.status());
    }
    const std::string desired =
        r.action == controller::ApplyAction::kPruned ? std::string() : DiffView(r.object);
    const std::string path = TypeName(r.key.kind) + "/" + r.key.namespace_ + "/" + r.key.name;
    const std::string diff = UnifiedDiff(live, desired, live.empty() ? "/dev/null" : "live/" + path,
                                         desired.empty() ? "/dev/null" : "manifest/" + path);
    if (!diff.empty()) {
      differences = true;
      ctx.out() << diff;
    }
  }
  return ctx.exit_code = differences ? kExitDiffFound : kExitOk;
}

void AddDiffCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<DiffCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Show what apply would change (exit 0: none, 1: differences, 2: error)");
  sub->add_option("-f,--filename", options->files, "file, directory or - (stdin); repeatable")
      ->required()
      ->allow_extra_args(false);
  sub->add_flag("-R,--recursive", options->recursive, "read directories recursively");
  sub->add_flag("--prune", options->prune,
                "also show members of --applyset that apply would prune");
  sub->add_option("--applyset", options->applyset, "name of the set these objects belong to");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunDiff(ctx, *options); }; });
}

}  // namespace sbx::cli
