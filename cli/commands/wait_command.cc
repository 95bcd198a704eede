#include "cli/commands/wait_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <memory>

#include "controller/base/classify_error.h"

namespace sbx::cli {
namespace {

// How long one WaitForChange may block before the interruption flag and deadline are checked.
constexpr std::chrono::milliseconds kMaxBlock{200};

bool Observed(const api::Object& o, const api::Condition& c) {
  const int64_t status_generation =
      std::visit([](const auto& s) { return s.observed_generation; }, o.status);
  return c.observed_generation >= o.metadata.generation ||
         status_generation >= o.metadata.generation;
}

std::string TimeoutMessage(const api::ObjectKey& key) {
  return "timed out waiting for the condition on " + ResourceName(key.kind) + "/" + key.name;
}

}  // namespace

api::StatusOr<WaitCondition> ParseWaitFor(std::string_view text) {
  WaitCondition c;
  if (text == "delete") {
    c.for_delete = true;
    return c;
  }
  constexpr std::string_view kPrefix = "condition=";
  if (text.substr(0, kPrefix.size()) != kPrefix || text.size() == kPrefix.size()) {
    return api::InvalidArgumentError("unrecognized condition: \"" + std::string(text) +
                                     "\" (expected --for=condition=Ready[=True|False] or "
                                     "--for=delete)");
  }
  std::string_view rest = text.substr(kPrefix.size());
  const size_t eq = rest.find('=');
  c.type = std::string(rest.substr(0, eq));
  if (eq != std::string_view::npos) {
    const std::string_view value = rest.substr(eq + 1);
    if (value == "True" || value == "true") {
      c.status = api::ConditionStatus::kTrue;
    } else if (value == "False" || value == "false") {
      c.status = api::ConditionStatus::kFalse;
    } else if (value == "Unknown" || value == "unknown") {
      c.status = api::ConditionStatus::kUnknown;
    } else {
      return api::InvalidArgumentError("unrecognized condition value \"" + std::string(value) +
                                       "\" (expected True, False or Unknown)");
    }
  }
  return c;
}

api::Status WaitFor(CommandContext& ctx, controller::Store& store, const api::ObjectKey& key,
                    const WaitCondition& condition,
                    std::chrono::steady_clock::time_point deadline) {
  while (true) {
    auto got = store.Get(key);
    if (!got.ok()) {
      if (got.status().code() != api::StatusCode::kNotFound) {
        return got.status();
      }
      if (condition.for_delete) {
        return api::OkStatus();
      }
      return api::NotFoundError(ResourceName(key.kind) + " \"" + key.name + "\" not found");
    }
    if (!condition.for_delete) {
      const api::Object& o = *got;
      const api::Condition* c = api::FindCondition(o.conditions(), condition.type);
      if (c != nullptr && c->status == condition.status && Observed(o, *c)) {
        return api::OkStatus();
      }
      const api::Condition* synced = api::FindCondition(o.conditions(), api::condition::kSynced);
      if (synced != nullptr && synced->status == api::ConditionStatus::kFalse &&
          controller::IsTerminalReason(synced->reason) &&
          synced->observed_generation == o.metadata.generation) {
        return api::FailedPreconditionError(QualifiedName(key) + ": Synced=False " +
                                            synced->reason + ": " + synced->message);
      }
    }
    const auto now = ctx.clock().Steady();
    if (now >= deadline) {
      return api::DeadlineExceededError(TimeoutMessage(key));
    }
    if (ctx.interrupted()) {
      return api::CancelledError("interrupted while waiting for " + QualifiedName(key));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    store.WaitForChange(std::min(left, kMaxBlock));
  }
}

int RunWait(CommandContext& ctx, const WaitCommandOptions& options) {
  auto keys = ResolveTargets(options.targets, ctx.options().namespace_);
  if (!keys.ok()) {
    return ctx.Fail(keys.status());
  }
  if (options.for_text.empty()) {
    return ctx.Fail(
        api::InvalidArgumentError("--for must be specified, e.g. "
                                  "--for=condition=Ready"));
  }
  auto condition = ParseWaitFor(options.for_text);
  if (!condition.ok()) {
    return ctx.Fail(condition.status());
  }
  auto timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) {
    return ctx.Fail(timeout.status());
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  const auto deadline = ctx.clock().Steady() + *timeout;
  for (const api::ObjectKey& key : *keys) {
    const api::Status waited = WaitFor(ctx, **store, key, *condition, deadline);
    if (waited.code() == api::StatusCode::kNotFound) {
      ctx.err() << NotFoundMessage(key) << "\n";
      return ctx.exit_code = kExitError;
    }
    if (!waited.ok()) {
      return ctx.Fail(waited);
    }
    ctx.out() << QualifiedName(key) << (condition->for_delete ? " deleted" : " condition met")
              << "\n";
  }
  return kExitOk;
}

void AddWaitCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<WaitCommandOptions>();
  CLI::App* sub =
      app.add_subcommand("wait",
                         "Wait for a condition on objects (--for=condition=Ready[=True|False] or "
                         "--for=delete)");
  sub->add_option("targets", options->targets, "KIND NAME… or KIND/NAME…");
  sub->add_option("--for", options->for_text, "condition=TYPE[=STATUS] or delete");
  sub->add_option("--timeout", options->timeout, "give up after this long (e.g. 30s, 5m)")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunWait(ctx, *options); }; });
}

}  // namespace sbx::cli
