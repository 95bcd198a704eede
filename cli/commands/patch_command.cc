#include "cli/commands/patch_command.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "cli/commands/object_update.h"

namespace sbx::cli {

using nlohmann::json;

namespace {

// "patch:3:14: spec.powr: unknown field …" → "spec.powr: unknown field …": a position in the
// patched document says nothing to the user, who wrote only the patch.
std::string WithoutPosition(const std::string& message, std::string_view file) {
  if (message.rfind(std::string(file) + ":", 0) != 0) {
    return message;
  }
  size_t pos = file.size() + 1;
  for (int colons = 0; colons < 2; ++colons) {
    const size_t next = message.find(':', pos);
    if (next == std::string::npos) {
      return message;
    }
    pos = next + 1;
  }
  return message.substr(message.find_first_not_of(' ', pos));
}

}  // namespace

api::StatusOr<api::Object> PatchObject(const api::Object& original, std::string_view patch,
                                       std::string_view type) {
  if (type != "merge" && type != "json") {
    return api::InvalidArgumentError(
        "--type must be \"merge\" or \"json\" (sbx objects have no strategic merge keys)");
  }
  const json parsed = json::parse(patch, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return api::InvalidArgumentError("unable to parse \"" + std::string(patch) +
                                     "\": the patch is not valid JSON");
  }
  json document = json::parse(api::EncodeObjectJson(original, /*pretty=*/false));
  try {
    if (type == "merge") {
      if (!parsed.is_object()) {
        return api::InvalidArgumentError("a merge patch must be a JSON object");
      }
      document.merge_patch(parsed);
    } else {
      document = document.patch(parsed);
    }
  } catch (const json::exception& e) {
    return api::InvalidArgumentError(std::string("the patch does not apply: ") + e.what());
  }
  if (!document.is_object()) {
    return api::InvalidArgumentError("the patched object is not a JSON object");
  }
  constexpr std::string_view kFile = "patch";
  auto decoded = api::DecodeManifests(document.dump(2), kFile);
  if (!decoded.ok()) {
    return api::InvalidArgumentError(WithoutPosition(decoded.status().message(), kFile));
  }
  if (decoded->size() != 1) {
    return api::InvalidArgumentError("the patched object is empty");
  }
  api::Object patched = std::move(decoded->front().object);
  if (api::KeyOf(patched) != api::KeyOf(original)) {
    return api::InvalidArgumentError(
        "a patch cannot change kind, metadata.name or "
        "metadata.namespace");
  }
  return WithUserFields(original, std::move(patched));
}

int RunPatch(CommandContext& ctx, const PatchCommandOptions& options) {
  if (options.patch.empty()) {
    return ctx.Fail(api::InvalidArgumentError("must specify -p to patch"));
  }
  auto keys = ResolveTargets(options.args, ctx.options().namespace_);
  if (!keys.ok()) {
    return ctx.Fail(keys.status());
  }
  if (keys->size() != 1) {
    return ctx.Fail(api::InvalidArgumentError("patch takes one object (KIND NAME or KIND/NAME)"));
  }
  const api::ObjectKey key = keys->front();
  const auto mutate = [&](api::Object& object) -> api::Status {
    ASSIGN_OR_RETURN(object, PatchObject(object, options.patch, options.type));
    return api::OkStatus();
  };
  auto written = UpdateObject(ctx, key, mutate);
  if (!written.ok()) {
    return FailUpdate(ctx, written.status());
  }
  ctx.out() << QualifiedName(key) << " patched"
            << (written->action == controller::ApplyAction::kUnchanged ? " (no change)" : "")
            << "\n";
  return kExitOk;
}

void AddPatchCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<PatchCommandOptions>();
  CLI::App* sub = app.add_subcommand("patch", "Update fields of an object with a JSON patch");
  sub->add_option("args", options->args, "KIND NAME or KIND/NAME");
  sub->add_option("-p,--patch", options->patch,
                  "the patch, e.g. '{\"spec\":{\"power\":\"Stopped\"}}'")
      ->required();
  sub->add_option("--type", options->type, "merge (JSON merge patch) or json (JSON Patch)")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunPatch(ctx, *options); }; });
}

}  // namespace sbx::cli
