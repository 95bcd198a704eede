#include "cli/commands/delete_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/manifest_reader.h"
#include "cli/commands/wait_command.h"

namespace sbx::cli {

int RunDelete(CommandContext& ctx, const DeleteCommandOptions& options) {
  if (options.args.empty() == options.files.empty()) {
    return ctx.Fail(api::InvalidArgumentError(
        "specify either KIND NAME… (or KIND/NAME…) or -f FILE, not both and not neither"));
  }
  auto timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) {
    return ctx.Fail(timeout.status());
  }
  std::vector<api::ObjectKey> keys;
  if (!options.files.empty()) {
    // Identities only (validate=false): deleting must work for objects now invalid.
    const std::optional<ManifestSet> set =
        ReadCommandManifests(ctx, options.files, options.recursive, /*validate=*/false);
    if (!set) {
      return ctx.exit_code = kExitError;
    }
    for (const api::Manifest& m : set->manifests) {
      keys.push_back(api::KeyOf(m.object));
    }
  } else {
    auto resolved = ResolveTargets(options.args, ctx.options().namespace_);
    if (!resolved.ok()) {
      return ctx.Fail(resolved.status());
    }
    keys = std::move(resolved).value();
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  bool failed = false;
  std::vector<api::ObjectKey> to_wait;
  for (const api::ObjectKey& key : keys) {
    auto outcome = (*store)->Delete(key, {ctx.WriteBy()});
    if (!outcome.ok()) {
      if (outcome.status().code() == api::StatusCode::kNotFound) {
        if (!options.ignore_not_found) {
          ctx.err() << NotFoundMessage(key) << "\n";
          failed = true;
        }
        continue;
      }
      return ctx.Fail(outcome.status());
    }
    const std::string what = TypeName(key.kind) + " \"" + key.name + "\" ";
    switch (*outcome) {
      case controller::DeleteOutcome::kDeleted:
        ctx.out() << what << "deleted\n";
        break;
      case controller::DeleteOutcome::kMarkedForDeletion:
      case controller::DeleteOutcome::kAlreadyDeleting:
        ctx.out() << what << "marked for deletion\n";
        to_wait.push_back(key);
        break;
    }
  }
  ctx.out().flush();
  if (options.wait) {
    const auto deadline = ctx.clock().Steady() + *timeout;
    WaitCondition gone;
    gone.for_delete = true;
    for (const api::ObjectKey& key : to_wait) {
      const api::Status waited = WaitFor(ctx, **store, key, gone, deadline);
      if (!waited.ok()) {
        return ctx.Fail(waited);
      }
      ctx.out() << TypeName(key.kind) << " \"" << key.name << "\" deleted\n";
    }
  }
  return ctx.exit_code = failed ? kExitError : kExitOk;
}

void AddDeleteCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<DeleteCommandOptions>();
  CLI::App* sub = app.add_subcommand("delete", "Delete objects by name or by manifest");
  sub->add_option("args", options->args, "KIND NAME… or KIND/NAME…");
  sub->add_option("-f,--filename", options->files, "file, directory or - (stdin); repeatable")
      ->allow_extra_args(false);
  sub->add_flag("-R,--recursive", options->recursive, "read directories recursively");
  sub->add_flag("--wait", options->wait, "wait until the objects are gone");
  sub->add_option("--timeout", options->timeout, "how long --wait waits (e.g. 30s, 5m)")
      ->capture_default_str();
  sub->add_flag("--ignore-not-found", options->ignore_not_found,
                "treat a missing object as deleted");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunDelete(ctx, *options); }; });
}

}  // namespace sbx::cli
