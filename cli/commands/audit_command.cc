#include "cli/commands/audit_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>

#include "api/duration.h"
#include "api/rfc3339.h"
#include "cli/commands/table_printer.h"
#include "controller/apiwire/api_wire.h"

namespace sbx::cli {

int RunAudit(CommandContext& ctx, const AuditCommandOptions& options) {
  if (!options.output.empty() && options.output != "json") {
    return ctx.Fail(api::InvalidArgumentError("--output must be json (or left out for a table)"));
  }
  controller::Store::AuditQuery query;
  query.actor = options.actor;
  if (!options.since.empty()) {
    auto since = api::ParseDurationOrDays(options.since);
    if (!since.ok()) {
      return ctx.Fail(
          api::InvalidArgumentError("--since: " + std::string(since.status().message())));
    }
    query.since_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         (ctx.clock().Now() - *since).time_since_epoch())
                         .count();
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto records = (*store)->ListAudit(query);
  if (!records.ok()) {
    return ctx.Fail(records.status());
  }
  if (options.output == "json") {
    ctx.out() << controller::apiwire::AuditJson(*records) << "\n";
    return kExitOk;
  }
  if (records->empty()) {
    ctx.err() << "No audit records found\n";
    return kExitOk;
  }
  TablePrinter table({"TIME", "ACTOR", "ROLE", "VERB", "NAMESPACE", "OBJECT", "RESULT",
                      "RESOURCEVERSION", "SOURCE"});
  for (const controller::Store::AuditRecord& r : *records) {
    const auto time = api::FromUnixMillis(r.time_ms);
    table.AddRow({api::FormatRfc3339(time), r.actor, r.role, r.verb, r.object.namespace_,
                  QualifiedName(r.object), r.result,
                  std::to_string(r.resource_version_before) + "->" +
                      std::to_string(r.resource_version_after),
                  r.source});
  }
  table.Print(ctx.out());
  return kExitOk;
}

void AddAuditCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<AuditCommandOptions>();
  CLI::App* sub = app.add_subcommand("audit", "Show the audit log: who changed what, and when");
  sub->add_option("--since", options->since, "only records newer than this (e.g. 1h, 7d)");
  sub->add_option("--actor", options->actor, "only records of this actor (token name, user@host)");
  sub->add_option("-o,--output", options->output, "output format: json");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunAudit(ctx, *options); }; });
}

}  // namespace sbx::cli
