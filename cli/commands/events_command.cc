#include "cli/commands/events_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/table_printer.h"

namespace sbx::cli {

int RunEvents(CommandContext& ctx, const EventsCommandOptions& options) {
  std::optional<api::ObjectKey> involved;
  if (!options.args.empty()) {
    auto keys = ResolveTargets(options.args, ctx.options().namespace_);
    if (!keys.ok()) {
      return ctx.Fail(keys.status());
    }
    if (keys->size() != 1) {
      return ctx.Fail(api::InvalidArgumentError("events takes at most one object"));
    }
    involved = keys->front();
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto events = (*store)->ListEvents(involved);
  if (!events.ok()) {
    return ctx.Fail(events.status());
  }
  const std::optional<std::string> ns =
      involved ? std::optional(involved->namespace_) : ctx.ListNamespace();
  const bool with_namespace = !ns.has_value();
  std::vector<std::string> headers = {"LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"};
  if (with_namespace) {
    headers.insert(headers.begin(), "NAMESPACE");
  }
  TablePrinter table(headers);
  const auto now = ctx.clock().Now();
  for (const controller::Store::Event& e : *events) {
    if (ns && e.involved.namespace_ != *ns) {
      continue;
    }
    std::vector<std::string> row = {
        AgeSince(e.last_seen, now), e.type,   e.reason, QualifiedName(e.involved),
        std::to_string(e.count),    e.message};
    if (with_namespace) {
      row.insert(row.begin(), e.involved.namespace_);
    }
    table.AddRow(std::move(row));
  }
  if (table.empty()) {
    ctx.err() << (ns ? "No events found in " + *ns + " namespace." : std::string("No events found"))
              << "\n";
    return kExitOk;
  }
  table.Print(ctx.out());
  return kExitOk;
}

void AddEventsCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<EventsCommandOptions>();
  CLI::App* sub = app.add_subcommand("events", "List events, optionally of one object");
  sub->add_option("args", options->args, "[KIND NAME] or [KIND/NAME]");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunEvents(ctx, *options); }; });
}

}  // namespace sbx::cli
