#include "cli/commands/label_command.h"

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/commands/object_update.h"

namespace sbx::cli {
namespace {

struct Change {
  std::map<std::string, std::string> set;
  std::set<std::string> remove;
};

bool IsChange(std::string_view arg) {
  return arg.find('=') != std::string_view::npos || (arg.size() > 1 && arg.back() == '-');
}

std::string BothModifiedAndRemoved(const std::string& what, const std::string& key) {
  return "can not both modify and remove " + what + " \"" + key + "\" in the same command";
}

api::StatusOr<Change> ParseChanges(const std::vector<std::string>& args, const std::string& what) {
  Change change;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      const std::string key = arg.substr(0, arg.size() - 1);
      if (change.set.count(key) > 0) {
        return api::InvalidArgumentError(BothModifiedAndRemoved(what, key));
      }
      change.remove.insert(key);
      continue;
    }
    const std::string key = arg.substr(0, eq);
    if (key.empty()) {
      std::string message = "invalid ";
      message.append(what)
          .append(" spec: \"")
          .append(arg)
          .append("\" (expected KEY=VALUE or KEY-)");
      return api::InvalidArgumentError(message);
    }
    if (change.remove.count(key) > 0) {
      return api::InvalidArgumentError(BothModifiedAndRemoved(what, key));
    }
    change.set[key] = arg.substr(eq + 1);
  }
  if (change.set.empty() && change.remove.empty()) {
    return api::InvalidArgumentError("at least one " + what + " update is required");
  }
  return change;
}

}  // namespace

int RunLabel(CommandContext& ctx, const LabelCommandOptions& options) {
  const bool labels = options.map == MetadataMap::kLabels;
  const std::string what = labels ? "label" : "annotation";
  const std::string done = labels ? "labeled" : "annotated";

  // KIND NAME… or KIND/NAME…, then the changes.
  std::vector<std::string> targets;
  std::vector<std::string> changes;
  for (const std::string& arg : options.args) {
    (changes.empty() && !(IsChange(arg) && !targets.empty()) ? targets : changes).push_back(arg);
  }
  auto change = ParseChanges(changes, what);
  if (!change.ok()) {
    return ctx.Fail(change.status());
  }
  std::optional<int64_t> resource_version;
  if (!options.resource_version.empty()) {
    try {
      resource_version = std::stoll(options.resource_version);
    } catch (const std::exception&) {
      return ctx.Fail(api::InvalidArgumentError("invalid --resource-version \"" +
                                                options.resource_version + "\""));
    }
  }

  std::vector<api::ObjectKey> keys;
  const std::string& ns = ctx.options().namespace_;
  if (options.all || !options.selector.empty()) {
    if (targets.size() != 1 || targets[0].find('/') != std::string::npos) {
      return ctx.Fail(api::InvalidArgumentError(
          "--all and -l take a resource type and no names (e.g. `label sb --all k=v`)"));
    }
    auto kind = api::ParseKind(targets[0]);
    auto selector = ParseLabelSelector(options.selector);
    auto store = ctx.store();
    if (!kind.ok() || !selector.ok() || !store.ok()) {
      return ctx.Fail(!kind.ok() ? kind.status()
                                 : (!selector.ok() ? selector.status() : store.status()));
    }
    controller::ListOptions list;
    list.kind = *kind;
    list.namespace_ = ns;
    list.label_selector = *selector;
    auto listed = (*store)->List(list);
    if (!listed.ok()) {
      return ctx.Fail(listed.status());
    }
    for (const api::Object& o : *listed) {
      keys.push_back(api::KeyOf(o));
    }
    if (keys.empty()) {
      ctx.err() << "No resources found in " << ns << " namespace.\n";
      return kExitOk;
    }
  } else {
    auto resolved = ResolveTargets(targets, ns);
    if (!resolved.ok()) {
      return ctx.Fail(resolved.status());
    }
    keys = std::move(resolved).value();
  }

  for (const api::ObjectKey& key : keys) {
    const auto mutate = [&](api::Object& object) -> api::Status {
      auto& map = labels ? object.metadata.labels : object.metadata.annotations;
      for (const auto& [k, v] : change->set) {
        auto it = map.find(k);
        if (it != map.end() && it->second != v && !options.overwrite) {
          return api::InvalidArgumentError("'" + k + "' already has a value (" + it->second +
                                           "), and --overwrite is false");
        }
        map[k] = v;
      }
      for (const std::string& k : change->remove) {
        if (map.erase(k) == 0) {
          ctx.err() << what << " \"" << k << "\" not found.\n";
        }
      }
      return api::OkStatus();
    };
    auto written = UpdateObject(ctx, key, mutate, resource_version);
    if (!written.ok()) {
      return FailUpdate(ctx, written.status());
    }
    ctx.out() << QualifiedName(key)
              << (written->action == controller::ApplyAction::kUnchanged ? " not " : " ") << done
              << "\n";
  }
  return kExitOk;
}

namespace {

void AddMetadataMapCommand(CLI::App& app, CommandContext& ctx, MetadataMap map) {
  auto options = std::make_shared<LabelCommandOptions>();
  options->map = map;
  const bool labels = map == MetadataMap::kLabels;
  CLI::App* sub = app.add_subcommand(
      labels ? "label" : "annotate",
      labels ? "Update the labels of objects" : "Update the annotations of objects");
  sub->add_option("args", options->args,
                  "KIND NAME… KEY=VALUE… KEY-… (or KIND/NAME…; KEY- removes the key)");
  sub->add_flag("--overwrite", options->overwrite, "allow changing the value of an existing key");
  sub->add_flag("--all", options->all, "every object of the kind in the namespace");
  sub->add_option("-l,--selector", options->selector, "objects matching this label selector");
  sub->add_option("--resource-version", options->resource_version,
                  "update only if the object is still at this resourceVersion");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunLabel(ctx, *options); }; });
}

}  // namespace

void AddLabelCommand(CLI::App& app, CommandContext& ctx) {
  AddMetadataMapCommand(app, ctx, MetadataMap::kLabels);
}

void AddAnnotateCommand(CLI::App& app, CommandContext& ctx) {
  AddMetadataMapCommand(app, ctx, MetadataMap::kAnnotations);
}

}  // namespace sbx::cli
